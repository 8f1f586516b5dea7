// Crash injection for tests (RocksDB's TEST_SYNC_POINT model): with
// FLINTKV_TEST_HOOKS defined, FLINTKV_TEST_CRASH_POINT(name) SIGKILLs the
// process when the environment variable FLINTKV_CRASH_POINT names the point
// (read once). Tests use it to stop RocksDB or recovery exactly between two
// persistence steps (tests/recovery/rocksdb_scenario.h); the adapter
// (memtable/rocksdb/) and recovery (recovery/) both have points.
//
// Only the test-only libraries flintkv_rocksdb_testing and
// flintkv_recovery_testing define FLINTKV_TEST_HOOKS. Everywhere else the
// macro expands to nothing, names and all: a production process must not
// kill itself because of its environment (ctest release_has_no_test_hooks
// checks the shipped libraries and flintkv_tool).
#pragma once

#ifdef FLINTKV_TEST_HOOKS

#include <signal.h>

#include <cstdlib>
#include <cstring>

namespace flintkv {
namespace rocks {

inline void CrashPoint(const char* name) {
  static const char* point = std::getenv("FLINTKV_CRASH_POINT");
  if (point && std::strcmp(point, name) == 0) raise(SIGKILL);
}

}  // namespace rocks
}  // namespace flintkv

#define FLINTKV_TEST_CRASH_POINT(name) ::flintkv::rocks::CrashPoint(name)

#else

#define FLINTKV_TEST_CRASH_POINT(name) \
  do {                                 \
  } while (false)

#endif

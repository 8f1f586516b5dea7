// Crash injection for tests: the process SIGKILLs itself at a named point
// when the environment variable FLINTKV_CRASH_POINT names it (read once).
// Used by tests/recovery/rocksdb_acknowledged_writes_test.cc to stop RocksDB or recovery exactly
// between two persistence steps; costs one predictable branch otherwise.
#pragma once

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

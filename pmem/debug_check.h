// FLINTKV_DCHECK(cond): internal debug assertion for preconditions that
// are too costly or too numerous for release builds (lock ownership,
// persistence-ordering preconditions named by docs/invariants.md ids).
//
// Active only when FLINTKV_DEBUG_CHECKS is defined: CMakeLists.txt defines
// it for the sanitizer builds (FLINTKV_SANITIZE) and Debug builds, whose
// -DNDEBUG (RelWithDebInfo) would switch plain assert() off. A failed check
// prints the file, line and condition to stderr and aborts.
// Without FLINTKV_DEBUG_CHECKS the macro expands to nothing: the condition
// is neither evaluated nor compiled, so it may name members that exist
// only in debug-checks builds, and release code is unchanged.
// Every translation unit of one program must agree on FLINTKV_DEBUG_CHECKS
// (it changes class layouts, e.g. memtable/combiner_lock.h): it is a
// directory-wide definition, never exported to users of the libraries.
// Thread safety: a check only reads; the failure path may run in any
// thread.
#pragma once

#ifdef FLINTKV_DEBUG_CHECKS
#include <cstdio>
#include <cstdlib>

namespace flintkv {
namespace pmem {
namespace internal {
[[noreturn]] inline void DcheckFailed(const char* file, int line,
                                      const char* cond) {
  std::fprintf(stderr, "%s:%d: FLINTKV_DCHECK failed: %s\n", file, line, cond);
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal
}  // namespace pmem
}  // namespace flintkv

#define FLINTKV_DCHECK(cond)                                              \
  do {                                                                    \
    if (!(cond)) {                                                        \
      ::flintkv::pmem::internal::DcheckFailed(__FILE__, __LINE__, #cond); \
    }                                                                     \
  } while (false)
#else
#define FLINTKV_DCHECK(cond) \
  do {                       \
  } while (false)
#endif

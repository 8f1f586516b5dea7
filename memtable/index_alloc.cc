#include <cstdlib>

#include "memtable/index_node.h"

#ifdef FLINTKV_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace flintkv {
namespace memtable {

#ifdef FLINTKV_WITH_JEMALLOC
void* AllocIndexMemory(size_t size) { return mallocx(size, 0); }
void FreeIndexMemory(void* p, size_t size) { sdallocx(p, size, 0); }
#else
void* AllocIndexMemory(size_t size) { return std::malloc(size); }
void FreeIndexMemory(void* p, size_t) { std::free(p); }
#endif

}  // namespace memtable
}  // namespace flintkv

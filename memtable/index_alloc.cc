#include <cstdlib>

#include "memtable/index_node.h"

namespace flintkv {
namespace memtable {

// The host's malloc, whatever it is: a library must not bring its own
// allocator into the process (benchmarks link jemalloc as their malloc).
void* AllocIndexMemory(size_t size) { return std::malloc(size); }
void FreeIndexMemory(void* p, size_t) { std::free(p); }

}  // namespace memtable
}  // namespace flintkv

// IndexNode: the DRAM half of a skiplist entry (§3.2).
//
// Holds a copy of the key (so traversals never read PMEM), the version that
// mirrors the NvmNode's, and `height` successor pointers. Level 0 links are
// written only by the combiner (or the version GC) under the combiner lock;
// higher levels by lock-free CAS in the promote phase and by the GC.
// Unlinking (standalone store only, memtable/version_gc.h): the GC first
// *marks* a node's successor pointers (low bit set), so that no CAS can link
// a new node after it, then unlinks it; Next() strips the mark, so a reader
// standing on an unlinked node still walks forward. Unlinked nodes are freed
// only after every reader that may hold them is gone (memtable/reclaim.h).
// RocksDB memtables never unlink: their pointers are never marked.
// Memory ordering: a node is initialised, then published with a release
// store/CAS; readers load successors with acquire. `promoted` is stored with
// release once every level is linked, read with acquire by the GC.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "pmem/layout.h"

namespace flintkv {
namespace memtable {

constexpr int kMaxHeight = 12;

struct IndexNode {
  std::atomic<uint64_t> version;
  pmem::NvmNode* pnode;
  // KeyComparator::OrderPrefix of the key, when the list's comparator has
  // one (else 0): searches compare it before the key, in the same line as
  // the node's first links, and read the key only on a tie.
  uint64_t prefix;
  uint32_t key_size;
  uint16_t height;
  // Set once Promote has linked every level (or recovery built the node):
  // the GC unlinks only such nodes, so no level is linked after its unlink.
  std::atomic<uint8_t> promoted;
  // Followed in memory by next_[height] and then the key bytes.
  std::atomic<IndexNode*> next_[1];

  IndexNode* Next(int level) const {
    return Unmarked(next_[level].load(std::memory_order_acquire));
  }
  static bool IsMarked(const IndexNode* p) {
    return (reinterpret_cast<uintptr_t>(p) & 1) != 0;
  }
  static IndexNode* Marked(IndexNode* p) {
    return reinterpret_cast<IndexNode*>(reinterpret_cast<uintptr_t>(p) | 1);
  }
  static IndexNode* Unmarked(IndexNode* p) {
    return reinterpret_cast<IndexNode*>(reinterpret_cast<uintptr_t>(p) &
                                        ~uintptr_t{1});
  }
  bool Promoted() const {
    return promoted.load(std::memory_order_acquire) != 0;
  }
  const char* key() const {
    return reinterpret_cast<const char*>(&next_[height]);
  }
  uint64_t Version() const { return version.load(std::memory_order_relaxed); }

  static size_t AllocSize(int height, size_t key_size) {
    return offsetof(IndexNode, next_) +
           sizeof(std::atomic<IndexNode*>) * height + key_size;
  }
};

// DRAM for index nodes: the host process's malloc (index_alloc.cc).
void* AllocIndexMemory(size_t size);
void FreeIndexMemory(void* p, size_t size);

// Where a list's index nodes come from when they are never freed one by
// one. Without one (nullptr), nodes are malloc'ed and freed singly, which
// lists whose nodes the version GC unlinks need. With one, a node lives as
// long as the arena: the RocksDB memtable puts its index in the memtable's
// own ConcurrentArena, as RocksDB's InlineSkipList does with its nodes, so
// an insert costs a bump of a per-core block instead of a malloc, and the
// whole index is released at once with the memtable instead of node by
// node on the flush thread.
class IndexArena {
 public:
  virtual ~IndexArena() = default;
  // size bytes, aligned for IndexNode, from any thread; nullptr if out of
  // memory. Valid until the arena's owner releases everything.
  virtual void* Allocate(size_t size) = 0;
};

// Allocates and initialises an unlinked node (all successors null).
inline IndexNode* NewIndexNode(pmem::NvmNode* pnode, const char* key,
                               uint32_t key_size, int height, uint64_t version,
                               IndexArena* arena = nullptr) {
  const size_t size = IndexNode::AllocSize(height, key_size);
  void* mem = arena ? arena->Allocate(size) : AllocIndexMemory(size);
  if (!mem) return nullptr;
  auto* n = static_cast<IndexNode*>(mem);
  n->version.store(version, std::memory_order_relaxed);
  n->pnode = pnode;
  n->prefix = 0;
  n->key_size = key_size;
  n->height = static_cast<uint16_t>(height);
  new (&n->promoted) std::atomic<uint8_t>(0);
  for (int i = 0; i < height; i++) {
    new (&n->next_[i]) std::atomic<IndexNode*>(nullptr);
  }
  std::memcpy(const_cast<char*>(n->key()), key, key_size);
  return n;
}

// Height of a new index node: branching factor 4 (as RocksDB's skiplists),
// at most kMaxHeight, from a per-thread xorshift generator. Shared by the
// durable skiplist and the benchmark baselines (tools/baselines/), which
// must use the same generator (paper §7.2).
inline int RandomIndexHeight() {
  static thread_local uint64_t state =
      0x9e3779b97f4a7c15ull ^ reinterpret_cast<uintptr_t>(&state);
  int h = 1;
  while (h < kMaxHeight) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    if ((state & 3) != 0) break;
    h++;
  }
  return h;
}

// A node from an IndexArena is left to the arena.
inline void DeleteIndexNode(IndexNode* n, IndexArena* arena = nullptr) {
  if (arena) return;
  FreeIndexMemory(n, IndexNode::AllocSize(n->height, n->key_size));
}

}  // namespace memtable
}  // namespace flintkv

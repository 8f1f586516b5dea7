// NodeArena: the PMEM space of one durable skiplist's nodes, modelled on
// RocksDB's ConcurrentArena.
//
// Small nodes come from a block of the calling thread's own (indexed by
// ThreadId): a bump of a pointer no other thread writes, with no lock and
// no shared cache line, the common path of every put. A thread's block is
// carved from the list's current chunk under the list mutex when it runs
// out. Threads without an id (ThreadId::Get() < 0) take per-CPU shards,
// each a block under its own mutex. A node too big for a block is carved
// from the chunk directly; a node bigger than a quarter chunk gets a chunk
// of exactly its size. Nodes allocated with use_reserve take the same path;
// only a new chunk they need may come from the reserve. So a list holds at
// most one partly used chunk, one partly used block per thread id that
// allocated from it, and one per shard. A cache line never holds fresh
// nodes of two threads: a block records the token of the thread that last
// bumped it, unique within the process (never reused, unlike a ThreadId or
// a thread_local's address), and a thread that is not that one starts on
// the next line; every carve starts on a line of its own.
//
// Reuse (standalone store with version GC): Free() returns a node's bytes
// once its unlink is durable and no reader holds it (P12, the GC's duty);
// Allocate serves from freed bytes first (FreeExtents, best fit), and
// AdoptChunks (recovery) frees every chunk byte no reachable node uses
// (P14). A list that never frees pays one relaxed load per allocation.
// Freed bytes go to whichever thread asks, so a reused node may share its
// line with another thread's nodes.
//
// Thread safety: Allocate and Free may be called concurrently. A thread's
// block is written only by the thread holding its id (ids pass from an
// exited thread to a new one through ThreadId's free list, which orders
// them), a shard's only under its mutex; the common path takes no lock (a
// thread's token is one thread_local load after its first allocation,
// which takes it from a process-wide counter with a relaxed fetch_add).
// UsedBytes reads every block's `free` (relaxed).
// Persistence: chunks are pool objects created atomically naming their
// owner list (P8, Region::NewChunk); nodes carry no state here (their
// persistence is the skiplist's, P1-P4), so no flush or fence is issued.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "flintkv/status.h"
#include "memtable/free_extents.h"
#include "memtable/slot_pages.h"
#include "pmem/region.h"

namespace flintkv {
namespace memtable {

class NodeArena {
 public:
  NodeArena(pmem::Region* region, uint64_t list_id, size_t chunk_size);
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  // size bytes (a multiple of pmem::kNodeAlign) of fresh PMEM in a chunk of
  // this list. NoSpace when the region is full; use_reserve dips into the
  // space the region holds back for writes already under way.
  Status Allocate(size_t size, bool use_reserve, char** out);
  // [p, p + size) (a node's AllocSize) may be handed out again.
  void Free(char* p, size_t size) { free_.Add(p, size); }
  // Recovery (before any other call): the list owns `chunks` (sorted by
  // offset); `kept` (offset, size) are the reachable nodes. Everything else
  // in the chunks becomes free.
  void AdoptChunks(const std::vector<pmem::ChunkInfo>& chunks,
                   std::vector<pmem::ChunkInfo> kept);
  // Bytes freed and not yet reused.
  size_t FreeBytes() const { return free_.Bytes(); }

  // Pool bytes held by this list's chunks.
  size_t ReservedBytes() const {
    return reserved_.load(std::memory_order_relaxed);
  }
  // Bytes that no longer serve an allocation: given to nodes, or chunk and
  // shard-block tails too short for the request that gave them up. Free
  // space left in the current chunk and in the shards is not counted
  // (ConcurrentArena's "allocated minus what shards hold unused").
  size_t UsedBytes() const;

 private:
  // A run of fresh bytes that nodes are bumped from.
  struct Block {
    char* cur = nullptr;
    char* end = nullptr;
    uint64_t last_user = 0;       // token of the last allocating thread
    std::atomic<size_t> free{0};  // end - cur, for UsedBytes
    size_t refill = 0;  // bytes of the next block (0: the full block size)
  };
  // Its thread's only. Starts small and doubles with every refill up to
  // the full size, so that a thread that writes a few nodes to a list
  // holds little of it (RocksDB may run many writers over small
  // memtables); a busy thread soon takes a lock once per full block.
  struct alignas(64) ThreadBlock : Block {
    ThreadBlock() { refill = 1 << 10; }
  };
  struct alignas(64) Shard : Block {
    std::mutex mu;  // guards the Block
  };

  // Bumps size bytes from b (its owner or its lock held), first carving a
  // new block (b->refill bytes, growing to block_size) from the chunk if b
  // has less than size left.
  Status BumpFrom(Block* b, size_t block_size, size_t size, bool use_reserve,
                  char** out);

  // Up to want bytes (at least need) from the current chunk, starting a new
  // one (from the reserve if allowed) when it has less than need left.
  // Under mu_.
  Status CarveLocked(size_t want, size_t need, bool use_reserve, char** begin,
                     size_t* got);

  pmem::Region* const region_;
  const uint64_t list_id_;
  const size_t chunk_size_;
  const size_t shard_block_;
  const size_t thread_block_;
  const int num_shards_;
  std::unique_ptr<Shard[]> shards_;
  SlotPages<ThreadBlock, 8> thread_blocks_;  // by ThreadId
  std::mutex mu_;                            // the current chunk
  char* chunk_cur_ = nullptr;
  char* chunk_end_ = nullptr;
  std::atomic<size_t> reserved_{0};  // chunk bytes
  std::atomic<size_t> carved_{0};    // bytes taken out of chunks
  FreeExtents free_;
};

}  // namespace memtable
}  // namespace flintkv

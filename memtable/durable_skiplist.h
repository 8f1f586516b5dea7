// DurableSkipList: the FlintKV durable skiplist (paper §3-§5, Alg. 1-5).
//
// Structure: a DRAM index of IndexNodes over a sorted singly-linked list of
// NvmNodes in PMEM, ordered by (key ascending, version descending).
// Updates run in four phases: locate (lock-free traversal), prepare
// (allocate + flush the node, persist its successor pointer, prefetch),
// attach (flat combiner validates the cached neighbours, assigns the
// version, links, persists the predecessor pointer with a single fence,
// publishes visible_version) and promote (lock-free upper levels).
//
// Thread safety: Insert/InsertBatch/readers/iterators may run concurrently
// from any threads (beyond ThreadId::kMaxThreads at once, threads share an
// overflow slot one at a time). Recover() must
// run before any other call, on one thread.
//
// Persistence invariants (see pmem/layout.h, DESIGN.md):
//  P1 a node's header, key and value, and its successor pointer, are durable
//     before any persistent pointer to it is (prepare's PERSIST_RANGE).
//  P2 when Insert returns, the node is durable and reachable from the head
//     (combiner's PERSIST_RANGE of the predecessor pointer; it also fences
//     the unfenced version flush before it).
//  P3 a batch is all-or-nothing after a crash: commit_version is durable
//     before batch_mode=1, every node of the batch is linked durably before
//     batch_mode=0, and recovery rolls back versions > commit_version while
//     batch_mode=1.
//  P4 recovery drops only version-MAX nodes and a torn batch (rule R1: the
//     single-fence optimisation lets a linked node's version still read MAX
//     after a crash; such an operation had not returned).
//  P5 readers filter by a cached visible_version, which a batch advances
//     once, after all its nodes are linked.
//  P12-P14 (version GC, standalone store only): see memtable/version_gc.h.
// Memory orderings: visible_version is published with release and read with
// acquire; level-0 links are release stores under the combiner lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "flintkv/status.h"
#include "memtable/index_node.h"
#include "memtable/key_comparator.h"
#include "memtable/node_arena.h"
#include "memtable/slot_pages.h"
#include "memtable/thread_id.h"
#include "pmem/layout.h"
#include "pmem/region.h"

namespace flintkv {
namespace memtable {

struct SkipListOptions {
  // Equal keys are duplicates to reject (RocksDB internal keys are unique);
  // otherwise an equal key is a newer version of the same key.
  bool unique_keys = false;
  // Standalone semantics for iterators: show the newest visible version of
  // each key and hide tombstones. Off for the RocksDB memtable, which wants
  // every entry.
  bool collapse_versions = true;
  // Benchmark baseline: run every phase of every update under one mutex.
  bool global_lock = false;
  // Bytes per PMEM chunk of the list's node arena.
  size_t chunk_size = 4 << 20;
  // The list's nodes may be unlinked by a VersionGc (memtable/version_gc.h)
  // and their PMEM reused; Recover() then also hands every byte of the
  // list's chunks that no reachable node occupies back to the arena (P14).
  // Off for RocksDB memtables (flushed whole, never unlinked).
  bool reclaim_space = false;
};

struct RecoveryStats {
  uint64_t nodes_kept = 0;
  uint64_t dropped_uncommitted = 0;  // version MAX (rule R1, P4)
  uint64_t rolled_back_batch = 0;    // torn batch (P3)
  uint64_t max_version = 0;
};

enum class InsertResult { kOk, kDuplicate };

template <class P>
class DurableSkipList {
 public:
  DurableSkipList(const KeyComparator* cmp, pmem::Region* region,
                  pmem::ListRoot* root, const SkipListOptions& options);
  ~DurableSkipList();
  DurableSkipList(const DurableSkipList&) = delete;
  DurableSkipList& operator=(const DurableSkipList&) = delete;

  // Reserves an unlinked node with data_size bytes of data in the list's
  // PMEM arena (any thread). The caller writes data (length-prefixed key, then
  // payload) and calls SealNode. NoSpace when the region is full.
  Status AllocateNode(size_t data_size, pmem::NvmNode** node,
                      bool use_reserve = false);
  // Finishes the header of an allocated node (key_size, flags, check).
  static void SealNode(pmem::NvmNode* node, uint32_t key_size, uint32_t flags);

  // PUT (Algorithm 1). On OK the node is durable and visible.
  Status Insert(pmem::NvmNode* node, InsertResult* result = nullptr);
  // WRITEBATCH (Algorithms 3-4): all nodes become durable and visible
  // atomically. Keys must be pairwise distinct (InvalidArgument otherwise,
  // with nothing inserted; the allocated nodes stay unused in the arena).
  Status InsertBatch(pmem::NvmNode* const* nodes, size_t n);

  // Rebuilds the index from the persistent list (§5). See P4.
  Status Recover(RecoveryStats* stats);

  uint64_t VisibleVersion() const {
    return visible_version_.load(std::memory_order_acquire);
  }
  // Newest version every node at or below which is durable. Equal to the
  // visible version while every write is durable before it is visible
  // (P2); a write path that publishes before persisting must lower it, as
  // the GC unlinks against it (P12).
  uint64_t DurableVersion() const { return VisibleVersion(); }
  const std::atomic<uint64_t>* visible_version_word() const {
    return &visible_version_;
  }
  // Newest node with this key and version <= vv, or nullptr.
  const IndexNode* Find(const char* key, uint64_t vv) const;

  class Iterator {
   public:
    Iterator(const DurableSkipList* list, uint64_t vv) : list_(list), vv_(vv) {}
    bool Valid() const { return node_ != nullptr; }
    const IndexNode* node() const { return node_; }
    void Seek(const char* key);
    void SeekForPrev(const char* key);
    void SeekToFirst();
    void SeekToLast();
    void Next();
    void Prev();
    uint64_t version() const { return vv_; }

   private:
    void SettleForward(const IndexNode* n);
    void SettleBackward(const char* bound);
    const DurableSkipList* list_;
    uint64_t vv_;
    const IndexNode* node_ = nullptr;
  };

  // Estimated number of entries ordered before key (RocksDB's
  // ApproximateNumEntries), from the index levels; O(log n).
  uint64_t EstimateCountBefore(const char* key) const;
  // Entries (all versions) with start <= key < end: exact for ranges of up
  // to a few thousand entries, else the level estimate.
  uint64_t CountRange(const char* start, const char* end) const;
  size_t NumEntries() const;
  size_t DramBytes() const;
  // Pool bytes held by the list's chunks.
  size_t PmemBytes() const { return arena_.ReservedBytes(); }
  // Of those, bytes nodes took (NodeArena::UsedBytes).
  size_t PmemBytesUsed() const { return arena_.UsedBytes(); }
  const KeyComparator* comparator() const { return cmp_; }
  pmem::ListRoot* root() const { return root_; }
  pmem::Region* region() const { return region_; }
  // Of PmemBytes, bytes freed by the GC (or found unused by Recover) and
  // not yet reused.
  size_t PmemBytesFree() const { return arena_.FreeBytes(); }
  // reclaim_space: nodes linked so far that were a newer version of an
  // existing key or a tombstone (approximate while writers run).
  uint64_t SupersededCount() const;

 private:
  template <class>
  friend class VersionGc;
  enum AdvStatus : int { kEmpty = 0, kReady, kSuccess, kFailed };

  // One prepared node and its cached neighbours (an "advertisement" entry).
  struct PutAdv {
    IndexNode* inode;
    IndexNode* preds[kMaxHeight];
    IndexNode* succs[kMaxHeight];
  };

  // Per-thread state, one cache line apart to avoid false sharing; in pages
  // of kSlotsPerPage allocated on first use. Small pages: a page is counted
  // in the memtable's usage, and RocksDB trims flushed-memtable history by
  // a few KB (issue 8k).
  struct alignas(64) Slot {
    std::atomic<int> status{kEmpty};
    PutAdv* put = nullptr;
    std::vector<PutAdv>* batch = nullptr;
    // Written by the owner thread only (load + store, no RMW), read by any.
    std::atomic<uint64_t> nodes{0};
    std::atomic<uint64_t> dram_bytes{0};
    std::atomic<uint64_t> superseded{0};  // see CountSuperseded
    void Count(uint64_t bytes) {
      nodes.store(nodes.load(std::memory_order_relaxed) + 1,
                  std::memory_order_relaxed);
      dram_bytes.store(dram_bytes.load(std::memory_order_relaxed) + bytes,
                       std::memory_order_relaxed);
    }
  };

  Slot* SlotOf(int tid);
  template <class Self, class Fn>
  static void ForEachSlot(Self* self, Fn fn);
  Slot* AcquireSlot(std::unique_lock<std::mutex>* overflow);
  Status PrepareOnce(pmem::NvmNode* node, IndexNode** inode, Slot* slot);
  void Locate(const char* key, IndexNode** preds, IndexNode** succs) const;
  void Prepare(PutAdv* adv);
  int Attach(Slot* slot);
  void CombineAll();
  bool ProcessPut(PutAdv* adv, bool in_batch);
  void ProcessBatch(std::vector<PutAdv>* batch);
  void Promote(PutAdv* adv);
  bool IsDuplicate(const IndexNode* inode, const IndexNode* succ) const;
  void CountSuperseded(Slot* slot, const PutAdv& adv);
  bool HasDuplicateKeys(pmem::NvmNode* const* nodes, size_t n) const;

  // Traversal helpers for readers.
  const IndexNode* FindGreaterOrEqual(const char* key, uint64_t vv) const;
  const IndexNode* FindLessThan(const char* key) const;  // nullptr key: last
  bool Before(const IndexNode* a, const IndexNode* b) const;

  int HeightFor(const char* key, uint32_t key_size) const;
  uint64_t ToOffset(const void* p) const { return region_->ToOffset(p); }

  const KeyComparator* const cmp_;
  pmem::Region* const region_;
  pmem::ListRoot* const root_;
  const SkipListOptions options_;
  NodeArena arena_;
  IndexNode* head_;
  std::atomic<int> max_height_{1};
  std::atomic<uint64_t> visible_version_{0};
  // Nodes the version GC unlinked and DRAM bytes it freed (GC only).
  std::atomic<uint64_t> gc_unlinked_{0};
  std::atomic<uint64_t> gc_freed_dram_{0};
  alignas(64) std::atomic<bool> combiner_lock_{false};
  std::mutex global_mu_;  // global_lock baseline only
  static constexpr int kSlotsPerPage = 8;
  SlotPages<Slot, kSlotsPerPage> slot_pages_;  // see SlotOf
  std::mutex overflow_mu_;  // serialises the users of overflow_slot_
  Slot overflow_slot_;
};

}  // namespace memtable
}  // namespace flintkv

#include "memtable/durable_skiplist_inl.h"
#include "memtable/durable_skiplist_read_inl.h"

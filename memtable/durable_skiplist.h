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
// Persistence invariants (all defined, with their tests and mutants, in
// docs/invariants.md):
//  P1 a node's header, key and value, and its successor pointer, are durable
//     before any persistent pointer to it is (prepare's PERSIST_RANGE).
//  P2 when a sync Insert returns, the node is durable and reachable from
//     the head (per-put: the combiner flushes the predecessor pointer and
//     the version, then fences once, an SFENCE, before it publishes
//     visible_version or sets any status; group commit: P15). The SFENCE
//     orders the write-backs before every later store of the combiner
//     (Intel SDM and AMD APM, quoted in pmem/persist.h), so neither a waiter
//     nor the combiner's own caller can observe the acknowledgment first.
//     The locked release of the combiner lock (Alg. 1 line 40) is not what
//     makes it durable: on AMD a locked instruction does not order CLWB.
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
//  P15 (group commit) a pass links every ready strong advertisement it
//     serves (every slot's while a thread waits for the lock, else only its
//     own: Attach), flushes their versions and predecessor pointers, fences
//     once, and only then publishes visible_version and releases their
//     waiters. A crash before that fence may leave any subset of the pass's
//     nodes linked, with version MAX or their version: none was
//     acknowledged or visible, so recovery keeps those with a version and
//     drops those with MAX (P4).
//  P16 (weak durability) a write with sync=false is released once visible;
//     its version/link words are recorded as unpersisted. Before the durable
//     cut moves past them (Persist, a strong pass, the background bound),
//     the thread moving it re-flushes every recorded word and fences (a
//     fence drains only its own thread's flushes).
//  P17 ListRoot::durable_cut != 0 while unpersisted weak writes may exist:
//     every node with version >= durable_cut is dropped by recovery, so a
//     crash keeps a prefix of the commit (version) order and a batch (one
//     version) whole. The cut is durable before the first weak link of an
//     epoch, and it is cleared only after P16's fence.
// Concurrency of the weak state: unpersisted_ and cut_active_ are touched
// only under the combiner lock.
// Memory orderings: visible_version is published with release and read with
// acquire; level-0 links are release stores under the combiner lock.
// Statistics (WriteStats) are per-slot counters written by their owner with
// relaxed load+store (no RMW, no shared line on the hot path).
#pragma once

#include <x86intrin.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "flintkv/status.h"
#include "memtable/combiner_lock.h"
#include "memtable/index_node.h"
#include "memtable/key_comparator.h"
#include "memtable/node_arena.h"
#include "memtable/policy_seams.h"
#include "memtable/slot_pages.h"
#include "memtable/thread_id.h"
#include "pmem/debug_check.h"
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
  // Bytes per PMEM chunk of the list's node arena.
  size_t chunk_size = 4 << 20;
  // Keep WriteStats counters (64 bytes per writer thread, counted in
  // DramBytes). Off for the RocksDB memtable.
  bool write_stats = true;
  // How a combining pass makes strong (sync) writes durable: kPerPut is the
  // paper's (one fence per served put, P2); kGroup fences once per pass
  // (P15). Weak writes (sync=false) never wait for a fence (P16/P17).
  enum class CommitMode : uint8_t { kPerPut, kGroup };
  CommitMode commit_mode = CommitMode::kPerPut;
  // Bound on weak writes linked since the last drain: a combining pass that
  // finds this many drains them first (P16), so the list of words to
  // re-flush (16 bytes per weak write) and one drain's lock hold stay
  // bounded even with no Persist() and no background persister.
  size_t max_unpersisted_writes = 1 << 15;
  // The list's nodes may be unlinked by a VersionGc (memtable/version_gc.h)
  // and their PMEM reused; Recover() then also hands every byte of the
  // list's chunks that no reachable node occupies back to the arena (P14).
  // Off for RocksDB memtables (flushed whole, never unlinked).
  bool reclaim_space = false;
  // Index nodes from this arena instead of malloc (memtable/index_node.h):
  // never freed singly, left out of DramBytes (the arena's owner counts
  // them). Must outlive the list. Ignored with reclaim_space, whose GC
  // frees nodes one by one.
  IndexArena* index_arena = nullptr;
};

// Write-path counters of one list (benchmark instrumentation).
// Sums of per-slot counters; approximate while writers run.
struct WriteStats {
  uint64_t ops = 0;          // Insert/InsertBatch calls that linked
  uint64_t nodes = 0;        // nodes inserted
  uint64_t fences = 0;       // SFENCE drains on the write path (all threads)
  uint64_t full_fences = 0;  // Alg. 1 l. 40 full fences (locked release)
  uint64_t passes = 0;       // combining passes
  uint64_t ads_served = 0;   // advertisements handled by passes
  uint64_t retries = 0;      // failed validations (the worker re-locates)
  uint64_t critical_ns = 0;  // combiner lock held (passes and barriers)
  uint64_t barriers = 0;     // P16 drains (Persist, strong after weak, bound)
};

struct RecoveryStats {
  uint64_t nodes_kept = 0;
  uint64_t dropped_uncommitted = 0;  // version MAX (rule R1, P4)
  uint64_t rolled_back_batch = 0;    // torn batch (P3)
  uint64_t dropped_unpersisted = 0;  // weak writes beyond the cut (P17)
  uint64_t max_version = 0;
};

enum class InsertResult { kOk, kDuplicate };

struct DurableSkipListTestPeer;  // tests/core/debug_checks_test.cc

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

  // PUT (Algorithm 1). On OK the node is visible, and durable if sync
  // (else durable after the next Persist or strong pass, P16/P17).
  Status Insert(pmem::NvmNode* node, InsertResult* result = nullptr,
                bool sync = true);
  // WRITEBATCH (Algorithms 3-4): all nodes become visible atomically, and
  // durable atomically (at return if sync, else as Insert). Keys must be
  // pairwise distinct (InvalidArgument otherwise, with nothing inserted;
  // the allocated nodes stay unused in the arena).
  Status InsertBatch(pmem::NvmNode* const* nodes, size_t n, bool sync = true);
  // Barrier: when it returns, every write that returned before the call is
  // durable (P16, P17). Waits for the combiner lock.
  void Persist();
  // True if weak writes may be waiting for Persist (a hint, relaxed).
  bool HasUnpersisted() const {
    return weak_dirty_.load(std::memory_order_relaxed);
  }
  WriteStats GetWriteStats() const;

  // Rebuilds the index from the persistent list (§5). See P4.
  Status Recover(RecoveryStats* stats);

  uint64_t VisibleVersion() const {
    return visible_version_.load(std::memory_order_acquire);
  }
  // Newest version every node at or below which is durable by the time the
  // GC unlinks against it (P12): the visible version. Strong writes are
  // durable before they are visible (P2/P15); weak writes (P16) are not,
  // but the GC drains them (DrainWeakLocked) under the combiner lock before
  // each hold's first unlink, so they are durable before it acts on them.
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

  // Entries (all versions) with start <= key < end (RocksDB's
  // ApproximateNumEntries): exact for ranges of fewer than 4096 entries,
  // else an estimate from the index levels, within tens of percent;
  // monotone in the range, deterministic, O(log n).
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
  friend struct DurableSkipListTestPeer;
  enum AdvStatus : int { kEmpty = 0, kReady, kSuccess, kFailed };

  // One prepared node and its cached neighbours (an "advertisement" entry).
  struct PutAdv {
    IndexNode* inode;
    IndexNode* preds[kMaxHeight];
    IndexNode* succs[kMaxHeight];
  };

  // WriteStats counters of one slot, each written only by the thread using
  // the slot. Kept apart from Slot (one line) so that lists without
  // statistics (the RocksDB memtable, whose size RocksDB accounts) pay
  // nothing for them.
  struct alignas(64) SlotStats {
    std::atomic<uint64_t> ops{0}, fences{0}, full_fences{0}, passes{0}, ads{0},
        retries{0}, crit_ticks{0}, barriers{0};
  };

  // Per-thread state, one cache line apart to avoid false sharing; in pages
  // of kSlotsPerPage allocated on first use. Small pages: a page is counted
  // in the memtable's usage, and RocksDB trims flushed-memtable history by
  // a few KB.
  struct alignas(64) Slot {
    std::atomic<int> status{kEmpty};
    PutAdv* put = nullptr;
    std::vector<PutAdv>* batch = nullptr;
    bool sync = true;
    SlotStats* stats = nullptr;  // null unless SkipListOptions::write_stats
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
  static_assert(sizeof(Slot) == 64,
                "one cache line per writer (RocksDB accounts slot pages)");

  // Owner-only counter update: relaxed load + store, no RMW. Building with
  // -DFLINTKV_NO_WRITE_STATS removes the counters (to measure their cost,
  // docs/results/durability_modes.md).
  static void Bump(Slot* s, std::atomic<uint64_t> SlotStats::*field,
                   uint64_t d = 1) {
#ifndef FLINTKV_NO_WRITE_STATS
    if (!s || !s->stats) return;  // s: null for the GC's drain
    std::atomic<uint64_t>& c = s->stats->*field;
    c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
#endif
  }
  static uint64_t Ticks() {
#ifndef FLINTKV_NO_WRITE_STATS
    return __rdtsc();
#else
    return 0;
#endif
  }
  // Fences of the write path, counted in the calling thread's slot (a
  // policy without persistence issues none).
  void CountedPersist(Slot* me, const void* p, size_t n) {
    P::Persist(p, n);
    if (P::kDurable) Bump(me, &SlotStats::fences);
  }
  void CountedFence(Slot* me) {
    P::Fence();
    if (P::kDurable) Bump(me, &SlotStats::fences);
  }
  // How ProcessPut makes its link durable.
  enum class LinkMode { kPerPut, kGroup, kWeak };
  // *word = v, written back for the fence that `mode` names (ProcessPut's
  // link and version words); `unflushed` (a mutant) leaves it unflushed.
  static void WriteLinkWord(uint64_t* word, uint64_t v, LinkMode mode,
                            bool unflushed);
  // Debug checks: the caller holds the combiner lock, or this is the
  // global-lock baseline (whose mutex covers every phase).
  void AssertCombinerOrGlobalLock() const {
    FLINTKV_DCHECK(GlobalLocked<P>() || combiner_lock_.HeldByCurrentThread());
  }
  static bool MutantBreaksVersionOrder();
  Slot* SlotOf(int tid);
  template <class Self, class Fn>
  static void ForEachSlot(Self* self, Fn fn);
  Slot* AcquireSlot(std::unique_lock<std::mutex>* overflow);
  Status PrepareOnce(pmem::NvmNode* node, IndexNode** inode, Slot* slot);
  void Locate(const char* key, IndexNode** preds, IndexNode** succs) const;
  void Prepare(PutAdv* adv, Slot* me);
  int Attach(Slot* slot);
  // Alg. 1 line 40: releases the combiner lock with the full fence.
  void ReleaseCombinerWithFullFence(Slot* me);
  void CombineAll(Slot* me, bool everyone);
  // fn(Slot&) on every slot if everyone, else on *me only.
  template <class Fn>
  void ForEachServed(Slot* me, bool everyone, Fn fn);
  void CombineStrong(Slot* me, bool everyone, uint64_t* v);
  void CombineWeak(Slot* me, bool everyone, uint64_t* v);
  bool ProcessPut(PutAdv* adv, uint64_t v, LinkMode mode, Slot* me);
  void ProcessBatch(std::vector<PutAdv>* batch, uint64_t v, Slot* me);
  void ProcessBatchWeak(std::vector<PutAdv>* batch, uint64_t v, Slot* me);
  void BeginWeakEpoch(uint64_t first_unpersisted, Slot* me);
  void EndWeakEpoch(Slot* me);
  // Under the combiner lock: makes pending weak writes durable (P16) and
  // clears the cut (P17). For the version GC before it unlinks (P12).
  void DrainWeakLocked() {
    combiner_lock_.AssertHeld();
    if (cut_active_) EndWeakEpoch(nullptr);
  }
  void Promote(PutAdv* adv);
  bool IsDuplicate(const IndexNode* inode, const IndexNode* succ) const;
  void CountSuperseded(Slot* slot, const PutAdv& adv);
  bool HasDuplicateKeys(pmem::NvmNode* const* nodes, size_t n) const;

  // Key order through the index (KeyComparator::CompareWithPrefix): kp is
  // PrefixOf(key).
  uint64_t PrefixOf(const char* key) const { return cmp_->IndexPrefix(key); }
  int CompareTo(const IndexNode* n, const char* key, uint64_t kp) const {
    return cmp_->CompareWithPrefix(n->key(), n->prefix, key, kp);
  }
  int CompareNodes(const IndexNode* a, const IndexNode* b) const {
    return CompareTo(a, b->key(), b->prefix);
  }
  IndexNode* NewNode(pmem::NvmNode* pnode, const char* key, uint32_t key_size,
                     int height, uint64_t version) {
    IndexNode* n =
        NewIndexNode(pnode, key, key_size, height, version, index_arena_);
    if (n) n->prefix = PrefixOf(n->key());
    return n;
  }

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
  IndexArena* const index_arena_;  // nullptr: malloc (see SkipListOptions)
  NodeArena arena_;
  IndexNode* head_;
  std::atomic<int> max_height_{1};
  std::atomic<uint64_t> visible_version_{0};
  // Nodes the version GC unlinked and DRAM bytes it freed (GC only).
  std::atomic<uint64_t> gc_unlinked_{0};
  std::atomic<uint64_t> gc_freed_dram_{0};
  // Starts a cache line (CombinerLock adds no padding of its own) and
  // shares it with the combiner-only state below.
  alignas(64) CombinerLock combiner_lock_;
  // Threads in Attach that found the lock taken. A combiner scans every
  // slot only while this is non-zero (else it serves its own put alone).
  // In the lock's line, which the holder and the waiters touch anyway.
  std::atomic<int> waiters_{0};
  // Under the combiner lock: strong waiters of the current group pass,
  // and the weak state (P16/P17).
  std::vector<Slot*> group_;
  std::vector<const uint64_t*> unpersisted_;
  bool cut_active_ = false;
  std::atomic<bool> weak_dirty_{false};
  GlobalMutex<P> global_mu_;  // the global-lock baseline's (policy_seams.h)
  static constexpr int kSlotsPerPage = 8;
  SlotPages<Slot, kSlotsPerPage> slot_pages_;       // see SlotOf
  SlotPages<SlotStats, kSlotsPerPage> stat_pages_;  // write_stats only
  std::mutex overflow_mu_;  // serialises the users of overflow_slot_
  Slot overflow_slot_;
  SlotStats overflow_stats_;
};

}  // namespace memtable
}  // namespace flintkv

#include "memtable/durable_skiplist_commit_inl.h"
#include "memtable/durable_skiplist_inl.h"
#include "memtable/durable_skiplist_read_inl.h"

// Definitions for durable_skiplist.h (template on the persistence policy P).
// Every flush/fence names the invariant it serves; see the header contract.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "memtable/list_walk.h"
#include "memtable/policy_seams.h"
#include "pmem/persist.h"

namespace flintkv {
namespace memtable {

template <class P>
DurableSkipList<P>::DurableSkipList(const KeyComparator* cmp,
                                    pmem::Region* region, pmem::ListRoot* root,
                                    const SkipListOptions& options)
    : cmp_(cmp),
      region_(region),
      root_(root),
      options_(options),
      index_arena_(options.reclaim_space ? nullptr : options.index_arena),
      arena_(region, root->list_id, options.chunk_size) {
  if (options_.write_stats) overflow_slot_.stats = &overflow_stats_;
  head_ = NewIndexNode(&root_->head, "", 0, kMaxHeight, 0, index_arena_);
}

template <class P>
DurableSkipList<P>::~DurableSkipList() {
  if (index_arena_) return;  // the arena's owner frees every node at once
  IndexNode* n = head_;
  while (n) {
    IndexNode* next = n->Next(0);
    DeleteIndexNode(n);
    n = next;
  }
}

// Slot pages are allocated on a thread's first write, so an idle list
// carries no slot array (RocksDB counts it in the memtable's size).
template <class P>
typename DurableSkipList<P>::Slot* DurableSkipList<P>::SlotOf(int tid) {
  Slot* s = slot_pages_.Get(tid);
  // The stats pointer is read only by the slot's owner (Bump); totals are
  // summed from stat_pages_ (GetWriteStats), so no other thread reads it.
  if (s && options_.write_stats && !s->stats) {
    s->stats = stat_pages_.Get(tid);
    if (!s->stats) return nullptr;
  }
  return s;
}

// Calls fn on every allocated slot of an id below ThreadId::HighWater(),
// then on the overflow slot.
template <class P>
template <class Self, class Fn>
void DurableSkipList<P>::ForEachSlot(Self* self, Fn fn) {
  self->slot_pages_.ForEach(fn);
  fn(self->overflow_slot_);
}

// unique_keys (RocksDB internal keys): the height is a hash of the key, so
// the index, and with it ApproximateNumEntries, depends only on the set of
// keys, not on which threads inserted them in what order. Not for versioned
// lists: every version of a key would get the same height.
template <class P>
int DurableSkipList<P>::HeightFor(const char* key, uint32_t key_size) const {
  if (!options_.unique_keys) return RandomIndexHeight();
  uint64_t x = 0xcbf29ce484222325ull;  // FNV-1a, then a 64-bit finaliser
  for (uint32_t i = 0; i < key_size; i++) {
    x = (x ^ static_cast<unsigned char>(key[i])) * 0x100000001b3ull;
  }
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  int h = 1;
  while (h < kMaxHeight && (x & 3) == 0) {  // branching factor 4
    x >>= 2;
    h++;
  }
  return h;
}

template <class P>
Status DurableSkipList<P>::AllocateNode(size_t data_size, pmem::NvmNode** node,
                                        bool use_reserve) {
  if (data_size > UINT32_MAX) {
    return Status::InvalidArgument("entry larger than 4 GiB");
  }
  char* p;
  Status s =
      arena_.Allocate(pmem::NvmNode::AllocSize(data_size), use_reserve, &p);
  if (!s.ok()) return s;
  *node = reinterpret_cast<pmem::NvmNode*>(p);
  (*node)->data_size = static_cast<uint32_t>(data_size);
  return Status::OK();
}

template <class P>
void DurableSkipList<P>::SealNode(pmem::NvmNode* node, uint32_t key_size,
                                  uint32_t flags) {
  node->key_size = key_size;
  node->flags = flags;
  node->check = pmem::NvmNode::HeaderCheck(node->data_size, key_size, flags);
}

// Location-independent part of PREPARE (Alg. 1 lines 15-20), done once per
// operation before the first locate so that locate compares DRAM keys.
// The index node copies the key before the node is flushed: on some CPUs
// (this project's AMD EPYC test machine) any load or store to a line whose
// CLWB is still in flight waits for the write-back, ~300 ns
// (docs/results/archive/listdb_gap.md), so nothing here touches the node after
// its flush.
template <class P>
Status DurableSkipList<P>::PrepareOnce(pmem::NvmNode* node, IndexNode** inode,
                                       Slot* slot) {
  int height = HeightFor(node->data(), node->key_size);
  *inode = NewNode(node, node->data(), node->key_size, height,
                   pmem::kUncommittedVersion);
  if (!*inode) return Status::NoSpace("out of DRAM for the index");
  node->version = pmem::kUncommittedVersion;
  node->next = 0;
  if (!Faulty<P>(Fault::kNoNodeFlush) &&
      !Probing<P>(MeasureProbe::kNoNodePersist)) {
    // P1: the node's lines after its first, flushed now (their write-back
    // overlaps locate) and fenced by Prepare's PERSIST_RANGE. The first line
    // (next, version, the rest of the header) is flushed by that
    // PERSIST_RANGE itself, after next is written: flushing it here too
    // would cost a second write-back, and Prepare's store to next would
    // wait for the first.
    const uintptr_t begin = reinterpret_cast<uintptr_t>(node);
    const uintptr_t end = begin + sizeof(pmem::NvmNode) + node->data_size;
    const uintptr_t rest = (begin | (pmem::kCacheLine - 1)) + 1;
    if (end > rest) P::Flush(reinterpret_cast<const void*>(rest), end - rest);
  }
  slot->Count(index_arena_ ? 0
                           : IndexNode::AllocSize(height, (*inode)->key_size));
  int mh = max_height_.load(std::memory_order_relaxed);
  while (height > mh && !max_height_.compare_exchange_weak(
                            mh, height, std::memory_order_relaxed)) {
  }
  return Status::OK();
}

// LOCATE: lock-free search; preds[i] is the last node with key < key at
// level i (so a new version lands before all older versions of its key).
template <class P>
void DurableSkipList<P>::Locate(const char* key, IndexNode** preds,
                                IndexNode** succs) const {
  const uint64_t kp = PrefixOf(key);
  IndexNode* x = head_;
  for (int level = kMaxHeight - 1; level >= 0; level--) {
    IndexNode* next = x->Next(level);
    while (next && CompareTo(next, key, kp) < 0) {
      x = next;
      next = x->Next(level);
      // If the search drops a level at x, it compares x's successor there
      // next: fetch it now, overlapping this level's remaining misses.
      if (level > 0) __builtin_prefetch(x->Next(level - 1), 0, 3);
    }
    preds[level] = x;
    succs[level] = next;
  }
}

// Per-attempt part of PREPARE (Alg. 1 lines 21-24).
template <class P>
void DurableSkipList<P>::Prepare(PutAdv* adv, Slot* me) {
  IndexNode* in = adv->inode;
  for (int i = 0; i < in->height; i++) {
    in->next_[i].store(adv->succs[i], std::memory_order_relaxed);
  }
  pmem::NvmNode* pn = in->pnode;
  pn->next = adv->succs[0] ? ToOffset(adv->succs[0]->pnode) : 0;
  static_assert(offsetof(pmem::NvmNode, next) == 0 && pmem::kNodeAlign >= 16,
                "next and version lie in the node's first line");
  if (Probing<P>(MeasureProbe::kNoNodePersist)) {
    // bench only: no write-back at all
  } else if (Faulty<P>(Fault::kNoPrepareFence)) {
    P::Flush(&pn->next, sizeof(pn->next));
  } else {
    // P1: node body + successor durable before the combiner links it. The
    // flush covers the node's first line (header, start of the key), which
    // PrepareOnce left to this flush.
    CountedPersist(me, &pn->next, sizeof(pn->next));
  }
}

template <class P>
bool DurableSkipList<P>::IsDuplicate(const IndexNode* inode,
                                     const IndexNode* succ) const {
  return options_.unique_keys && succ && CompareNodes(succ, inode) == 0;
}

template <class P>
Status DurableSkipList<P>::Insert(pmem::NvmNode* node, InsertResult* result,
                                  bool sync) {
  if (result) *result = InsertResult::kOk;
  std::unique_lock<std::mutex> overflow;
  Slot* slot = AcquireSlot(&overflow);
  PutAdv adv;
  // The global-lock baseline runs every phase under one mutex (always
  // strong, per-put; memtable/policy_seams.h).
  std::unique_lock<GlobalMutex<P>> global;
  if constexpr (GlobalLocked<P>()) global = std::unique_lock(global_mu_);
  Status s = PrepareOnce(node, &adv.inode, slot);
  if (!s.ok()) return s;
  int spins = 0;
  while (true) {
    Locate(adv.inode->key(), adv.preds, adv.succs);
    if (IsDuplicate(adv.inode, adv.succs[0])) {
      // Equal keys cannot appear between pred and succ without failing
      // validation, so a duplicate is always seen here.
      if (adv.succs[0]->Version() > VisibleVersion()) {
        // P2 for a duplicate answer: the equal node is linked in DRAM but
        // its pass has not fenced and published yet (a crash may still drop
        // it), so kDuplicate waits until it is visible, i.e. as durable as
        // its own writer was promised (P5 after P2/P15). Only this path
        // waits; a global-lock list never gets here (published under the
        // lock).
        detail::Backoff(&spins);
        continue;
      }
      DeleteIndexNode(adv.inode, index_arena_);
      if (result) *result = InsertResult::kDuplicate;
      return Status::OK();
    }
    Prepare(&adv, slot);
    if constexpr (GlobalLocked<P>()) {
      // Cannot fail: nothing moved under the lock.
      uint64_t v = visible_version_.load(std::memory_order_relaxed) + 1;
      ProcessPut(&adv, v, LinkMode::kPerPut, slot);
      visible_version_.store(v, std::memory_order_release);  // P5
      break;
    }
    slot->put = &adv;
    slot->batch = nullptr;
    slot->sync = sync;
    if (Attach(slot) == kSuccess) break;
    Bump(slot, &SlotStats::retries);
  }
  CountSuperseded(slot, adv);
  OnBeforePromote<P>(adv.inode);  // seam: nothing for production policies
  Promote(&adv);
  if constexpr (GlobalLocked<P>()) {
    P::FullFence();  // as the combiner does after its lock
  }
  Bump(slot, &SlotStats::ops);
  return Status::OK();
}

template <class P>
Status DurableSkipList<P>::InsertBatch(pmem::NvmNode* const* nodes, size_t n,
                                       bool sync) {
  if (n == 0) return Status::OK();
  if (HasDuplicateKeys(nodes, n)) {
    // Two nodes of one key would get the same version, and recovery finds
    // the list unsorted (Corruption).
    return Status::InvalidArgument("write batch holds a key twice");
  }
  std::unique_lock<std::mutex> overflow;
  Slot* slot = AcquireSlot(&overflow);
  std::vector<PutAdv> advs(n);
  std::unique_lock<GlobalMutex<P>> global;
  if constexpr (GlobalLocked<P>()) global = std::unique_lock(global_mu_);
  for (size_t i = 0; i < n; i++) {
    Status s = PrepareOnce(nodes[i], &advs[i].inode, slot);
    if (!s.ok()) {
      for (size_t j = 0; j < i; j++) {
        DeleteIndexNode(advs[j].inode, index_arena_);
      }
      return s;
    }
  }
  auto locate_and_prepare = [&] {
    // Alg. 3 lines 2-6: never retried by the worker; the combiner retries.
    for (PutAdv& a : advs) {
      Locate(a.inode->key(), a.preds, a.succs);
      Prepare(&a, slot);
    }
  };
  if constexpr (GlobalLocked<P>()) {
    locate_and_prepare();
    uint64_t v = visible_version_.load(std::memory_order_relaxed) + 1;
    ProcessBatch(&advs, v, slot);
    visible_version_.store(v, std::memory_order_release);  // P5
    for (PutAdv& a : advs) {
      CountSuperseded(slot, a);
      Promote(&a);
    }
    P::FullFence();
    Bump(slot, &SlotStats::ops);
    return Status::OK();
  }
  locate_and_prepare();
  slot->put = nullptr;
  slot->batch = &advs;
  slot->sync = sync;
  Attach(slot);  // a batch always succeeds (in-combiner retry)
  for (PutAdv& a : advs) {
    CountSuperseded(slot, a);
    Promote(&a);
  }
  Bump(slot, &SlotStats::ops);
  return Status::OK();
}

// reclaim_space: counts linked nodes that make garbage for the version GC
// (a newer version of a key, or a tombstone), so that it scans only when
// there is something to find. succs[0] is what the node was linked before.
template <class P>
void DurableSkipList<P>::CountSuperseded(Slot* slot, const PutAdv& adv) {
  if (!options_.reclaim_space) return;
  const IndexNode* succ = adv.succs[0];
  if ((adv.inode->pnode->flags & pmem::kNodeTombstone) ||
      (succ && CompareNodes(succ, adv.inode) == 0)) {
    slot->superseded.store(slot->superseded.load(std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
  }
}

template <class P>
uint64_t DurableSkipList<P>::SupersededCount() const {
  uint64_t n = 0;
  ForEachSlot(this, [&n](const Slot& s) {
    n += s.superseded.load(std::memory_order_relaxed);
  });
  return n;
}

template <class P>
bool DurableSkipList<P>::HasDuplicateKeys(pmem::NvmNode* const* nodes,
                                          size_t n) const {
  if (n < 2) return false;
  std::vector<const pmem::NvmNode*> sorted(nodes, nodes + n);
  std::sort(sorted.begin(), sorted.end(),
            [this](const pmem::NvmNode* a, const pmem::NvmNode* b) {
              return cmp_->Compare(a->data(), b->data()) < 0;
            });
  for (size_t i = 1; i < n; i++) {
    if (cmp_->Compare(sorted[i - 1]->data(), sorted[i]->data()) == 0) {
      return true;
    }
  }
  return false;
}

// The calling thread's advertisement slot. Threads without an id (beyond
// ThreadId::kMaxThreads, or in thread_local destructors after their id was
// returned) share the overflow slot, one at a time under *overflow, for the
// whole operation: no thread ever waits for an id.
template <class P>
typename DurableSkipList<P>::Slot* DurableSkipList<P>::AcquireSlot(
    std::unique_lock<std::mutex>* overflow) {
  int tid = ThreadId::Get();
  if (tid >= 0) {
    Slot* s = SlotOf(tid);
    if (s) return s;
  }
  *overflow = std::unique_lock<std::mutex>(overflow_mu_);
  return &overflow_slot_;
}

template <class P>
bool DurableSkipList<P>::Before(const IndexNode* a, const IndexNode* b) const {
  int c = CompareNodes(a, b);
  return c < 0 || (c == 0 && a->Version() > b->Version());
}

// PROMOTE: lock-free insertion into levels 1..height-1, bottom up.
template <class P>
void DurableSkipList<P>::Promote(PutAdv* adv) {
  IndexNode* in = adv->inode;
  // P13: upper levels only link a node already linked at level 0, which
  // gave it its version.
  FLINTKV_DCHECK(in->Version() != pmem::kUncommittedVersion);
  for (int i = 1; i < in->height; i++) {
    while (true) {
      IndexNode* pred = adv->preds[i];
      IndexNode* succ = adv->succs[i];
      in->next_[i].store(succ, std::memory_order_relaxed);
      if (pred->next_[i].compare_exchange_strong(
              succ, in, std::memory_order_release, std::memory_order_relaxed)) {
        break;
      }
      // Stale neighbours: walk on from pred (it still orders before us) in
      // (key asc, version desc) order; from the head if the GC marked pred
      // for unlinking (no node may be linked after it: P13).
      IndexNode* x = IndexNode::IsMarked(succ) ? head_ : pred;
      IndexNode* next = x->Next(i);
      while (next && Before(next, in)) {
        x = next;
        next = x->Next(i);
      }
      adv->preds[i] = x;
      adv->succs[i] = next;
    }
  }
  in->promoted.store(1, std::memory_order_release);  // the GC may unlink it
}

// Per-slot counters are written by their owner thread only; the sums are
// approximate while writers run (RocksDB asks for estimates).
template <class P>
size_t DurableSkipList<P>::NumEntries() const {
  size_t n = 0;
  ForEachSlot(this, [&n](const Slot& s) {
    n += s.nodes.load(std::memory_order_relaxed);
  });
  size_t gone = gc_unlinked_.load(std::memory_order_relaxed);
  return n > gone ? n - gone : 0;
}

template <class P>
size_t DurableSkipList<P>::DramBytes() const {
  // The head and the slot pages in use, plus every index node (nodes in an
  // IndexArena are counted by its owner, Count(0)).
  size_t n = (index_arena_ ? 0 : IndexNode::AllocSize(kMaxHeight, 0)) +
             slot_pages_.bytes() + stat_pages_.bytes();
  ForEachSlot(this, [&n](const Slot& s) {
    n += s.dram_bytes.load(std::memory_order_relaxed);
  });
  size_t gone = gc_freed_dram_.load(std::memory_order_relaxed);
  return n > gone ? n - gone : 0;
}

// §5: walk the sorted persistent list, drop what was never committed, and
// rebuild the index by appending (the list is sorted: O(n), no searches).
// W3: the walk validates the whole list (inside this list's chunks,
// bounded by its node count) and only reads the pool; the unlinks of
// dropped nodes are applied after it succeeded, so a refused pool is left
// byte-for-byte unchanged.
template <class P>
Status DurableSkipList<P>::Recover(RecoveryStats* stats) {
  RecoveryStats st;
  const bool batch_mode = root_->batch_mode != 0;
  const uint64_t commit = root_->commit_version;
  const uint64_t cut = root_->durable_cut;
  const bool keep_max = Faulty<P>(Fault::kNoMaxRule);
  IndexNode* last[kMaxHeight];
  for (auto& l : last) l = head_;
  Status alloc_status;
  Slot& slot = overflow_slot_;  // counters only; nothing runs concurrently
  std::vector<pmem::ChunkInfo> kept;  // reclaim_space: extents of kept nodes
  const std::vector<pmem::ChunkInfo> owned = region_->ChunksOf(root_->list_id);
  std::vector<ChunkRange> chunks;
  chunks.reserve(owned.size());
  for (const pmem::ChunkInfo& c : owned) chunks.push_back({c.offset, c.len});
  // One entry per run of dropped nodes: the link before the run (the head's
  // or a kept node's) and the offset after it.
  struct Unlink {
    uint64_t* link;
    uint64_t next;
  };
  std::vector<Unlink> unlinks;
  uint64_t* link = &root_->head.next;  // of the last kept node
  bool in_run = false;
  auto drop = [&](const pmem::NvmNode* n) {
    if (!in_run) unlinks.push_back({link, 0});
    in_run = true;
    unlinks.back().next = n->next;
    return WalkDecision::kKeep;  // W3: nothing is written during the walk
  };
  Status s = WalkList(
      *region_, root_, *cmp_, &chunks,
      [&](const pmem::NvmNode* n) {
        if (n->version == pmem::kUncommittedVersion && !keep_max) {
          st.dropped_uncommitted++;  // P4, rule R1
          return drop(n);
        }
        if (batch_mode && n->version > commit) {
          st.rolled_back_batch++;  // P3
          return drop(n);
        }
        if (cut != 0 && n->version >= cut && !Faulty<P>(Fault::kNoCutRule)) {
          st.dropped_unpersisted++;  // P17: beyond the weak prefix
          return drop(n);
        }
        auto* pn = const_cast<pmem::NvmNode*>(n);
        in_run = false;
        link = &pn->next;
        int h = HeightFor(n->data(), n->key_size);
        IndexNode* in = NewNode(pn, pn->data(), pn->key_size, h, n->version);
        if (!in) {
          alloc_status = Status::NoSpace("out of DRAM for the index");
          return WalkDecision::kKeep;
        }
        in->promoted.store(1, std::memory_order_relaxed);
        for (int i = 0; i < h; i++) {
          last[i]->next_[i].store(in, std::memory_order_relaxed);
          last[i] = in;
        }
        if (options_.reclaim_space) {
          kept.push_back({ToOffset(n), pmem::NvmNode::AllocSize(n->data_size)});
        }
        if (h > max_height_.load(std::memory_order_relaxed)) {
          max_height_.store(h, std::memory_order_relaxed);
        }
        slot.Count(index_arena_ ? 0 : IndexNode::AllocSize(h, pn->key_size));
        st.nodes_kept++;
        if (n->version > st.max_version) st.max_version = n->version;
        return WalkDecision::kKeep;
      },
      [](uint64_t*) {});
  if (!s.ok()) return s;
  if (!alloc_status.ok()) return alloc_status;
  for (const Unlink& u : unlinks) {
    *u.link = u.next;
    // P4: the unlink is flushed; fenced below before batch_mode clears.
    P::Flush(u.link, sizeof(*u.link));
  }
  P::Fence();  // P4: unlinks durable before the batch record is cleared
  if (batch_mode) {
    root_->batch_mode = 0;
    P::Persist(&root_->batch_mode, sizeof(root_->batch_mode));  // P3
  }
  if (cut != 0) {
    root_->durable_cut = 0;
    // P17: cleared after the unlinks above are durable; versions >= cut
    // will be reused by new writes.
    P::Persist(&root_->durable_cut, sizeof(root_->durable_cut));
  }
  if (options_.reclaim_space) {
    // P14: what no reachable node occupies is free; nothing else is.
    arena_.AdoptChunks(owned, std::move(kept));
  }
  visible_version_.store(st.max_version, std::memory_order_release);
  if (stats) *stats = st;
  return Status::OK();
}

}  // namespace memtable
}  // namespace flintkv

// VersionGc: bounded space for a versioned DurableSkipList (the standalone
// store): unlinks, durably, the versions no reader can see any more, and
// reuses their PMEM and DRAM (docs/gc.md).
//
// Garbage: per key, every version older than the newest version at or
// below the horizon H, plus that version itself if it is a tombstone (a
// reader at any version >= H then finds nothing either way). H =
// Reclaimer::Horizon(list.DurableVersion()): no running read, iterator or
// snapshot reads below H, and every node at or below H is durable. The
// newest version of a key is never garbage unless it is a tombstone, so
// every acknowledged latest value survives.
//  V1 the node(s) of the list's newest version are never garbage, even a
//     tombstone (a later pass takes it once a newer write exists): recovery
//     resumes versions at the newest surviving one, so versions keep
//     increasing across a reopen and a version number handed out before
//     is never reused.
//
// A pass walks level 0 from the head under the combiner lock, a bounded
// number of nodes per hold, and per key with garbage:
//  1. unlinks each garbage node from levels height-1..1: mark its level-i
//     pointer (CAS low bit), then CAS its predecessor past it;
//  2. marks the garbage nodes' level-0 pointers and links the kept node
//     before them to the next key's first node, in DRAM and in PMEM (one
//     8-byte store: a crash shows the list before or after, both valid);
//  3. flushes that PMEM pointer; one fence per lock hold (P12) before the
//     nodes are retired to the Reclaimer;
// then frees (Reclaimer::Reclaim) what no reader can hold: the index node
// to malloc, the NvmNode's bytes to the arena's free extents.
//
// Invariants (docs/invariants.md lists every one with its tests):
//  P12 a node's PMEM is reused only after the pointer that unlinked it is
//      durable: no durable pointer reachable from the head ever leads to
//      reused bytes. (Fault::kGcUnlinkNotPersisted breaks it.)
//  P13 a node is unlinked only once fully promoted, and its pointers are
//      marked first, so no level links a node after an unlinked one; the
//      combiner's validation (pred->next_[0] == succ) fails on a marked
//      pred, so no level-0 link is made to or from an unlinked node.
//  G4 (DRAM) a node is retired only once no level links it: a Promote may
//      link a new node before it at any time, so UnlinkUpper validates the
//      predecessor its walk found with the CAS itself and searches again on
//      failure (never a second read of that pointer).
//  P14 free space is never persisted: recovery derives it as the chunk
//      bytes no reachable node occupies (NodeArena::AdoptChunks), so no
//      crash leaves free-space metadata that disagrees with the list.
//
// Thread safety: RunPass may be called from any thread, one pass at a time
// (internal mutex), concurrently with Insert/InsertBatch/readers, provided
// every one of those runs inside a Reclaimer::Guard or pin of the same
// Reclaimer. Not for global-lock baseline lists (policy_seams.h) or
// unique_keys (RocksDB memtables).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "memtable/durable_skiplist.h"
#include "memtable/reclaim.h"

namespace flintkv {
namespace memtable {

struct GcStats {
  uint64_t passes = 0;
  uint64_t unlinked = 0;  // nodes unlinked (durably)
  uint64_t freed = 0;     // of which freed (PMEM and DRAM reusable)
  uint64_t horizon = 0;   // of the last pass
};

template <class P>
class VersionGc {
  static_assert(!GlobalLocked<P>(), "not for global-lock baseline lists");

 public:
  // nodes_per_hold: level-0 nodes examined per combiner-lock hold (writers
  // wait at most that long for the GC).
  VersionGc(DurableSkipList<P>* list, Reclaimer* reclaimer,
            size_t nodes_per_hold = 256)
      : list_(list), rec_(reclaimer), per_hold_(nodes_per_hold) {}
  ~VersionGc() { FreeAll(); }

  // One pass over the whole list; returns the nodes it unlinked.
  uint64_t RunPass();
  // Frees what earlier passes retired and no reader holds (also done at
  // the end of each pass).
  uint64_t Reclaim();
  // Frees every retired node: only when no reader or writer can run.
  void FreeAll();
  GcStats Stats() const;

 private:
  using Node = IndexNode;
  bool SameKey(const Node* a, const Node* b) const {
    return list_->CompareNodes(a, b) == 0;
  }
  Node* Next0(const Node* n) const {  // under the combiner lock
    list_->combiner_lock_.AssertHeld();
    return Node::Unmarked(n->next_[0].load(std::memory_order_relaxed));
  }
  // One lock hold from *cursor; false when the list end was reached.
  bool Step(uint64_t horizon, Node** cursor, std::vector<Node*>* unlinked);
  void UnlinkUpper(Node* r);
  Node* PredAt(const Node* r, int level) const;
  void Free(Node* n);

  DurableSkipList<P>* const list_;
  Reclaimer* const rec_;
  const size_t per_hold_;
  std::mutex mu_;  // one pass at a time
  std::atomic<uint64_t> passes_{0}, unlinked_{0}, freed_{0}, horizon_{0};
};

}  // namespace memtable
}  // namespace flintkv

#include "memtable/version_gc_inl.h"

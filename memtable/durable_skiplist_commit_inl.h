// Definitions for durable_skiplist.h, commit side: the flat combiner (ATTACH,
// PROCESS_PUT, PROCESS_WRITEBATCH), its three durability modes (per-put P2,
// group P15, weak P16/P17), the Persist barrier and the write statistics.
// Everything here except Attach's advertisement and the statistics sums runs
// under the combiner lock. Every flush/fence names the invariant it serves.
#pragma once

#include <x86intrin.h>

#include <algorithm>

#include "memtable/durable_skiplist_inl.h"
#include "memtable/policy_seams.h"
#include "pmem/persist.h"

namespace flintkv {
namespace memtable {

// Debug checks of version order (P5, P17) hold unless the kNoMaxRule
// mutant let recovery keep, and publish, version MAX: later versions wrap
// around, which its campaign must catch (mutant_test), not a check.
template <class P>
bool DurableSkipList<P>::MutantBreaksVersionOrder() {
  return Faulty<P>(Fault::kNoMaxRule);
}

// ATTACH (Alg. 1 lines 27-44): advertise, then either observe completion or
// become the combiner.
template <class P>
int DurableSkipList<P>::Attach(Slot* slot) {
  if (Probing<P>(MeasureProbe::kNoCombining) && !slot->batch) {  // bench
    combiner_lock_.Lock();
    const uint64_t v = visible_version_.load(std::memory_order_relaxed) + 1;
    const bool ok = ProcessPut(slot->put, v, LinkMode::kPerPut, slot);
    if (ok) visible_version_.store(v, std::memory_order_release);
    combiner_lock_.Unlock();
    return ok ? kSuccess : kFailed;
  }
  slot->status.store(kReady, std::memory_order_release);
  OnAdvertise<P>();  // seam: nothing for production policies
  int spins = 0;
  bool waiting = false;  // counted in waiters_
  while (true) {
    int st = slot->status.load(std::memory_order_acquire);
    if (st != kReady) {  // early release by another combiner
      if (waiting) waiters_.fetch_sub(1, std::memory_order_relaxed);
      return st;
    }
    if (combiner_lock_.TryLock()) {
      if (waiting) waiters_.fetch_sub(1, std::memory_order_relaxed);
      // Uncontended (no other thread counted itself waiting): the pass
      // serves our own advertisement only and reads no other thread's
      // slot, so a put's shared-memory traffic is the lock's line alone.
      // Relaxed: a waiter this misses is not lost, it retries the lock
      // (or is served by a later pass), so the count only decides whether
      // a scan is worth its misses.
      // The crash simulator's lockstep hook waits here until every thread
      // advertised, and then asks for the scan: its multi-put passes.
      const bool everyone =
          OnPassStart<P>() || waiters_.load(std::memory_order_relaxed) != 0;
      // No clock read for lists without statistics (the RocksDB memtable).
      const bool timed = slot->stats != nullptr;
      uint64_t t0 = timed ? Ticks() : 0;
      CombineAll(slot, everyone);
      if (timed) Bump(slot, &SlotStats::crit_ticks, Ticks() - t0);
      if (slot->sync) {
        // Alg. 1 lines 39-40 (P2, P15): our own strong write was fenced
        // (SFENCE) in the pass, before any acknowledgment; that fence makes
        // it durable before any later store of ours is visible. The locked
        // release is the paper's full fence, kept but not relied on
        // (pmem/persist.h). (Weak writes wait for no fence, P16.)
        ReleaseCombinerWithFullFence(slot);
      } else {
        combiner_lock_.Unlock();
      }
      return slot->status.load(std::memory_order_acquire);
    }
    if (!waiting) {
      // Counted once the lock was found taken, so that its holder (or the
      // next) scans the slots and serves us.
      waiting = true;
      waiters_.fetch_add(1, std::memory_order_relaxed);
    }
    detail::Backoff(&spins);
  }
}

template <class P>
void DurableSkipList<P>::ReleaseCombinerWithFullFence(Slot* me) {
  combiner_lock_.UnlockWithFullFence<P>();
  if (P::kDurable) Bump(me, &SlotStats::full_fences);
}

// One pass: the strong (sync) advertisements first, then the weak ones, so
// that every strong write of the pass is durable (P2/P15) before a weak
// epoch may start (P17's cut must not fall below an acknowledged write).
// The pass serves the ready advertisements among every slot, or only me's
// (everyone false: Attach saw no thread waiting). Serving a subset is
// always sound: an advertisement not served stays kReady, unacknowledged,
// and its thread retries the lock.
template <class P>
void DurableSkipList<P>::CombineAll(Slot* me, bool everyone) {
  combiner_lock_.AssertHeld();
  Bump(me, &SlotStats::passes);
  uint64_t v = visible_version_.load(std::memory_order_relaxed);
  CombineStrong(me, everyone, &v);
  CombineWeak(me, everyone, &v);
}

template <class P>
template <class Fn>
void DurableSkipList<P>::ForEachServed(Slot* me, bool everyone, Fn fn) {
  if (everyone) {
    ForEachSlot(this, fn);
  } else {
    fn(*me);
  }
}

template <class P>
void DurableSkipList<P>::CombineStrong(Slot* me, bool everyone, uint64_t* v) {
  combiner_lock_.AssertHeld();
  const bool group =
      options_.commit_mode == SkipListOptions::CommitMode::kGroup;
  bool started = false;
  group_.clear();
  ForEachServed(me, everyone, [&](Slot& s) {
    if (s.status.load(std::memory_order_acquire) != kReady || !s.sync) return;
    Bump(me, &SlotStats::ads);
    if (!started) {
      started = true;
      // P16/P17: earlier weak writes become durable before any strong write
      // of this pass can be acknowledged.
      if (cut_active_) EndWeakEpoch(me);
    }
    if (s.batch) {
      // Fences of its own (P3); they also drain this pass's earlier group
      // links, so publishing commit+1 below covers those versions too.
      ProcessBatch(s.batch, *v + 1, me);
      *v += 1;
      visible_version_.store(*v, std::memory_order_release);  // P5
      s.status.store(kSuccess, std::memory_order_release);
      return;
    }
    if (!ProcessPut(s.put, *v + 1, group ? LinkMode::kGroup : LinkMode::kPerPut,
                    me)) {
      s.status.store(kFailed, std::memory_order_release);  // nothing linked
      return;
    }
    *v += 1;
    if (group) {
      group_.push_back(&s);
      return;
    }
    visible_version_.store(*v, std::memory_order_release);  // P5, after P2
    s.status.store(kSuccess, std::memory_order_release);
  });
  if (group_.empty()) return;
  if (Faulty<P>(Fault::kPublishBeforeGroupFence)) {
    visible_version_.store(*v, std::memory_order_release);
    for (Slot* s : group_) s->status.store(kSuccess, std::memory_order_release);
    CountedFence(me);
    return;
  }
  // P15: the group fence; every version and link of the pass is durable.
  CountedFence(me);
  visible_version_.store(*v, std::memory_order_release);  // P5, after P15
  for (Slot* s : group_) s->status.store(kSuccess, std::memory_order_release);
}

template <class P>
void DurableSkipList<P>::CombineWeak(Slot* me, bool everyone, uint64_t* v) {
  combiner_lock_.AssertHeld();
  ForEachServed(me, everyone, [&](Slot& s) {
    if (s.status.load(std::memory_order_acquire) != kReady || s.sync) return;
    Bump(me, &SlotStats::ads);
    // P16: bounded (SkipListOptions::max_unpersisted_writes); the next
    // epoch starts below.
    if (cut_active_ &&
        unpersisted_.size() >= 2 * options_.max_unpersisted_writes) {
      EndWeakEpoch(me);
    }
    // P17: the cut is durable before the epoch's first weak link.
    if (!cut_active_) BeginWeakEpoch(*v + 1, me);
    if (s.batch) {
      ProcessBatchWeak(s.batch, *v + 1, me);
    } else if (!ProcessPut(s.put, *v + 1, LinkMode::kWeak, me)) {
      s.status.store(kFailed, std::memory_order_release);
      return;
    }
    *v += 1;
    weak_dirty_.store(true, std::memory_order_relaxed);
    visible_version_.store(*v, std::memory_order_release);  // P5 (not P2)
    s.status.store(kSuccess, std::memory_order_release);
  });
}

// PROCESS_PUT (Alg. 2) with version v. Runs under the combiner lock (or the
// global lock). Returns false, having changed nothing, if the cached
// neighbours are stale.
template <class P>
bool DurableSkipList<P>::ProcessPut(PutAdv* adv, uint64_t v, LinkMode mode,
                                    Slot* me) {
  AssertCombinerOrGlobalLock();
  IndexNode* in = adv->inode;
  IndexNode* pred = adv->preds[0];
  // Level 0 only changes under this lock, so a relaxed load suffices.
  if (pred->next_[0].load(std::memory_order_relaxed) != adv->succs[0]) {
    return false;
  }
  pmem::NvmNode* pn = in->pnode;
  // Debug checks of what this link relies on. P1: the node is sealed
  // (SealNode) and prepared, and the successor Prepare persisted in it (and
  // set in DRAM) is the one just validated, so the link publishes exactly
  // the node P1's fence made durable.
  FLINTKV_DCHECK(pn->HeaderValid());
  FLINTKV_DCHECK(pn->next ==
                 (adv->succs[0] ? ToOffset(adv->succs[0]->pnode) : 0));
  FLINTKV_DCHECK(in->next_[0].load(std::memory_order_relaxed) == adv->succs[0]);
  // R1/P4: not linked yet, so its versions still read MAX (a crash before
  // this link's fence leaves a node recovery drops).
  FLINTKV_DCHECK(in->Version() == pmem::kUncommittedVersion &&
                 pn->version == pmem::kUncommittedVersion);
  // P5: versions are assigned in increasing order, each above every
  // published one (readers at visible_version must not see this node).
  FLINTKV_DCHECK(MutantBreaksVersionOrder() ||
                 (v != pmem::kUncommittedVersion &&
                  v > visible_version_.load(std::memory_order_relaxed)));
  // P17: a weak link lies inside an open epoch whose durable cut is at or
  // below its version (recovery drops it until a drain); a strong link
  // never does (a strong write at or above the cut would be dropped after
  // being acknowledged: CombineStrong ends the epoch first).
  FLINTKV_DCHECK(mode == LinkMode::kWeak
                     ? cut_active_ && (MutantBreaksVersionOrder() ||
                                       (root_->durable_cut != 0 &&
                                        root_->durable_cut <= v))
                     : !cut_active_);
  in->version.store(v, std::memory_order_relaxed);
  pred->next_[0].store(in, std::memory_order_release);  // visible to locate
  pmem::NvmNode* pred_pn = pred->pnode;
  // The PMEM link is written before the version: the version's line was
  // written back by Prepare's PERSIST_RANGE moments ago and a cached store
  // to it may wait for that write-back (docs/results/archive/listdb_gap.md);
  // the link's write-back starts meanwhile. Nothing orders the two before the
  // fence anyway (rule R1: a durable link to a node whose version is still MAX
  // is dropped by recovery, P4).
  // P2 / P15: fenced below (per-put) or by the pass's group fence; P16: by
  // the weak drain.
  if (!Probing<P>(MeasureProbe::kNoLinkStore)) {  // bench only: no PMEM link
    WriteLinkWord(&pred_pn->next, ToOffset(pn), mode,
                  Faulty<P>(Fault::kNoLinkFlush));
  }
  // Rule R1: flushed but not fenced here; the fence that covers the link
  // covers it, and a crash before that leaves version MAX, which recovery
  // drops (P4).
  WriteLinkWord(&pn->version, v, mode, Faulty<P>(Fault::kNoVersionFlush));
  if (mode == LinkMode::kPerPut) {
    // P2: the single fence of a PUT; durable link + version.
    CountedFence(me);
  }
  if (mode == LinkMode::kWeak) {
    unpersisted_.push_back(&pn->version);  // P16: re-flushed by the drain
    unpersisted_.push_back(&pred_pn->next);
  }
  return true;
}

template <class P>
void DurableSkipList<P>::WriteLinkWord(uint64_t* word, uint64_t v,
                                       LinkMode mode, bool unflushed) {
  if (unflushed) {
    *word = v;
  } else if (mode == LinkMode::kWeak) {
    // P16: the weak drain that fences it may run on another thread and
    // re-flushes the word: a cached store, which that thread can write back.
    *word = v;
    P::Flush(word, sizeof(*word));
  } else {
    // P2 / P15: the fence is this thread's (per-put, or the pass's group
    // fence). Non-temporal: the predecessor's line is a random line of the
    // pool, rarely cached, and the new node's first line was just written
    // back by P1; a cached store would first read the line in.
    P::StoreAndFlush(word, v);
  }
}

// PROCESS_WRITEBATCH (Alg. 4): every node gets version v = commit + 1.
template <class P>
void DurableSkipList<P>::ProcessBatch(std::vector<PutAdv>* batch, uint64_t v,
                                      Slot* me) {
  AssertCombinerOrGlobalLock();
  const uint64_t commit = v - 1;
  if (Faulty<P>(Fault::kBatchModeBeforeCommit)) {
    root_->batch_mode = 1;
    CountedPersist(me, &root_->batch_mode, sizeof(root_->batch_mode));
    root_->commit_version = commit;
    CountedPersist(me, &root_->commit_version, sizeof(root_->commit_version));
  } else {
    // P3: the rollback bound is durable before batch mode is entered.
    root_->commit_version = commit;
    CountedPersist(me, &root_->commit_version, sizeof(root_->commit_version));
    root_->batch_mode = 1;
    CountedPersist(me, &root_->batch_mode, sizeof(root_->batch_mode));
  }
  // P3: the batch record (rollback bound, batch mode) is set before the
  // first node of the batch is linked.
  FLINTKV_DCHECK(root_->batch_mode == 1 && root_->commit_version == commit);
  for (PutAdv& a : *batch) {
    // At most one retry: the re-locate runs under the lock (§4.2).
    while (!ProcessPut(&a, v, LinkMode::kPerPut, me)) {
      Bump(me, &SlotStats::retries);
      Locate(a.inode->key(), a.preds, a.succs);
      Prepare(&a, me);
    }
  }
  root_->batch_mode = 0;
  // P3: commit point; every node of the batch was persisted before this.
  CountedPersist(me, &root_->batch_mode, sizeof(root_->batch_mode));
}

// A weak batch needs no batch record: all its nodes share version v, which
// is >= the durable cut until a drain makes all of them durable (P17).
template <class P>
void DurableSkipList<P>::ProcessBatchWeak(std::vector<PutAdv>* batch,
                                          uint64_t v, Slot* me) {
  combiner_lock_.AssertHeld();
  for (PutAdv& a : *batch) {
    while (!ProcessPut(&a, v, LinkMode::kWeak, me)) {
      Bump(me, &SlotStats::retries);
      Locate(a.inode->key(), a.preds, a.succs);
      Prepare(&a, me);
    }
  }
}

template <class P>
void DurableSkipList<P>::BeginWeakEpoch(uint64_t first_unpersisted, Slot* me) {
  combiner_lock_.AssertHeld();
  // P17: an epoch opens with nothing unpersisted, and its cut lies above
  // every published (possibly acknowledged) version, which it would
  // otherwise drop on recovery.
  FLINTKV_DCHECK(!cut_active_ && unpersisted_.empty());
  FLINTKV_DCHECK(MutantBreaksVersionOrder() ||
                 first_unpersisted >
                     visible_version_.load(std::memory_order_relaxed));
  root_->durable_cut = first_unpersisted;
  // P17: the cut is durable before any weak link can reach NVM (by a flush
  // or by an eviction).
  CountedPersist(me, &root_->durable_cut, sizeof(root_->durable_cut));
  cut_active_ = true;
}

template <class P>
void DurableSkipList<P>::EndWeakEpoch(Slot* me) {
  combiner_lock_.AssertHeld();
  // P17: the durable cut is set exactly while an epoch is open.
  FLINTKV_DCHECK(MutantBreaksVersionOrder() ||
                 cut_active_ == (root_->durable_cut != 0));
  Bump(me, &SlotStats::barriers);
  if (Faulty<P>(Fault::kCutBeforeDrain)) {
    root_->durable_cut = 0;
    P::Flush(&root_->durable_cut, sizeof(root_->durable_cut));
    for (const uint64_t* w : unpersisted_) P::Flush(w, sizeof(*w));
    CountedFence(me);
  } else {
    if (!unpersisted_.empty()) {
      // P16: this thread re-flushes every weak word (the combiners that
      // wrote them may be other threads, whose flushes our fence does not
      // drain), then fences.
      if (!Faulty<P>(Fault::kNoWeakReflush)) {
        for (const uint64_t* w : unpersisted_) P::Flush(w, sizeof(*w));
      }
      CountedFence(me);
    }
    // P17: cleared only now that every version below it is durable.
    root_->durable_cut = 0;
    CountedPersist(me, &root_->durable_cut, sizeof(root_->durable_cut));
  }
  unpersisted_.clear();
  cut_active_ = false;
  weak_dirty_.store(false, std::memory_order_relaxed);
}

template <class P>
void DurableSkipList<P>::Persist() {
  std::unique_lock<std::mutex> overflow;
  Slot* me = AcquireSlot(&overflow);
  combiner_lock_.Lock();
  uint64_t t0 = Ticks();
  // Every write that returned before this call is linked, so covered.
  if (cut_active_) EndWeakEpoch(me);
  Bump(me, &SlotStats::crit_ticks, Ticks() - t0);
  // P16: the drain's fences (EndWeakEpoch) precede the return; the release
  // is the same locked exchange as a strong combiner's (Attach).
  ReleaseCombinerWithFullFence(me);
}

template <class P>
WriteStats DurableSkipList<P>::GetWriteStats() const {
  WriteStats w;
  uint64_t ticks = 0;
  auto get = [](const std::atomic<uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
  };
  ForEachSlot(this, [&](const Slot& slot) { w.nodes += get(slot.nodes); });
  auto add = [&](const SlotStats& s) {
    w.ops += get(s.ops);
    w.fences += get(s.fences);
    w.full_fences += get(s.full_fences);
    w.passes += get(s.passes);
    w.ads_served += get(s.ads);
    w.retries += get(s.retries);
    ticks += get(s.crit_ticks);
    w.barriers += get(s.barriers);
  };
  stat_pages_.ForEach(add);
  add(overflow_stats_);
  w.critical_ns =
      static_cast<uint64_t>(static_cast<double>(ticks) /
                            std::max(pmem::internal::TicksPerNano(), 1e-9));
  return w;
}

}  // namespace memtable
}  // namespace flintkv

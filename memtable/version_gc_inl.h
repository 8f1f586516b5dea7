// Definitions for version_gc.h. Every flush/fence names its invariant.
#pragma once

#include <utility>

#include "memtable/policy_seams.h"
#include "pmem/debug_check.h"

namespace flintkv {
namespace memtable {

template <class P>
uint64_t VersionGc<P>::RunPass() {
  std::lock_guard<std::mutex> g(mu_);
  // G2: the bound is read before the Reclaimer's generation bump.
  const uint64_t h = rec_->Horizon(list_->DurableVersion());
  horizon_.store(h, std::memory_order_relaxed);
  Node* cursor = list_->head_;
  uint64_t total = 0;
  std::vector<Node*> unlinked;
  bool more = true;
  while (more) {
    more = Step(h, &cursor, &unlinked);
    total += unlinked.size();
    rec_->Retire(std::move(unlinked));  // durable unlinks only (P12)
    unlinked.clear();
  }
  unlinked_.fetch_add(total, std::memory_order_relaxed);
  list_->gc_unlinked_.fetch_add(total, std::memory_order_relaxed);
  passes_.fetch_add(1, std::memory_order_relaxed);
  freed_.fetch_add(rec_->Reclaim([this](Node* n) { Free(n); }),
                   std::memory_order_relaxed);
  return total;
}

template <class P>
uint64_t VersionGc<P>::Reclaim() {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t n = rec_->Reclaim([this](Node* x) { Free(x); });
  freed_.fetch_add(n, std::memory_order_relaxed);
  return n;
}

template <class P>
void VersionGc<P>::FreeAll() {
  std::lock_guard<std::mutex> g(mu_);
  freed_.fetch_add(rec_->Reclaim([this](Node* x) { Free(x); }, true),
                   std::memory_order_relaxed);
}

template <class P>
GcStats VersionGc<P>::Stats() const {
  GcStats s;
  s.passes = passes_.load(std::memory_order_relaxed);
  s.unlinked = unlinked_.load(std::memory_order_relaxed);
  s.freed = freed_.load(std::memory_order_relaxed);
  s.horizon = horizon_.load(std::memory_order_relaxed);
  return s;
}

// Walks up to per_hold_ nodes after *cursor (a node the GC keeps, or the
// head) under the combiner lock, unlinking garbage. Level 0 changes only
// under this lock, so relaxed loads see its current state.
template <class P>
bool VersionGc<P>::Step(uint64_t horizon, Node** cursor,
                        std::vector<Node*>* unlinked) {
  list_->combiner_lock_.Lock();
  // P12 (G2): the horizon is at or below the durable version, so every
  // node at or below it is durable.
  FLINTKV_DCHECK(horizon <= list_->DurableVersion());
  Node* x = *cursor;  // the node before n
  Node* n = Next0(x);
  size_t seen = 0;
  std::vector<Node*> run;
  bool drained = false;
  while (n && seen < per_hold_) {
    // n is the newest version of its key. Skip versions above the horizon.
    Node* prev = x;
    Node* cur = n;
    while (cur && cur->Version() > horizon && SameKey(cur, n)) {
      prev = cur;
      cur = Next0(cur);
      seen++;
    }
    if (!cur || !SameKey(cur, n)) {  // nothing at or below the horizon
      x = prev;
      n = cur;
      continue;
    }
    // cur is what every reader (all at >= horizon) sees of this key. A
    // tombstone goes with the older versions, unless it carries the
    // list's newest version (V1; visible_version is the last version
    // assigned, stable under the combiner lock).
    const bool drop_cur = (cur->pnode->flags & pmem::kNodeTombstone) != 0 &&
                          cur->Version() < list_->VisibleVersion();
    Node* keep = drop_cur ? prev : cur;
    run.clear();
    bool promoted = true;
    for (Node* g = drop_cur ? cur : Next0(cur); g && SameKey(g, n);
         g = Next0(g)) {
      run.push_back(g);
      promoted = promoted && g->Promoted();
    }
    seen += run.size() + 1;
    Node* end = run.empty() ? Next0(cur) : Next0(run.back());
    if (run.empty() || !promoted) {  // P13: retry on a later pass
      x = run.empty() ? cur : run.back();
      n = end;
      continue;
    }
    for (Node* g : run) {
      // P13: only versions no reader can see (at or below the horizon).
      FLINTKV_DCHECK(g->Version() <= horizon);
      UnlinkUpper(g);
    }
    for (Node* g : run) {  // P13: no level-0 link after them
      g->next_[0].store(Node::Marked(Next0(g)), std::memory_order_relaxed);
    }
    keep->next_[0].store(end, std::memory_order_release);
    if (!drained) {
      // P12 with weak writes (P16/P17): the unlink below becomes durable
      // under this hold's fence, so every link it can reach must be durable
      // first; a weak link not yet durable (pred -> weak node) would leave
      // a durable pointer to a node this pass unlinks and later reuses.
      if (!Faulty<P>(Fault::kGcNoWeakDrain)) list_->DrainWeakLocked();
      drained = true;
    }
    // P12 with P16: no weak write is left unpersisted when an unlink of
    // this hold is stored.
    FLINTKV_DCHECK(!list_->cut_active_ || Faulty<P>(Fault::kGcNoWeakDrain));
    pmem::NvmNode* kp = keep->pnode;
    kp->next = end ? list_->ToOffset(end->pnode) : 0;
    if (!Faulty<P>(Fault::kGcUnlinkNotPersisted)) {
      // P12: fenced below, before the nodes are retired (and reused).
      P::Flush(&kp->next, sizeof(kp->next));
    }
    unlinked->insert(unlinked->end(), run.begin(), run.end());
    x = keep;
    n = end;
  }
  if (!unlinked->empty() && !Faulty<P>(Fault::kGcUnlinkNotPersisted)) {
    P::Fence();  // P12: every unlink of this hold is durable
  }
  *cursor = x;
  list_->combiner_lock_.Unlock();
  return n != nullptr;
}

// Levels height-1..1, top down; r is fully promoted (P13).
template <class P>
void VersionGc<P>::UnlinkUpper(Node* r) {
  list_->combiner_lock_.AssertHeld();
  FLINTKV_DCHECK(r->Promoted());  // P13: promoted before it is unlinked
  for (int i = r->height - 1; i >= 1; i--) {
    // Mark: a Promote CAS on r's pointer now fails and restarts from the
    // head (durable_skiplist_inl.h), so nothing is linked after r.
    Node* s = r->next_[i].load(std::memory_order_acquire);
    while (!Node::IsMarked(s) &&
           !r->next_[i].compare_exchange_weak(s, Node::Marked(s),
                                              std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
    }
    s = Node::Unmarked(s);
    // G4: a Promote may still link a node *before* r (between pred and r)
    // at any time, so the predecessor the walk saw is only a candidate: the
    // CAS validates it, and a failed CAS searches again. r stays linked at
    // this level until that CAS (only this GC unlinks, and r is promoted),
    // so every search finds it.
    while (true) {
      Node* pred = PredAt(r, i);
      if (!pred) break;  // r not linked at this level (see PredAt)
      Node* expect = r;
      if (pred->next_[i].compare_exchange_strong(expect, s,
                                                 std::memory_order_acq_rel,
                                                 std::memory_order_acquire)) {
        break;
      }
      // A Promote linked a node between pred and r: search again.
    }
  }
}

// The node whose level-`level` successor was r when the walk reached it
// (G4: no second read of that pointer, which a Promote may have changed
// since; the caller's CAS validates), or nullptr if the walk passed r's
// place without meeting r. Only the GC marks pointers and it unlinks one
// node at a time, top down, so no node on the path at levels >= 1 is
// marked.
template <class P>
IndexNode* VersionGc<P>::PredAt(const Node* r, int level) const {
  Node* x = list_->head_;
  Node* nx = nullptr;
  for (int l = list_->max_height_.load(std::memory_order_relaxed) - 1;
       l >= level; l--) {
    nx = x->Next(l);
    while (nx && nx != r && list_->Before(nx, r)) {
      x = nx;
      nx = x->Next(l);
    }
  }
  OnGcPredFound<P>(r, level);  // seam: nothing for production policies
  return nx == r ? x : nullptr;
}

template <class P>
void VersionGc<P>::Free(Node* n) {
  pmem::NvmNode* pn = n->pnode;
  list_->arena_.Free(reinterpret_cast<char*>(pn),
                     pmem::NvmNode::AllocSize(pn->data_size));
  // The GC runs only on reclaim_space lists, which never use an IndexArena
  // (SkipListOptions): every node is malloc'ed and counted in DramBytes.
  FLINTKV_DCHECK(list_->index_arena_ == nullptr);
  list_->gc_freed_dram_.fetch_add(IndexNode::AllocSize(n->height, n->key_size),
                                  std::memory_order_relaxed);
  DeleteIndexNode(n);
}

}  // namespace memtable
}  // namespace flintkv

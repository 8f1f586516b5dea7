// Definitions for durable_skiplist.h, reader side: lock-free traversals,
// range counts and estimates, snapshot iterators (P5). Readers never write
// to PMEM, so nothing here flushes or fences.
#pragma once

#include <algorithm>

namespace flintkv {
namespace memtable {

// First node at level 0 that is not (key < target, or key == target and
// invisible at vv): Algorithm 5's version-aware CMP.
template <class P>
const IndexNode* DurableSkipList<P>::FindGreaterOrEqual(const char* key,
                                                        uint64_t vv) const {
  const IndexNode* x = head_;
  const IndexNode* next = nullptr;
  for (int level = max_height_.load(std::memory_order_relaxed) - 1; level >= 0;
       level--) {
    next = x->Next(level);
    while (next) {
      int c = cmp_->Compare(next->key(), key);
      if (c > 0 || (c == 0 && next->Version() <= vv)) break;
      x = next;
      next = x->Next(level);
    }
  }
  return next;
}

template <class P>
const IndexNode* DurableSkipList<P>::FindLessThan(const char* key) const {
  const IndexNode* x = head_;
  for (int level = kMaxHeight - 1; level >= 0; level--) {
    const IndexNode* next = x->Next(level);
    while (next && (key == nullptr || cmp_->Compare(next->key(), key) < 0)) {
      x = next;
      next = x->Next(level);
    }
  }
  return x == head_ ? nullptr : x;
}

template <class P>
const IndexNode* DurableSkipList<P>::Find(const char* key, uint64_t vv) const {
  const IndexNode* n = FindGreaterOrEqual(key, vv);
  return (n && cmp_->Compare(n->key(), key) == 0) ? n : nullptr;
}

template <class P>
uint64_t DurableSkipList<P>::EstimateCountBefore(const char* key) const {
  // Each step at level i skips about 4^i entries (branching factor 4).
  uint64_t count = 0;
  const IndexNode* x = head_;
  for (int level = max_height_.load(std::memory_order_relaxed) - 1; level >= 0;
       level--) {
    const IndexNode* next = x->Next(level);
    while (next && cmp_->Compare(next->key(), key) < 0) {
      count += uint64_t{1} << (2 * level);
      x = next;
      next = x->Next(level);
    }
  }
  return count;
}

template <class P>
uint64_t DurableSkipList<P>::CountRange(const char* start,
                                        const char* end) const {
  // Exact at level 0 up to a bound (deterministic for small ranges, where
  // the level estimate is poorest), then the O(log n) estimate.
  constexpr uint64_t kExactLimit = 4096;
  uint64_t n = 0;
  for (const IndexNode* x = FindGreaterOrEqual(start, UINT64_MAX);
       x && cmp_->Compare(x->key(), end) < 0; x = x->Next(0)) {
    if (++n > kExactLimit) {
      uint64_t a = EstimateCountBefore(start);
      uint64_t b = EstimateCountBefore(end);
      return std::max(n, b > a ? b - a : 0);
    }
  }
  return n;
}

// ---- Iterator: a snapshot at version vv_ (P5) ----

template <class P>
void DurableSkipList<P>::Iterator::SettleForward(const IndexNode* n) {
  const bool collapse = list_->options_.collapse_versions;
  while (n) {
    if (n->Version() > vv_) {  // not in this snapshot
      n = n->Next(0);
      continue;
    }
    // n is the newest version of its key in the snapshot.
    if (collapse && (n->pnode->flags & pmem::kNodeTombstone)) {
      const IndexNode* m = n->Next(0);
      while (m && list_->cmp_->Compare(m->key(), n->key()) == 0) m = m->Next(0);
      n = m;
      continue;
    }
    break;
  }
  node_ = n;
}

// Positions at the newest visible live entry with key < bound (nullptr
// bound: +infinity).
template <class P>
void DurableSkipList<P>::Iterator::SettleBackward(const char* bound) {
  const bool collapse = list_->options_.collapse_versions;
  while (true) {
    const IndexNode* p = list_->FindLessThan(bound);
    if (!p) {
      node_ = nullptr;
      return;
    }
    if (!collapse) {
      if (p->Version() <= vv_) {
        node_ = p;
        return;
      }
      bound = p->key();
      continue;
    }
    const IndexNode* n = list_->FindGreaterOrEqual(p->key(), vv_);
    if (n && list_->cmp_->Compare(n->key(), p->key()) == 0 &&
        !(n->pnode->flags & pmem::kNodeTombstone)) {
      node_ = n;
      return;
    }
    bound = p->key();
  }
}

template <class P>
void DurableSkipList<P>::Iterator::Seek(const char* key) {
  SettleForward(list_->FindGreaterOrEqual(key, vv_));
}

template <class P>
void DurableSkipList<P>::Iterator::SeekForPrev(const char* key) {
  Seek(key);
  if (!Valid()) {
    SeekToLast();
  } else if (list_->cmp_->Compare(node_->key(), key) > 0) {
    Prev();
  }
}

template <class P>
void DurableSkipList<P>::Iterator::SeekToFirst() {
  SettleForward(list_->head_->Next(0));
}

template <class P>
void DurableSkipList<P>::Iterator::SeekToLast() {
  SettleBackward(nullptr);
}

template <class P>
void DurableSkipList<P>::Iterator::Next() {
  const IndexNode* n = node_->Next(0);
  if (list_->options_.collapse_versions) {
    while (n && list_->cmp_->Compare(n->key(), node_->key()) == 0) {
      n = n->Next(0);
    }
  }
  SettleForward(n);
}

template <class P>
void DurableSkipList<P>::Iterator::Prev() {
  SettleBackward(node_->key());
}

}  // namespace memtable
}  // namespace flintkv

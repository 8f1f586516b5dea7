// Definitions for durable_skiplist.h, reader side: lock-free traversals,
// range counts and estimates, snapshot iterators (P5). Readers never write
// to PMEM, so nothing here flushes or fences.
#pragma once

#include <algorithm>
#include <cmath>

namespace flintkv {
namespace memtable {

// First node at level 0 that is not (key < target, or key == target and
// invisible at vv): Algorithm 5's version-aware CMP.
template <class P>
const IndexNode* DurableSkipList<P>::FindGreaterOrEqual(const char* key,
                                                        uint64_t vv) const {
  const uint64_t kp = PrefixOf(key);
  const IndexNode* x = head_;
  const IndexNode* next = nullptr;
  for (int level = max_height_.load(std::memory_order_relaxed) - 1; level >= 0;
       level--) {
    next = x->Next(level);
    while (next) {
      int c = CompareTo(next, key, kp);
      if (c > 0 || (c == 0 && next->Version() <= vv)) break;
      x = next;
      next = x->Next(level);
    }
  }
  return next;
}

template <class P>
const IndexNode* DurableSkipList<P>::FindLessThan(const char* key) const {
  const uint64_t kp = key ? PrefixOf(key) : 0;
  const IndexNode* x = head_;
  for (int level = kMaxHeight - 1; level >= 0; level--) {
    const IndexNode* next = x->Next(level);
    while (next && (key == nullptr || CompareTo(next, key, kp) < 0)) {
      x = next;
      next = x->Next(level);
    }
  }
  return x == head_ ? nullptr : x;
}

template <class P>
const IndexNode* DurableSkipList<P>::Find(const char* key, uint64_t vv) const {
  const IndexNode* n = FindGreaterOrEqual(key, vv);
  return (n && CompareTo(n, key, PrefixOf(key)) == 0) ? n : nullptr;
}

template <class P>
uint64_t DurableSkipList<P>::CountRange(const char* start,
                                        const char* end) const {
  // Exact below kLimit entries (a level-0 walk). Beyond, an estimate from
  // the index: a node is in level L with probability 4^-L (branching factor
  // 4; with unique_keys the height is a hash of the key), so c_L, the
  // range's nodes in level L, times 4^L estimates the range's size with a
  // relative error of about 1/sqrt(c_L). One descent towards `start`; at
  // each level, from top to bottom, the range's nodes are counted up to
  // kLimit. A count is discounted by two standard deviations, c - 2 sqrt(c),
  // so that a high level whose few nodes stand for many entries each cannot
  // win by luck; the estimate is the largest discounted level count, and
  // never below kLimit. Once a level reaches kLimit, every level below it
  // would give a smaller term (and level 0 is not exact): the walk stops.
  // Cost: under 1.4 * kLimit node visits plus the descent, O(log n).
  //
  // Monotone in the range: a wider range has at least as many nodes in
  // every level, a capped count and its discount never decrease with it,
  // and a maximum of non-decreasing terms does not decrease; exact counts
  // (below kLimit) are below every estimate (kLimit or more).
  // Deterministic: it depends only on the nodes and their heights.
  constexpr uint64_t kLimit = 4096;
  const uint64_t start_p = PrefixOf(start), end_p = PrefixOf(end);
  const IndexNode* x = head_;
  double estimate = 0;
  for (int level = max_height_.load(std::memory_order_relaxed) - 1; level >= 0;
       level--) {
    const IndexNode* next = x->Next(level);
    while (next && CompareTo(next, start, start_p) < 0) {
      x = next;
      next = x->Next(level);
    }
    // next: the first node of this level at or after start.
    uint64_t c = 0;
    for (; next && c < kLimit && CompareTo(next, end, end_p) < 0;
         next = next->Next(level)) {
      c++;
    }
    if (level == 0 && c < kLimit) return c;
    double sd = std::sqrt(static_cast<double>(c));
    double scale = static_cast<double>(uint64_t{1} << (2 * level));
    estimate = std::max(estimate, (c - 2 * sd) * scale);
    if (c == kLimit) break;
  }
  return std::max(kLimit, static_cast<uint64_t>(estimate));
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
      while (m && list_->CompareNodes(m, n) == 0) m = m->Next(0);
      n = m;
      continue;
    }
    break;
  }
  node_ = n;
  if (n) {
    // A scan touches two lines per entry where RocksDB's skiplist touches
    // one: the index node and the PMEM entry it names. Fetch the entry
    // (read next, by key()/the callback) and the next index node (read by
    // the next Next) now, so that their misses overlap the caller's work.
    __builtin_prefetch(n->pnode->data(), 0, 3);
    __builtin_prefetch(n->Next(0), 0, 3);
  }
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
    if (n && list_->CompareNodes(n, p) == 0 &&
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
  } else if (list_->CompareTo(node_, key, list_->PrefixOf(key)) > 0) {
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
    while (n && list_->CompareNodes(n, node_) == 0) {
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

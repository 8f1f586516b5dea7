// ConcurrentIndex: the lock-free DRAM skiplist of the benchmark baselines
// (ListDB's lockfree_skiplist, RocksDB's InlineSkipList with
// allow_concurrent_memtable_write), over FlintKV's own IndexNode so that every
// implementation in flintkv_bench uses the same node layout, comparator,
// height generator and DRAM allocator (paper §7.2), and the same key-prefix
// compares as FlintKV's own index (memtable/key_comparator.h).
//
// Insert (both originals do the same): locate the predecessors and successors
// at every level from the top, then link bottom-up, each level with one CAS
// of pred->next; a failed CAS re-searches that level from the old
// predecessor (nodes are never removed, so it still orders before the key).
// A node is visible to readers once linked at level 0.
//
// Thread safety: Insert and the readers may run concurrently from any
// threads. Keys are expected to be distinct (the benchmark's are): equal keys
// are both kept, in an unspecified order.
// Persistence: none; the index lives in DRAM and is rebuilt from the log.
// Memory ordering: a node's fields and next pointers are written before the
// release CAS that publishes it; readers load successors with acquire.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "memtable/index_node.h"
#include "memtable/key_comparator.h"

namespace flintkv {
namespace baselines {

using memtable::IndexNode;
using memtable::kMaxHeight;

class ConcurrentIndex {
 public:
  explicit ConcurrentIndex(const memtable::KeyComparator* cmp) : cmp_(cmp) {
    head_ = memtable::NewIndexNode(nullptr, "", 0, kMaxHeight, 0);
  }
  ~ConcurrentIndex() {
    IndexNode* n = head_;
    while (n) {
      IndexNode* next = n->next_[0].load(std::memory_order_relaxed);
      memtable::DeleteIndexNode(n);
      n = next;
    }
  }
  ConcurrentIndex(const ConcurrentIndex&) = delete;
  ConcurrentIndex& operator=(const ConcurrentIndex&) = delete;

  bool ok() const { return head_ != nullptr; }

  void Insert(IndexNode* node) {
    IndexNode* preds[kMaxHeight];
    IndexNode* succs[kMaxHeight];
    const char* key = node->key();
    const uint64_t kp = PrefixOf(key);
    node->prefix = kp;  // before the release CAS that publishes the node
    IndexNode* x = head_;
    for (int level = kMaxHeight - 1; level >= 0; level--) {
      IndexNode* next = x->Next(level);
      while (next && Less(next, key, kp)) {
        x = next;
        next = x->Next(level);
      }
      preds[level] = x;
      succs[level] = next;
    }
    for (int level = 0; level < node->height; level++) {
      while (true) {
        node->next_[level].store(succs[level], std::memory_order_relaxed);
        if (preds[level]->next_[level].compare_exchange_strong(
                succs[level], node, std::memory_order_release,
                std::memory_order_relaxed)) {
          break;
        }
        IndexNode* p = preds[level];
        IndexNode* next = p->Next(level);
        while (next && Less(next, key, kp)) {
          p = next;
          next = p->Next(level);
        }
        preds[level] = p;
        succs[level] = next;
      }
    }
  }

  // First node with key >= key, or nullptr.
  const IndexNode* Seek(const char* key) const {
    const uint64_t kp = PrefixOf(key);
    const IndexNode* x = head_;
    const IndexNode* next = nullptr;
    for (int level = kMaxHeight - 1; level >= 0; level--) {
      next = x->Next(level);
      while (next && Less(next, key, kp)) {
        x = next;
        next = x->Next(level);
      }
    }
    return next;
  }

  // Node with exactly this key, or nullptr.
  const IndexNode* Find(const char* key) const {
    const IndexNode* n = Seek(key);
    return n && cmp_->Compare(n->key(), key) == 0 ? n : nullptr;
  }

  const IndexNode* First() const { return head_->Next(0); }

 private:
  uint64_t PrefixOf(const char* key) const { return cmp_->IndexPrefix(key); }
  // n's key < key (whose prefix is kp), in FlintKV's index order.
  bool Less(const IndexNode* n, const char* key, uint64_t kp) const {
    return cmp_->CompareWithPrefix(n->key(), n->prefix, key, kp) < 0;
  }

  const memtable::KeyComparator* const cmp_;
  IndexNode* head_;
};

}  // namespace baselines
}  // namespace flintkv

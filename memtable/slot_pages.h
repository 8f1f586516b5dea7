// Per-thread slots indexed by ThreadId, in pages allocated on a thread's
// first use, so an idle owner carries no slot array.
//
// Thread safety: Get and ForEach may run concurrently from any thread; the
// destructor runs alone. A page, once published, never moves or is freed
// before the destructor. Memory orderings: a page is published with
// acq_rel and read with acquire, so a reader sees its constructed slots.
// Persistence: none (DRAM only).
#pragma once

#include <atomic>
#include <cstddef>
#include <new>

#include "memtable/thread_id.h"

namespace flintkv {
namespace memtable {

template <class Slot, int kPerPage>
class SlotPages {
 public:
  SlotPages() = default;
  SlotPages(const SlotPages&) = delete;
  SlotPages& operator=(const SlotPages&) = delete;
  ~SlotPages() {
    for (auto& p : pages_) delete[] p.load(std::memory_order_relaxed);
  }

  // The slot of id tid, allocating its page on first use; nullptr when the
  // page cannot be allocated.
  Slot* Get(int tid) {
    std::atomic<Slot*>& page = pages_[tid / kPerPage];
    Slot* p = page.load(std::memory_order_acquire);
    if (!p) {
      Slot* fresh = new (std::nothrow) Slot[kPerPage];
      if (!fresh) return nullptr;
      // acq_rel: publishes the constructed slots / sees the winner's.
      if (page.compare_exchange_strong(p, fresh, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        p = fresh;
        bytes_.fetch_add(sizeof(Slot) * kPerPage, std::memory_order_relaxed);
      } else {
        delete[] fresh;
      }
    }
    return &p[tid % kPerPage];
  }

  // Calls fn(Slot&) on every allocated slot of an id below
  // ThreadId::HighWater().
  template <class Fn>
  void ForEach(Fn fn) const {
    int hw = ThreadId::HighWater();
    for (int base = 0; base < hw; base += kPerPage) {
      Slot* page = pages_[base / kPerPage].load(std::memory_order_acquire);
      if (!page) continue;
      for (int i = 0; i < kPerPage && base + i < hw; i++) fn(page[i]);
    }
  }

  // DRAM held by the allocated pages.
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  static constexpr int kPages = ThreadId::kMaxThreads / kPerPage;
  std::atomic<Slot*> pages_[kPages] = {};
  std::atomic<size_t> bytes_{0};
};

}  // namespace memtable
}  // namespace flintkv

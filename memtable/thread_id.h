// Dense per-thread ids for the flat combiner's advertisement slots and the
// per-thread PMEM arenas.
//
// Thread safety: Get() is thread-safe and wait-free after a thread's first
// call. An id is returned to the pool when its thread exits, so a long-lived
// process that creates many short threads reuses ids; at most kMaxThreads
// threads may hold one at once.
#pragma once

#include <atomic>

namespace flintkv {
namespace memtable {

class ThreadId {
 public:
  static constexpr int kMaxThreads = 512;

  // This thread's id in [0, kMaxThreads), or -1 if all ids are taken.
  static int Get() {
    int id = tls_id_;
    return id >= 0 ? id : Acquire();
  }
  // One past the largest id ever handed out (the combiner's scan bound).
  static int HighWater() { return high_water_.load(std::memory_order_acquire); }

 private:
  static int Acquire();
  static thread_local int tls_id_;
  static std::atomic<int> high_water_;
};

}  // namespace memtable
}  // namespace flintkv

// Dense per-thread ids for the flat combiner's advertisement slots.
//
// Thread safety: Get() is thread-safe and wait-free after a thread's first
// successful call. An id is returned to the pool when its thread exits, so
// a long-lived process that creates many short threads reuses ids; at most
// kMaxThreads threads hold one at once. Get() returns -1 to a thread that
// finds every id taken, and to a thread whose id was already returned (its
// later thread_local destructors): callers then take their overflow path.
#pragma once

#include <atomic>

namespace flintkv {
namespace memtable {

class ThreadId {
 public:
  static constexpr int kMaxThreads = 512;

  // This thread's id in [0, kMaxThreads), or -1 (see above).
  static int Get() {
    int id = tls_id_;
    return id >= 0 ? id : id == kNone ? Acquire() : -1;
  }
  // One past the largest id ever handed out (the combiner's scan bound).
  static int HighWater() { return high_water_.load(std::memory_order_acquire); }

 private:
  friend struct ThreadIdReleaser;
  static constexpr int kNone = -1;    // no id yet: try to acquire one
  static constexpr int kExited = -2;  // id returned at thread exit
  static int Acquire();
  static thread_local int tls_id_;
  static std::atomic<int> high_water_;
  static std::atomic<int> free_count_;  // ids in the free list
};

}  // namespace memtable
}  // namespace flintkv

// CombinerLock: the flat combiner's spin lock (paper Alg. 1 lines 27-44),
// the one lock a DurableSkipList's combiner and its VersionGc share.
//
// What it guards: level 0 of the list (DRAM and PMEM links), version
// assignment, and the combiner-only state (the group pass's waiters, the
// weak state of P16/P17). docs/invariants.md says which of those words each
// invariant covers.
//
// Thread safety: any thread may Lock/TryLock; only the holder may Unlock or
// UnlockWithFullFence. Not recursive.
// Memory orderings:
//  L1 a successful TryLock/Lock is an acquire, Unlock a release: everything
//     one holder wrote under the lock happens-before the next holder's
//     section (that is all level 0 needs: its links are read under the lock
//     with relaxed loads).
//  L2 UnlockWithFullFence<P> lets the persistence policy release (Alg. 1
//     line 40): PmemPersist issues one locked exchange (seq_cst), the
//     paper's full fence, which durability does NOT rest on (pmem/persist.h:
//     on AMD a locked instruction does not order CLWB; every acknowledging
//     path issued its SFENCE before). It is at least a release (L1).
// Layout: sizeof is that of the atomic flag alone. The owner aligns the lock to
// a cache line at its member (DurableSkipList: with the combiner-only state it
// guards in the same line), so the type adds no padding of its own.
#pragma once

#include <immintrin.h>
#include <sched.h>

#include <atomic>

namespace flintkv {
namespace memtable {

namespace detail {
// Bounded spin, then yield: waiters must not starve a preempted combiner
// when threads outnumber cores.
inline void Backoff(int* spins) {
  if (++*spins < 128) {
    _mm_pause();
  } else {
    sched_yield();
  }
}
}  // namespace detail

class CombinerLock {
 public:
  CombinerLock() = default;
  CombinerLock(const CombinerLock&) = delete;
  CombinerLock& operator=(const CombinerLock&) = delete;

  // Test-and-test-and-set: the relaxed load keeps waiters on a shared copy
  // of the line; the exchange's acquire is L1.
  bool TryLock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void Lock() {
    int spins = 0;
    while (!TryLock()) detail::Backoff(&spins);
  }
  // Release store (L1).
  void Unlock() { locked_.store(false, std::memory_order_release); }
  // The policy's release (L2): the same instruction as P's
  // ReleaseWithFullFence on the bare flag.
  template <class P>
  void UnlockWithFullFence() {
    P::ReleaseWithFullFence(&locked_);
  }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace memtable
}  // namespace flintkv

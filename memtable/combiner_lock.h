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
// Layout: sizeof is that of the atomic flag alone unless FLINTKV_DEBUG_CHECKS
// adds the holder field. The object that embeds the lock aligns it to a
// cache line at its member (DurableSkipList: with the combiner-only state it
// guards in the same line), so the type adds no padding of its own.
// Debug checks (FLINTKV_DEBUG_CHECKS, pmem/debug_check.h): the lock records
// its holder (a per-thread address, in a relaxed atomic: only the holder's
// own thread can ever read its own address there, so no ordering is
// needed), and AssertHeld() dies unless the calling thread holds it; Unlock
// by another thread dies too. Without them there is no holder field and no
// extra instruction: the hot path is the flag's alone.
#pragma once

#include <immintrin.h>
#include <sched.h>

#include <atomic>

#include "pmem/debug_check.h"

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
    if (locked_.load(std::memory_order_relaxed) ||
        locked_.exchange(true, std::memory_order_acquire)) {
      return false;
    }
    SetHolder();
    return true;
  }
  void Lock() {
    int spins = 0;
    while (!TryLock()) detail::Backoff(&spins);
  }
  // Release store (L1).
  void Unlock() {
    ClearHolder();
    locked_.store(false, std::memory_order_release);
  }
  // The policy's release (L2): the same instruction as P's
  // ReleaseWithFullFence on the bare flag.
  template <class P>
  void UnlockWithFullFence() {
    ClearHolder();
    P::ReleaseWithFullFence(&locked_);
  }

  // Dies unless the calling thread holds the lock (debug checks only;
  // nothing in other builds).
  void AssertHeld() const { FLINTKV_DCHECK(HeldByCurrentThread()); }
#ifdef FLINTKV_DEBUG_CHECKS
  bool HeldByCurrentThread() const {
    return holder_.load(std::memory_order_relaxed) == Self();
  }
#endif

 private:
#ifdef FLINTKV_DEBUG_CHECKS
  // A distinct address per live thread.
  static const void* Self() {
    static thread_local char tag;
    return &tag;
  }
  // Set after the acquire and cleared before the release, so the next
  // holder's store comes after ours in happens-before (L1) and no holder
  // overwrites a later one.
  void SetHolder() {
    FLINTKV_DCHECK(holder_.load(std::memory_order_relaxed) == nullptr);
    holder_.store(Self(), std::memory_order_relaxed);
  }
  void ClearHolder() {
    AssertHeld();  // only the holder releases
    holder_.store(nullptr, std::memory_order_relaxed);
  }
  std::atomic<const void*> holder_{nullptr};
#else
  static void SetHolder() {}
  static void ClearHolder() {}
#endif
  std::atomic<bool> locked_{false};
};

}  // namespace memtable
}  // namespace flintkv

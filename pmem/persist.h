// Persistence primitives: the only way FlintKV code writes back or orders
// stores to PMEM (FLUSH_RANGE / PERSIST_RANGE / fences of §2.3).
//
// Policies are template parameters of the durable skiplist, so the choice is
// made at compile time and costs nothing on the hot path:
//  - PmemPersist: libpmem's pmem_flush (CLWB, else CLFLUSHOPT, else CLFLUSH,
//    picked once by CPUID inside libpmem, which also keeps valgrind usable)
//    pmem_drain followed by an SFENCE (pmem_drain alone is empty under
//    CLFLUSH), a non-temporal word store, plus the optional latency model.
//  - NoPersist: no write-back and no fences. Only for the volatile baseline
//    in benchmarks; never durable.
//  - SimPersist (tests/crash/): records flushes and fences per thread.
// PmemPersist and NoPersist declare persistence only; the seams a test or
// benchmark policy may add (faults, hooks, probes, the global-lock
// baseline) are listed in memtable/policy_seams.h.
// Thread safety: all functions are thread-safe. The latency model is
// process-wide and must be set before writers start.
#pragma once

#include <immintrin.h>
#include <libpmem.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "flintkv/options.h"

namespace flintkv {
namespace pmem {

namespace internal {
extern uint32_t g_ns_per_line;
extern uint32_t g_ns_per_fence;
void SpinNanos(uint64_t ns);
double TicksPerNano();
}  // namespace internal

// Sets the process-wide latency model (0/0 turns it off).
void SetLatencyModel(const LatencyModel& model);

inline size_t LinesIn(const void* p, size_t n) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return ((a + n + 63) >> 6) - (a >> 6);
}

struct PmemPersist {
  static constexpr bool kDurable = true;
  static void Flush(const void* p, size_t n) {
    pmem_flush(p, n);
    if (internal::g_ns_per_line) {
      internal::SpinNanos(uint64_t{internal::g_ns_per_line} * LinesIn(p, n));
    }
  }
  // pmem_drain is empty when libpmem flushes with CLFLUSH (no CLWB or
  // CLFLUSHOPT, or PMEM_NO_CLWB=1 PMEM_NO_CLFLUSHOPT=1), which orders
  // itself; StoreAndFlush's non-temporal stores need an SFENCE whatever the
  // flush, as libpmem's own non-temporal copies add one. A second SFENCE
  // right after pmem_drain's finds nothing left to drain.
  static void Fence() {
    pmem_drain();
    _mm_sfence();
    if (internal::g_ns_per_fence) internal::SpinNanos(internal::g_ns_per_fence);
  }
  static void Persist(const void* p, size_t n) {
    Flush(p, n);
    Fence();
  }
  // *p = v, durable after the next Fence() of this thread, as a store and
  // Flush(p, 8) would be. A non-temporal store (MOVNTI): it bypasses the
  // cache, so a line that is not cached is not read in first (no RFO) and
  // nothing is left to write back. Weakly ordered and drained by SFENCE
  // (docs/invariants.md, "Fences"); other threads may not see the value
  // before this thread's Fence(). One word: a MOVNTI here rather than
  // libpmem's bulk pmem_memcpy_nodrain.
  static void StoreAndFlush(uint64_t* p, uint64_t v) {
    _mm_stream_si64(reinterpret_cast<long long*>(p),  // NOLINT(runtime/int)
                    static_cast<long long>(v));       // NOLINT(runtime/int)
    if (internal::g_ns_per_line) internal::SpinNanos(internal::g_ns_per_line);
  }
  // MFENCE: an SFENCE that also orders later loads (Alg. 1 line 40). Used
  // by the global-lock baseline; orders CLWB on Intel and AMD alike.
  static void FullFence() { _mm_mfence(); }
  // Releases a spin lock (stores false) with one locked exchange: Alg. 1
  // line 40's full fence, kept from the paper (one locked instruction in
  // place of the release store, once per pass). Durability does NOT rest
  // on it (see "Fences" in docs/invariants.md): every path that
  // acknowledges a write as durable has already issued Fence() (an SFENCE
  // after pmem_drain) after its flushes, and that SFENCE is what orders the
  // write-backs:
  //  - Intel SDM Vol. 2A, CLWB: "Executions of the CLWB instruction are
  //    ordered with respect to fence instructions and to locked
  //    read-modify-write instructions"; SFENCE (Vol. 2B): every store before
  //    it "is globally visible before any store after SFENCE becomes
  //    globally visible". On Intel the exchange would order CLWB as well.
  //  - AMD APM Vol. 3, CLWB / CLFLUSHOPT: weakly ordered; strict ordering
  //    of the write-backs is obtained with SFENCE (or MFENCE), and locked
  //    instructions are not named. On AMD this exchange is therefore not a
  //    fence for CLWB, and nothing may depend on it being one.
  // So no other thread (status kSuccess, visible_version, this release) and
  // no later store or system call of this thread can make an acknowledgment
  // observable before the acknowledged write-backs reached the persistence
  // domain. The crash simulator models this release as a plain store
  // (SimPersist), so the campaigns fail if durability relied on it.
  static void ReleaseWithFullFence(std::atomic<bool>* lock) {
    lock->exchange(false, std::memory_order_seq_cst);
  }
};

struct NoPersist {
  static constexpr bool kDurable = false;
  static void Flush(const void*, size_t) {}
  static void Fence() {}
  static void Persist(const void*, size_t) {}
  static void StoreAndFlush(uint64_t* p, uint64_t v) { *p = v; }
  static void FullFence() {}
  static void ReleaseWithFullFence(std::atomic<bool>* lock) {
    lock->store(false, std::memory_order_release);
  }
};

}  // namespace pmem
}  // namespace flintkv

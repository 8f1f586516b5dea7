#include "pmem/persist.h"

#include <x86intrin.h>

#include <chrono>

namespace flintkv {
namespace pmem {
namespace internal {

uint32_t g_ns_per_line = 0;
uint32_t g_ns_per_fence = 0;

// TSC ticks per nanosecond, measured once over ~5 ms.
double TicksPerNano() {
  static const double ticks = [] {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t c0 = __rdtsc();
    while (std::chrono::steady_clock::now() - t0 <
           std::chrono::milliseconds(5)) {
    }
    uint64_t c1 = __rdtsc();
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
    return static_cast<double>(c1 - c0) / static_cast<double>(ns);
  }();
  return ticks;
}

void SpinNanos(uint64_t ns) {
  // Busy-wait like a stalled store would (sleeping would free the core).
  // Spins on the TSC without PAUSE: PAUSE alone can take ~40 ns on recent
  // cores and would overshoot short delays.
  uint64_t until = __rdtsc() + static_cast<uint64_t>(ns * TicksPerNano());
  while (__rdtsc() < until) {
  }
}

}  // namespace internal

void SetLatencyModel(const LatencyModel& model) {
  internal::TicksPerNano();  // calibrate before writers start
  internal::g_ns_per_line = model.ns_per_flushed_line;
  internal::g_ns_per_fence = model.ns_per_fence;
}

}  // namespace pmem
}  // namespace flintkv

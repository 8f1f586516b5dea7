#include "pmem/persist.h"

#include <chrono>

namespace flintkv {
namespace pmem {
namespace internal {

uint32_t g_ns_per_line = 0;
uint32_t g_ns_per_fence = 0;

void SpinNanos(uint64_t ns) {
  // Busy-wait like a stalled store would; sleeping would free the core.
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) _mm_pause();
}

}  // namespace internal

void SetLatencyModel(const LatencyModel& model) {
  internal::g_ns_per_line = model.ns_per_flushed_line;
  internal::g_ns_per_fence = model.ns_per_fence;
}

}  // namespace pmem
}  // namespace flintkv

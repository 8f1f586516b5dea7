// flush_stall_probe: what touching a cache line right after flushing it
// costs on this CPU (docs/results/archive/listdb_gap.md).
//
// Each loop iteration stores to one of 64 lines (all cached), then does one
// of the variants below; the figure is rdtsc ticks per iteration (median of
// 5 rounds). Flushes and fences are libpmem's (pmem_flush = CLWB where
// available, pmem_drain = SFENCE where the flush is CLWB or CLFLUSHOPT). On the
// project's AMD EPYC VM a load or store to a line whose flush is in flight
// waits for its write-back (hundreds of ticks), while a flush followed by work
// on other lines costs a few ticks: the write path must not touch a node
// between its flush and the fence (or the next phase).
#include <libpmem.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

enum Variant {
  kStore,
  kStoreFlush,
  kStoreFlushLoadSame,
  kStoreFlushStoreSame,
  kStoreFlushLoadOther,
  kStoreFlushDrain,
  kStoreFlushDrainLoadSame,
  kVariants
};

const char* const kNames[kVariants] = {
    "store",
    "store, flush",
    "store, flush, load same line",
    "store, flush, store same line",
    "store, flush, load another cached line",
    "store, flush, drain",
    "store, flush, drain, load same line",
};

double Run(Variant v, char* lines, char* other) {
  constexpr int kIters = 50000;
  volatile uint64_t sink = 0;
  const uint64_t t0 = __rdtsc();
  for (int i = 0; i < kIters; i++) {
    char* p = lines + (i % 64) * 64;
    *reinterpret_cast<volatile uint64_t*>(p) = i;
    if (v == kStore) continue;
    pmem_flush(p, 8);
    if (v == kStoreFlushDrain || v == kStoreFlushDrainLoadSame) pmem_drain();
    if (v == kStoreFlushLoadSame || v == kStoreFlushDrainLoadSame) {
      sink = sink + *reinterpret_cast<volatile uint64_t*>(p + 8);
    } else if (v == kStoreFlushStoreSame) {
      *reinterpret_cast<volatile uint64_t*>(p + 8) = i;
    } else if (v == kStoreFlushLoadOther) {
      sink =
          sink + *reinterpret_cast<volatile uint64_t*>(other + (i % 64) * 64);
    }
  }
  return static_cast<double>(__rdtsc() - t0) / kIters;
}

}  // namespace

int main() {
  std::vector<char> buf(2 * 64 * 64 + 64);
  char* lines = reinterpret_cast<char*>(
      (reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
  char* other = lines + 64 * 64;
  std::printf("rdtsc ticks per iteration (median of 5 rounds)\n");
  for (int v = 0; v < kVariants; v++) {
    std::vector<double> r;
    for (int round = 0; round < 5; round++) {
      r.push_back(Run(static_cast<Variant>(v), lines, other));
    }
    std::sort(r.begin(), r.end());
    std::printf("%8.0f  %s\n", r[2], kNames[v]);
  }
  return 0;
}

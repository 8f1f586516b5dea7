// Helpers shared by the benchmark tools (flintkv_bench, its baselines,
// gc_bench): fatal errors, the machine description printed with every
// result, process CPU time and latency percentiles.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "flintkv/status.h"

namespace flintkv {
namespace bench {

// Prints "<tool>: FATAL: msg" and exits 1.
[[noreturn]] void Die(const std::string& msg);
// Dies with "what: status" unless s is OK.
void Check(const Status& s, const std::string& what);

// A field of /proc/cpuinfo's first processor ("" if absent).
std::string CpuInfoField(const std::string& field);
// Whether the space-separated list `flags` holds `f`.
bool HasFlag(const std::string& flags, const std::string& f);
// CPUs this process may run on (-1 if unknown).
int AffinityCpus();
// Jiffies stolen by the hypervisor and total, from /proc/stat.
void CpuTimes(uint64_t* steal, uint64_t* total);
// The three load averages of /proc/loadavg.
std::string LoadAvg();
// The page size a pool file in `dir` is mapped with, and why: "4 KiB
// pages: tmpfs huge=never, shmem_enabled=never", "2 MiB pages: tmpfs
// huge=always, ...", or the file system's name when it is not tmpfs. A put's
// store into its predecessor's line pays a TLB miss more often with 4 KiB
// pages (docs/results/performance.md, "Pool page size").
std::string PoolPages(const std::string& dir);
// CPU seconds used by this process so far.
double ProcessCpuSeconds();
// Local time, "YYYY-mm-dd HH:MM:SS TZ".
std::string NowString();
// The p-quantile (0..1) of latencies in ns, in microseconds; reorders v.
double PercentileUs(std::vector<uint32_t>* v, double p);

// One call's latency: nanoseconds since *prev (saturated to 32 bits); *prev
// becomes now. Inline: it runs inside the timed loops.
inline uint32_t LapNs(std::chrono::steady_clock::time_point* prev) {
  auto now = std::chrono::steady_clock::now();
  uint64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now - *prev).count();
  *prev = now;
  return static_cast<uint32_t>(std::min<uint64_t>(ns, UINT32_MAX));
}

}  // namespace bench
}  // namespace flintkv

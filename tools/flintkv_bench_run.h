// One flintkv_bench run (tools/flintkv_bench.cc): fillrandom of `num` keys
// by `threads` writers into a fresh pool with one implementation, timed,
// then verified (entry count, DRAM and PMEM walks, sampled lookups). Reads
// the key, value, pool and verification flags of flintkv_bench.
#pragma once

#include <cstdint>
#include <string>

#include "memtable/durable_skiplist.h"

namespace flintkv {
namespace bench {

struct RunResult {
  double seconds = 0;
  double ops_per_sec = 0;
  double p50_us = 0;
  double p99_us = 0;
  double cpus = 0;  // process CPU time / wall time over the timed region
  memtable::WriteStats stats;
};

struct Config {
  std::string impl;
  int threads;
  uint64_t num;
};

// Runs c once (any impl of --impl); dies on any error or failed check.
RunResult RunImpl(const Config& c, int run_id);
// A measurement probe name (tools/bench_policies.h); always false in
// flintkv_bench, which is built without them.
bool IsProbeImpl(const std::string& impl);
// The pool's one-line notice (e.g. "emulated PMEM") from the first run.
const std::string& PoolNotice();

}  // namespace bench
}  // namespace flintkv

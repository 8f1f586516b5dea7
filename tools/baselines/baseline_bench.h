// fillrandom runs of the paper's baselines for flintkv_bench (--impl=listdb,
// --impl=pmemrocksdb): ListDB(sync) (listdb_sync.h) and the PMemRocksDB
// staging tier (pmem_rocksdb.h), on a fresh FlintKV pool file, with the
// bench's keys and value, the same start barrier and per-call latency
// recording as the bench's own runs. --impl=listdb-volatile is ListDB's
// put with pmem::NoPersist (no write-back, no fence): its DRAM side alone,
// the counterpart of flintkv_bench's "volatile".
//
// After each run (not timed) the result is verified as flintkv's is: the
// DRAM index holds exactly num keys in order, sampled keys are found with
// their value, and recovery's scan of the PMEM log (the baseline's own,
// LD3 / PR2 in docs/baselines.md) finds exactly the num acknowledged records,
// each the one the index points to. Any mismatch is an error Status.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "flintkv/status.h"

namespace flintkv {
namespace bench {

struct BaselineConfig {
  std::string impl;  // "listdb", "listdb-volatile" or "pmemrocksdb"
  uint64_t num = 0;
  int threads = 1;
  size_t key_size = 16;
  size_t value_size = 64;
  int batch_size = 0;  // >0: WriteBatches (pmemrocksdb only)
  std::string pool_path;
  uint64_t chunk_size = 4 << 20;
  bool full_verify = true;
  int verify_samples = 2000;
  // Writes key number `index` (key_size bytes) to dst.
  std::function<void(uint64_t index, char* dst)> make_key;
  // The pool's one-line notice (e.g. "emulated PMEM").
  std::function<void(const std::string&)> info_log;
};

struct BaselineResult {
  double seconds = 0;
  double ops_per_sec = 0;
  double p50_us = 0;  // per call (Put, or WriteBatch)
  double p99_us = 0;
  double cpus = 0;  // process CPU time / wall time over the timed region
};

bool IsBaseline(const std::string& impl);

// One run; the pool file is created and removed.
Status RunBaseline(const BaselineConfig& config, BaselineResult* result);

}  // namespace bench
}  // namespace flintkv

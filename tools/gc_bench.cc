// gc_bench: the version GC's cost on the standalone store. An overwrite-heavy
// workload through flintkv::Store — `threads` writers overwrite a fixed key set
// (each thread its own keys, random order) — run with StoreOptions::gc off and
// on, interleaved, `repeats` times each; prints every run and the medians with
// the on/off ratio.
//
// Both modes use the same pool size, large enough for every version when
// the GC is off (so "off" measures the store without any GC bookkeeping:
// no guards, no pins, no free-extent lookups), and the same fresh pool
// per run. Optional readers (--readers) run Gets on the same keys during
// the write phase, so the reader guard's cost shows in the write-phase
// throughput's neighbour figure (gets/s).
//
// Example:
//   gc_bench --keys=10000 --ops=2000000 --threads=1,2 --repeats=3
//   gc_bench --unique --ops=1000000 --threads=1 --repeats=3  # no garbage
#include <gflags/gflags.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/store.h"
#include "tools/bench_util.h"

DEFINE_int32(keys, 10000, "Keys in the fixed key set");
DEFINE_uint64(ops, 2000000, "Overwrites per run (all threads together)");
DEFINE_string(threads, "1,2", "Writer threads; comma-separated list");
DEFINE_int32(readers, 0, "Reader threads doing Gets during the writes");
DEFINE_bool(unique, false,
            "Each write a new key (no garbage at all): the GC's bookkeeping "
            "and fruitless passes only");
DEFINE_int32(value_size, 100, "Value bytes");
DEFINE_int32(repeats, 3, "Runs per mode; medians are reported");
DEFINE_string(pool_dir, "/dev/shm", "Directory for the pool files");
DEFINE_uint32(gc_interval_ms, 10, "StoreOptions::gc_interval_ms (gc on)");
DEFINE_uint32(gc_nodes_per_hold, 256, "StoreOptions::gc_nodes_per_hold");

namespace {

using flintkv::Status;
using flintkv::Store;
using flintkv::StoreOptions;
using flintkv::bench::CpuInfoField;

struct Run {
  double ops_per_sec = 0;
  double gets_per_sec = 0;
  flintkv::StoreStats stats;
};

std::string Key(int i) {
  char b[16];
  std::snprintf(b, sizeof(b), "key%07d", i);
  return b;
}

Run RunOnce(bool gc, int threads, int run_id) {
  std::string path = FLAGS_pool_dir + "/flintkv_gc_bench_" +
                     std::to_string(getpid()) + "_" + std::to_string(run_id);
  unlink(path.c_str());
  StoreOptions o;
  o.pool.path = path;
  uint64_t node = 48 + 16 + FLAGS_value_size;
  o.pool.size = std::max<uint64_t>(
      64ull << 20, (FLAGS_ops + FLAGS_keys) * node * 13 / 10 + (64ull << 20));
  o.pool.info_log = [](const std::string&) {};
  o.gc = gc;
  o.gc_interval_ms = FLAGS_gc_interval_ms;
  o.gc_nodes_per_hold = FLAGS_gc_nodes_per_hold;
  std::unique_ptr<Store> store;
  Status s = Store::Open(o, &store);
  if (!s.ok()) {
    std::fprintf(stderr, "open: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  const std::string value(FLAGS_value_size, 'v');
  for (int k = 0; k < FLAGS_keys; k++) store->Put(Key(k), value);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> gets{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < FLAGS_readers; r++) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(r + 77);
      std::string v;
      uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        store->Get(Key(static_cast<int>(rng() % FLAGS_keys)), &v);
        n++;
      }
      gets.fetch_add(n);
    });
  }
  std::atomic<bool> failed{false};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; t++) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      std::string v = value;
      uint64_t n = FLAGS_ops / threads;
      for (uint64_t i = 0; i < n; i++) {
        // Thread t owns keys k with k % threads == t.
        int k =
            FLAGS_unique
                ? FLAGS_keys + static_cast<int>(i * threads + t)
                : static_cast<int>(rng() % (FLAGS_keys / threads)) * threads +
                      t;
        v[0] = static_cast<char>('a' + i % 26);
        if (!store->Put(Key(k), v).ok()) {
          failed = true;
          return;
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  stop = true;
  for (auto& r : readers) r.join();
  if (failed) {
    std::fprintf(stderr, "a write failed (gc=%d)\n", gc);
    std::exit(1);
  }
  Run r;
  r.ops_per_sec = FLAGS_ops / secs;
  r.gets_per_sec = gets.load() / secs;
  r.stats = store->GetStats();
  store.reset();
  unlink(path.c_str());
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string Machine() {
  struct utsname u;
  uname(&u);
  std::string model = CpuInfoField("model name");
  return (model.empty() ? "?" : model) + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " CPUs, " +
         u.sysname + " " + u.release;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  std::printf(
      "# gc_bench: %d keys, %llu overwrites/run, %d-byte values, %d "
      "readers, %d repeats\n# machine: %s\n",
      FLAGS_keys, static_cast<unsigned long long>(FLAGS_ops), FLAGS_value_size,
      FLAGS_readers, FLAGS_repeats, Machine().c_str());
  std::stringstream ts(FLAGS_threads);
  std::string tok;
  int run_id = 0;
  while (std::getline(ts, tok, ',')) {
    int threads = std::stoi(tok);
    std::vector<double> off, on, off_g, on_g;
    Run last_on, last_off;
    for (int rep = 0; rep < FLAGS_repeats; rep++) {
      for (bool gc : {false, true}) {  // interleaved
        Run r = RunOnce(gc, threads, run_id++);
        std::printf(
            "threads=%d gc=%-3s run=%d  %9.0f puts/s  %9.0f gets/s  nodes=%llu "
            "chunks=%.1f MiB gc_passes=%llu unlinked=%llu freed=%llu\n",
            threads, gc ? "on" : "off", rep, r.ops_per_sec, r.gets_per_sec,
            static_cast<unsigned long long>(r.stats.nodes),
            r.stats.pmem_bytes_reserved / 1048576.0,
            static_cast<unsigned long long>(r.stats.gc_passes),
            static_cast<unsigned long long>(r.stats.gc_unlinked),
            static_cast<unsigned long long>(r.stats.gc_freed));
        std::fflush(stdout);
        (gc ? on : off).push_back(r.ops_per_sec);
        (gc ? on_g : off_g).push_back(r.gets_per_sec);
      }
    }
    std::printf(
        "MEDIAN threads=%d  gc off %.0f puts/s  gc on %.0f puts/s  on/off "
        "%.3f",
        threads, Median(off), Median(on), Median(on) / Median(off));
    if (FLAGS_readers > 0) {
      std::printf("  | gets/s off %.0f on %.0f on/off %.3f", Median(off_g),
                  Median(on_g), Median(on_g) / Median(off_g));
    }
    std::printf("\n");
  }
  return 0;
}

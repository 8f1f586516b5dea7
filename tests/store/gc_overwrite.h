// The overwrite-forever workload of the version GC: a fixed key set is
// overwritten round after round in a pool that holds only a few copies of
// it. With the version GC every write must succeed and the pool's chunks
// stop growing; without it the pool fills within a few rounds.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "flintkv/store.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace test {

struct OverwriteResult {
  uint64_t writes = 0;        // acknowledged
  Status first_error;         // of the first failed write
  uint64_t max_reserved = 0;  // largest pmem_bytes_reserved seen
  StoreStats final_stats;
  double seconds = 0;
};

constexpr int kOverwriteValueSize = 100;
// 10,000 keys of 8 bytes, 100-byte values: 144-byte nodes, 1.4 MiB a copy.
// An 8 MiB pool (the libpmemobj minimum) takes 25,466 of them without GC
// (WithoutGcThePoolFills): about 2.5 copies.
constexpr uint64_t kOverwritePoolSize = 8ull << 20;

inline std::string OverwriteKey(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "key%05d", i);
  return buf;
}

inline std::string OverwriteValue(int key, uint64_t round) {
  char buf[48];
  int n = std::snprintf(buf, sizeof(buf), "%05d@%012llu|", key,
                        static_cast<unsigned long long>(round));
  std::string v(buf, n);
  v.resize(kOverwriteValueSize, static_cast<char>('a' + round % 26));
  return v;
}

inline StoreOptions OverwriteOptions(const std::string& path, bool gc) {
  StoreOptions o = QuietStoreOptions(path, kOverwritePoolSize, 512 << 10);
  o.gc = gc;
  return o;
}

// Overwrites keys [0, keys) round-robin until `total` writes were
// acknowledged or one fails; checks the last value of every key.
inline OverwriteResult RunOverwrite(const StoreOptions& options, int keys,
                                    uint64_t total) {
  OverwriteResult r;
  std::unique_ptr<Store> store;
  Status s = Store::Open(options, &store);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return r;
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t w = 0; w < total; w++) {
    int k = static_cast<int>(w % keys);
    s = store->Put(OverwriteKey(k), OverwriteValue(k, w / keys));
    if (!s.ok()) {
      r.first_error = s;
      break;
    }
    r.writes++;
    if (w % 65536 == 0) {
      r.max_reserved =
          std::max(r.max_reserved, store->GetStats().pmem_bytes_reserved);
    }
  }
  r.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  r.final_stats = store->GetStats();
  r.max_reserved = std::max(r.max_reserved, r.final_stats.pmem_bytes_reserved);
  // Every key holds the value of its last acknowledged write.
  std::string v;
  for (int k = 0; k < keys && static_cast<uint64_t>(k) < r.writes; k++) {
    uint64_t last = r.writes - 1 - ((r.writes - 1 + keys - k) % keys);
    EXPECT_TRUE(store->Get(OverwriteKey(k), &v).ok()) << k;
    EXPECT_EQ(v, OverwriteValue(k, last / keys)) << k;
    if (::testing::Test::HasFailure()) break;
  }
  return r;
}

inline void Print(const char* name, const OverwriteResult& r) {
  std::printf(
      "[gc-overwrite] %s: %llu writes in %.1f s (%.0f/s), max chunks %.1f "
      "MiB of an %llu MiB pool, %llu nodes, %llu unlinked, %llu freed, %s\n",
      name, static_cast<unsigned long long>(r.writes), r.seconds,
      r.writes / (r.seconds > 0 ? r.seconds : 1), r.max_reserved / 1048576.0,
      static_cast<unsigned long long>(kOverwritePoolSize >> 20),
      static_cast<unsigned long long>(r.final_stats.nodes),
      static_cast<unsigned long long>(r.final_stats.gc_unlinked),
      static_cast<unsigned long long>(r.final_stats.gc_freed),
      r.first_error.ok() ? "no error" : r.first_error.ToString().c_str());
  std::fflush(stdout);
}

}  // namespace test
}  // namespace flintkv

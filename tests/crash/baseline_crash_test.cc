// Crash consistency of the benchmark baselines (tools/baselines/,
// docs/baselines.md) on the simulated persistence domain: every acknowledged
// put must be recovered by the baseline's own log scan, with its value, and
// nothing that was never written may appear.
//  - ListDbSync / PmemRocksDb, single-threaded: a crash at every fence, with
//    eviction subsets of the unfenced lines.
//  - ListDbSync / PmemRocksDb, 4 threads: crashes at random fences.
//  - The simulated domain keeps a shared line's newer content when a thread
//    fences an older flush of it (the baselines' logs share lines between
//    threads; FlintKV's arena never does).
//  - Negative controls (the checker bites): ListDB's original recovery, which
//    stops at the first invalid record, loses an acknowledged put behind an
//    unwritten reservation (Appendix A, a deterministic schedule); ListDB's
//    original missing fence after the validity mark loses acknowledged puts.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memtable/key_comparator.h"
#include "tests/crash/sim_domain.h"
#include "tests/util/test_util.h"
#include "tools/baselines/listdb_sync.h"
#include "tools/baselines/pmem_rocksdb.h"

namespace flintkv {
namespace baselines {
namespace {

using pmem::SimPersist;
constexpr uint64_t kChunk = 16 << 10;  // small: many chunk switches

std::string Key(int t, int i) {
  return "k" + std::to_string(i * 7919 % 1000) + "." + std::to_string(i) +
         ".t" + std::to_string(t);
}
std::string Value(int t, int i) {
  // 5..85 bytes, so records straddle cache lines in varied ways.
  return std::string(5 + (i * 37 + t * 11) % 80, static_cast<char>('a' + t)) +
         std::to_string(i);
}

// One crash state's recovered content: key -> value.
using Content = std::map<std::string, std::string>;

struct Checked {
  uint64_t states = 0;
  uint64_t failures = 0;
  std::string first;
};

// Every key of thread t below acked[t] present with its value; every
// recovered key one of thread t's first acked[t] + 1 (one in flight).
void CheckContent(const Content& got, const std::vector<uint64_t>& acked,
                  int ops, Checked* out, const std::string& where) {
  std::string err;
  size_t expected_known = 0;
  for (size_t t = 0; t < acked.size() && err.empty(); t++) {
    for (int i = 0; i < ops; i++) {
      auto it = got.find(Key(static_cast<int>(t), i));
      if (static_cast<uint64_t>(i) < acked[t]) {
        if (it == got.end()) {
          err = "acknowledged " + Key(static_cast<int>(t), i) + " lost";
          break;
        }
      } else if (it != got.end() && static_cast<uint64_t>(i) > acked[t]) {
        err = "never-started " + Key(static_cast<int>(t), i) + " recovered";
        break;
      }
      if (it != got.end()) {
        expected_known++;
        if (it->second != Value(static_cast<int>(t), i)) {
          err = Key(static_cast<int>(t), i) + " has a wrong value";
          break;
        }
      }
    }
  }
  if (err.empty() && expected_known != got.size()) {
    err = "unknown keys recovered";
  }
  out->states++;
  if (!err.empty()) {
    if (out->failures++ == 0) out->first = where + ": " + err;
  }
}

// Runs `threads` writers of `ops` puts each on a baseline in a simulated
// region, captures crash states at fences (all if single-threaded, else
// with probability p), and checks each image (durable image plus eviction
// subsets) after recovery with scan(region, chunk_offset, chunk_len, fn).
template <class DB, class ScanFn>
Checked Campaign(int threads, int ops, double p, uint64_t seed,
                 bool durable_only, ScanFn scan,
                 std::function<DB*(pmem::SimRegion*)> make) {
  pmem::SimRegion region(1 << 20, kChunk);
  pmem::SimDomain dom(&region);
  region.set_domain(&dom);
  pmem::SimDomain::SetGlobal(&dom);
  if (threads > 1) dom.set_jitter(8, 50);
  std::unique_ptr<DB> db(make(&region));
  std::vector<std::atomic<uint64_t>> acked(threads);
  for (auto& a : acked) a.store(0);
  std::vector<pmem::CrashState> captured;
  std::mt19937_64 rng(seed);
  dom.set_fence_hook([&](pmem::SimDomain* d, uint64_t idx,
                         const std::string& label) {
    if (threads > 1 && std::uniform_real_distribution<double>(0, 1)(rng) >= p) {
      return;
    }
    pmem::CrashState cs = d->CaptureLocked(idx, label);
    for (auto& a : acked) cs.acked.push_back(a.load(std::memory_order_acquire));
    captured.push_back(std::move(cs));
  });
  std::atomic<bool> failed{false};
  auto worker = [&](int t) {
    pmem::SimDomain::ScopedThreadOverride scope(&dom);
    for (int i = 0; i < ops; i++) {
      std::string k = Key(t, i), v = Value(t, i);
      if (!db->Put(k, v).ok()) {
        failed = true;
        return;
      }
      acked[t].store(i + 1, std::memory_order_release);
    }
  };
  std::vector<std::thread> th;
  for (int t = 0; t < threads; t++) th.emplace_back(worker, t);
  for (auto& x : th) x.join();
  dom.set_fence_hook(nullptr);
  {
    pmem::CrashState fin = dom.Capture("end");
    for (auto& a : acked) fin.acked.push_back(a.load());
    captured.push_back(std::move(fin));
  }
  db.reset();
  pmem::SimDomain::SetGlobal(nullptr);
  EXPECT_FALSE(failed.load()) << "a put failed";

  Checked out;
  std::vector<char> image;
  for (const pmem::CrashState& cs : captured) {
    auto subsets =
        durable_only ? std::vector<std::vector<bool>>{std::vector<bool>(
                           cs.candidates.size(), false)}
                     : pmem::EvictionSubsets(cs.candidates.size(), 3, 3, &rng);
    for (const auto& pick : subsets) {
      cs.Build(pick, &image);
      pmem::SimRegion r(image.data(), image.size(), region.size());
      if (!r.Valid()) {
        out.failures++;
        continue;
      }
      Content got;
      bool dup = false;
      for (const auto& ch : r.Chunks()) {
        scan(r, ch.offset, ch.len, [&](const pmem::NvmNode* n) {
          std::string_view k = memtable::PrefixedKey(n->data());
          std::string v(n->data() + n->key_size, n->data_size - n->key_size);
          dup |= !got.emplace(std::string(k), v).second;
        });
      }
      if (dup) {
        if (out.failures++ == 0) out.first = cs.label + ": a key twice";
        continue;
      }
      CheckContent(got, cs.acked, ops, &out,
                   cs.label + " #" + std::to_string(cs.fence_index));
    }
  }
  return out;
}

// A Put adapter for PmemRocksDbStaging.
template <class P>
struct RocksPut : PmemRocksDbStaging<P> {
  using PmemRocksDbStaging<P>::PmemRocksDbStaging;
  Status Put(std::string_view k, std::string_view v) {
    return this->Write(&k, &v, 1);
  }
};

memtable::BytewiseKeyComparator g_cmp;

Checked ListDbCampaign(int threads, int ops, double p, uint64_t seed,
                       const ListDbOptions& o, bool durable_only = false) {
  using L = ListDbSync<SimPersist>;
  return Campaign<L>(
      threads, ops, p, seed, durable_only,
      [&](const pmem::SimRegion& r, uint64_t off, uint64_t len, auto fn) {
        L::ScanChunk(r, r.root()->list_id, off, len, o, fn);
      },
      [&](pmem::SimRegion* r) {
        return new L(&g_cmp, r, r->root()->list_id, o);
      });
}

Checked RocksCampaign(int threads, int ops, double p, uint64_t seed) {
  using R = RocksPut<SimPersist>;
  return Campaign<R>(
      threads, ops, p, seed, false,
      [](const pmem::SimRegion& r, uint64_t off, uint64_t len, auto fn) {
        R::ScanChunk(r, r.root()->list_id, off, len, fn);
      },
      [](pmem::SimRegion* r) { return new R(&g_cmp, r, r->root()->list_id); });
}

void Report(const char* name, const Checked& c) {
  std::printf("[baseline-crash] %s: %llu states, %llu failures%s%s\n", name,
              static_cast<unsigned long long>(c.states),
              static_cast<unsigned long long>(c.failures),
              c.first.empty() ? "" : "; first: ", c.first.c_str());
}

TEST(BaselineCrashTest, ListDbSyncEveryFence) {
  Checked c = ListDbCampaign(1, test::Scaled(60, 3, 2), 1, 1, {});
  Report("listdb(sync) single-threaded", c);
  EXPECT_EQ(c.failures, 0u) << c.first;
  EXPECT_GT(c.states, 100u);
}

TEST(BaselineCrashTest, ListDbSyncMultiThreaded) {
  for (uint64_t seed = 1; seed <= 3; seed++) {
    Checked c = ListDbCampaign(4, test::Scaled(80, 4, 2), 0.1, seed, {});
    Report("listdb(sync) 4 threads", c);
    EXPECT_EQ(c.failures, 0u) << c.first;
    EXPECT_GT(c.states, 10u);
  }
}

TEST(BaselineCrashTest, PmemRocksDbEveryFence) {
  Checked c = RocksCampaign(1, test::Scaled(60, 3, 2), 1, 1);
  Report("pmemrocksdb single-threaded", c);
  EXPECT_EQ(c.failures, 0u) << c.first;
  EXPECT_GT(c.states, 50u);
}

TEST(BaselineCrashTest, PmemRocksDbMultiThreaded) {
  for (uint64_t seed = 1; seed <= 3; seed++) {
    Checked c = RocksCampaign(4, test::Scaled(80, 4, 2), 0.2, seed);
    Report("pmemrocksdb 4 threads", c);
    EXPECT_EQ(c.failures, 0u) << c.first;
    EXPECT_GT(c.states, 5u);
  }
}

// Thread A flushes a line; thread B then writes the same line, flushes and
// fences it; A's later fence must not put A's older copy back into NVM.
// (Before the flush-order fix in SimDomain it did, and ListDbSyncMultiThreaded
// lost acknowledged puts whose records shared a line with another thread's.)
TEST(BaselineCrashTest, SimDomainKeepsTheNewerFlushOfASharedLine) {
  pmem::SimRegion region(1 << 20, kChunk);
  pmem::SimDomain dom(&region);
  char* begin = nullptr;
  size_t len = 0;
  ASSERT_TRUE(
      region.NewChunk(1, 64, pmem::ChunkFit::kAtLeast, false, &begin, &len)
          .ok());
  test::Steps steps;
  std::thread a([&] {
    pmem::SimDomain::ScopedThreadOverride scope(&dom);
    begin[0] = 'a';
    dom.Flush(begin, 1);  // flush-time copy: "a", no "b"
    steps.Set(1);         // flushed
    steps.WaitFor(2);
    dom.Fence();
  });
  std::thread b([&] {
    pmem::SimDomain::ScopedThreadOverride scope(&dom);
    steps.WaitFor(1);
    begin[8] = 'b';
    dom.Flush(begin + 8, 1);
    dom.Fence();
    steps.Set(2);  // b durable
  });
  a.join();
  b.join();
  pmem::CrashState cs = dom.Capture("end");
  const uint64_t off = region.ToOffset(begin);
  ASSERT_LT(off + 8, cs.durable.size());
  EXPECT_EQ(cs.durable[off], 'a');
  EXPECT_EQ(cs.durable[off + 8], 'b') << "B's fenced write was reverted";
}

// Appendix A: thread 1 has reserved its record but not written it; thread 2
// writes, marks and returns; crash. The original scan stops at thread 1's
// empty record and loses thread 2's acknowledged put; the fixed scan (LD3)
// skips it.
TEST(BaselineCrashTest, AppendixAScheduleNeedsTheFix) {
  for (bool original : {false, true}) {
    pmem::SimRegion region(1 << 20, kChunk);
    pmem::SimDomain dom(&region);
    region.set_domain(&dom);
    pmem::SimDomain::ScopedThreadOverride scope(&dom);
    ListDbOptions o;
    o.stop_at_invalid = original;
    const uint64_t id = region.root()->list_id;
    ListDbSync<SimPersist> db(&g_cmp, &region, id, o);
    ASSERT_TRUE(db.Put("a0", "first").ok());
    pmem::NvmNode* pending = nullptr;
    ASSERT_TRUE(db.Reserve(2, 6, &pending).ok());    // thread 1, not written
    ASSERT_TRUE(db.Put("b1", "acknowledged").ok());  // thread 2, returns
    pmem::CrashState cs = dom.Capture("crash");
    std::vector<char> image;
    cs.Build(std::vector<bool>(cs.candidates.size(), false), &image);
    pmem::SimRegion r(image.data(), image.size(), region.size());
    ASSERT_TRUE(r.Valid());
    std::map<std::string, std::string> got;
    for (const auto& ch : r.Chunks()) {
      ListDbSync<SimPersist>::ScanChunk(
          r, id, ch.offset, ch.len, o, [&](const pmem::NvmNode* n) {
            got[std::string(memtable::PrefixedKey(n->data()))] = std::string(
                n->data() + n->key_size, n->data_size - n->key_size);
          });
    }
    EXPECT_EQ(got.count("a0"), 1u);
    if (original) {
      EXPECT_EQ(got.count("b1"), 0u) << "the original scan should lose it";
    } else {
      ASSERT_EQ(got.count("b1"), 1u) << "acknowledged put lost";
      EXPECT_EQ(got["b1"], "acknowledged");
    }
  }
}

// ListDB's missing flush: without the fence after the mark, a put returns
// before its mark is durable; the durable image alone loses it.
TEST(BaselineCrashTest, MissingFinalFenceLosesAcknowledgedPuts) {
  ListDbOptions o;
  o.no_final_fence = true;
  Checked c = ListDbCampaign(1, 20, 1, 1, o, /*durable_only=*/true);
  Report("listdb original fences (negative control)", c);
  EXPECT_GT(c.failures, 0u);
  Checked fixed = ListDbCampaign(1, 20, 1, 1, {}, /*durable_only=*/true);
  EXPECT_EQ(fixed.failures, 0u) << fixed.first;
}

}  // namespace
}  // namespace baselines
}  // namespace flintkv

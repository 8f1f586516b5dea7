// Crash-injection campaign on the simulated persistence domain (issue 5):
// the unmodified durable skiplist must pass every explored crash state.
//  - SingleThreadedEveryFence: a crash at every fence of a PUT / DELETE /
//    WRITEBATCH workload, several eviction subsets at each, and crashes at
//    every fence of the recoveries that had work to do.
//  - MultiThreaded: 4 writer threads on interleaved keys (combining across
//    threads), crash states captured at random fences.
//  - WithGc{SingleThreaded,MultiThreaded}: the same with the version GC
//    unlinking and reusing versions (a pass every few ops on the worker,
//    or a GC thread): every GC fence is a crash point too.
// Prints the number of crash states explored. FLINTKV_LONG_TESTS=1 runs the
// long campaign (more ops, more seeds, more random subsets).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "pmem/sim_domain.h"
#include "tests/crash_campaign.h"
#include "tests/test_util.h"

namespace flintkv {
namespace crashsim {
namespace {

void Report(const char* name, const CampaignResult& r, double secs) {
  std::printf("[crash-sim] %s: %s in %.1f s\n", name, r.Summary().c_str(),
              secs);
  for (const auto& m : r.messages) std::printf("  %s\n", m.c_str());
}

class CrashSimTest : public ::testing::Test {
 protected:
  void SetUp() override { pmem::SetSimFault(pmem::Fault::kNone); }
};

TEST_F(CrashSimTest, SingleThreadedEveryFence) {
  const bool long_mode = test::LongMode();
  const int seeds = long_mode ? 8 : 2;
  uint64_t states = 0;
  for (int seed = 1; seed <= seeds; seed++) {
    CampaignOptions o;
    o.threads = 1;
    o.seed = seed;
    o.ops_per_thread = long_mode ? 300 : test::Scaled(100, 4, 2);
    o.random_subsets = long_mode ? 8 : 3;
    auto t0 = std::chrono::steady_clock::now();
    CampaignResult r = RunCampaign(o);
    Report(("single-threaded seed " + std::to_string(seed)).c_str(), r,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
               .count());
    EXPECT_EQ(r.failures, 0u) << r.Summary();
    // Every fence was a crash point.
    EXPECT_EQ(r.crash_points, r.fences + 1);
    EXPECT_GT(r.recovery_states, 0u);
    states += r.states;
  }
  std::printf("[crash-sim] single-threaded total states explored: %llu\n",
              static_cast<unsigned long long>(states));
}

TEST_F(CrashSimTest, MultiThreaded) {
  const bool long_mode = test::LongMode();
  const int runs = long_mode ? 20 : (FLINTKV_TEST_TSAN ? 2 : 4);
  uint64_t states = 0, points = 0;
  for (int run = 1; run <= runs; run++) {
    CampaignOptions o;
    o.threads = 4;
    o.seed = 100 + run;
    o.ops_per_thread = long_mode ? 400 : test::Scaled(150, 3, 2);
    o.keys_per_thread = 8;
    o.capture_probability = long_mode ? 0.1 : 0.06;
    o.random_subsets = long_mode ? 6 : 3;
    auto t0 = std::chrono::steady_clock::now();
    CampaignResult r = RunCampaign(o);
    Report(("multi-threaded run " + std::to_string(run)).c_str(), r,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
               .count());
    EXPECT_EQ(r.failures, 0u) << r.Summary();
    EXPECT_GT(r.crash_points, 1u);
    states += r.states;
    points += r.crash_points;
  }
  std::printf(
      "[crash-sim] multi-threaded total: %llu crash points, %llu "
      "states explored\n",
      static_cast<unsigned long long>(points),
      static_cast<unsigned long long>(states));
}

TEST_F(CrashSimTest, WithGcSingleThreadedEveryFence) {
  const bool long_mode = test::LongMode();
  uint64_t states = 0, unlinked = 0, freed = 0;
  for (int seed = 1; seed <= (long_mode ? 8 : 2); seed++) {
    CampaignOptions o;
    o.threads = 1;
    o.seed = 200 + seed;
    o.ops_per_thread = long_mode ? 300 : test::Scaled(120, 4, 2);
    o.keys_per_thread = 6;  // many versions per key: much garbage
    o.random_subsets = long_mode ? 8 : 3;
    o.gc_every = 3;
    auto t0 = std::chrono::steady_clock::now();
    CampaignResult r = RunCampaign(o);
    Report(("gc single-threaded seed " + std::to_string(seed)).c_str(), r,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
               .count());
    EXPECT_EQ(r.failures, 0u) << r.Summary();
    EXPECT_EQ(r.crash_points, r.fences + 1);
    EXPECT_GT(r.gc_unlinked, 0u);
    EXPECT_GT(r.gc_freed, 0u);
    states += r.states;
    unlinked += r.gc_unlinked;
    freed += r.gc_freed;
  }
  std::printf(
      "[crash-sim] gc single-threaded: %llu states, %llu nodes unlinked, "
      "%llu freed\n",
      static_cast<unsigned long long>(states),
      static_cast<unsigned long long>(unlinked),
      static_cast<unsigned long long>(freed));
}

TEST_F(CrashSimTest, WithGcMultiThreaded) {
  const bool long_mode = test::LongMode();
  const int runs = long_mode ? 12 : (FLINTKV_TEST_TSAN ? 1 : 3);
  for (int run = 1; run <= runs; run++) {
    CampaignOptions o;
    o.threads = 3;  // plus the GC thread
    o.seed = 300 + run;
    o.ops_per_thread = long_mode ? 400 : test::Scaled(150, 3, 2);
    o.keys_per_thread = 6;
    o.capture_probability = long_mode ? 0.1 : 0.06;
    o.random_subsets = long_mode ? 6 : 3;
    o.gc_every = 1;
    auto t0 = std::chrono::steady_clock::now();
    CampaignResult r = RunCampaign(o);
    Report(("gc multi-threaded run " + std::to_string(run)).c_str(), r,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
               .count());
    EXPECT_EQ(r.failures, 0u) << r.Summary();
    EXPECT_GT(r.crash_points, 1u);
    EXPECT_GT(r.gc_unlinked, 0u);
  }
}

}  // namespace
}  // namespace crashsim
}  // namespace flintkv

// FreeExtents (memtable/free_extents.h), the version GC's reusable PMEM:
// best fit, coalescing, byte accounting, against a model, and concurrent
// Add/Take (run under TSAN by the suite's concurrency label).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "memtable/free_extents.h"

namespace flintkv {
namespace memtable {
namespace {

TEST(FreeExtentsTest, TakesTheSmallestRangeThatFitsFromItsFront) {
  std::vector<char> buf(1024);
  char* b = buf.data();
  FreeExtents f;
  f.Add(b, 64);         // [0, 64)
  f.Add(b + 128, 32);   // [128, 160)
  f.Add(b + 256, 128);  // [256, 384)
  EXPECT_EQ(224u, f.Bytes());
  char* p = nullptr;
  ASSERT_TRUE(f.Take(30, &p));
  EXPECT_EQ(b + 128, p);  // the 32-byte range, not the first or the biggest
  ASSERT_TRUE(f.Take(64, &p));
  EXPECT_EQ(b, p);
  ASSERT_TRUE(f.Take(100, &p));
  EXPECT_EQ(b + 256, p);  // its front; [356, 384) stays free
  EXPECT_EQ(224u - 30 - 64 - 100, f.Bytes());
  EXPECT_FALSE(f.Take(29, &p));  // 2 + 28 bytes left, apart
  ASSERT_TRUE(f.Take(28, &p));
  EXPECT_EQ(b + 356, p);
  f.Add(b, 0);  // nothing
  EXPECT_EQ(2u, f.Bytes());
}

TEST(FreeExtentsTest, NeighboursCoalesce) {
  std::vector<char> buf(256);
  char* b = buf.data();
  FreeExtents f;
  f.Add(b, 16);
  f.Add(b + 32, 16);
  char* p = nullptr;
  EXPECT_FALSE(f.Take(48, &p));
  f.Add(b + 16, 16);  // joins both neighbours: [0, 48)
  ASSERT_TRUE(f.Take(48, &p));
  EXPECT_EQ(b, p);
  EXPECT_EQ(0u, f.Bytes());
  EXPECT_FALSE(f.Take(1, &p));
}

// Random Adds of taken ranges and Takes against a unit map: every Take is
// the lowest-addressed of the smallest maximal free runs that hold it
// (best fit over coalesced ranges), and Bytes() is the model's count.
TEST(FreeExtentsTest, AgreesWithAModel) {
  constexpr size_t kUnit = 16, kUnits = 512;
  std::vector<char> buf(kUnit * kUnits);
  char* b = buf.data();
  std::vector<bool> free_unit(kUnits, true);
  FreeExtents f;
  f.Add(b, buf.size());
  std::vector<std::pair<size_t, size_t>> taken;  // (first unit, units)
  std::mt19937 rng(11);
  for (int step = 0; step < 5000; step++) {
    if (taken.empty() || rng() % 2) {
      const size_t units = 1 + rng() % 12;
      // Model: best fit over maximal runs.
      size_t best = SIZE_MAX, best_len = SIZE_MAX;
      for (size_t i = 0; i < kUnits;) {
        if (!free_unit[i]) {
          i++;
          continue;
        }
        size_t j = i;
        while (j < kUnits && free_unit[j]) j++;
        if (j - i >= units && j - i < best_len) {
          best = i;
          best_len = j - i;
        }
        i = j;
      }
      char* p = nullptr;
      const bool got = f.Take(units * kUnit, &p);
      ASSERT_EQ(best != SIZE_MAX, got) << "step " << step;
      if (!got) continue;
      ASSERT_EQ(b + best * kUnit, p) << "step " << step;
      for (size_t u = best; u < best + units; u++) free_unit[u] = false;
      taken.emplace_back(best, units);
    } else {
      const size_t k = rng() % taken.size();
      const auto [first, units] = taken[k];
      taken.erase(taken.begin() + k);
      f.Add(b + first * kUnit, units * kUnit);
      for (size_t u = first; u < first + units; u++) free_unit[u] = true;
    }
    size_t free_units = 0;
    for (bool u : free_unit) free_units += u;
    ASSERT_EQ(free_units * kUnit, f.Bytes()) << "step " << step;
  }
}

// Threads take and give back their own ranges; in the end every byte is
// free again and coalesced into the one range it started as.
TEST(FreeExtentsTest, ConcurrentTakeAndAdd) {
  constexpr size_t kSize = 1 << 16;
  std::vector<char> buf(kSize);
  FreeExtents f;
  f.Add(buf.data(), kSize);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&f, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<char*, size_t>> mine;
      for (int i = 0; i < 2000; i++) {
        const size_t n = 16 * (1 + rng() % 8);
        char* p = nullptr;
        if (mine.size() < 16 && f.Take(n, &p)) {
          mine.emplace_back(p, n);
        } else if (!mine.empty()) {
          f.Add(mine.back().first, mine.back().second);
          mine.pop_back();
        }
      }
      for (auto& [p, n] : mine) f.Add(p, n);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(kSize, f.Bytes());
  char* p = nullptr;
  ASSERT_TRUE(f.Take(kSize, &p));
  EXPECT_EQ(buf.data(), p);
}

}  // namespace
}  // namespace memtable
}  // namespace flintkv

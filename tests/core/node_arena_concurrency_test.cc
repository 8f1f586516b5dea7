// NodeArena (memtable/node_arena.h) on its own, over a real pool: nodes are
// aligned and disjoint, no cache line holds nodes of two threads, the byte
// counters bound what was handed out, and freed bytes are reused first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "memtable/node_arena.h"
#include "pmem/layout.h"
#include "pmem/pool.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace memtable {
namespace {

struct ArenaFixture {
  explicit ArenaFixture(size_t chunk_size) {
    Status s = pmem::Pool::Open(
        test::QuietPoolOptions(tmp.path(), 128ull << 20, chunk_size), &pool);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(pool->CreateList(pmem::kListStandalone, &root).ok());
    arena = std::make_unique<NodeArena>(pool.get(), root->list_id, chunk_size);
  }
  test::TempPool tmp;
  std::unique_ptr<pmem::Pool> pool;
  pmem::ListRoot* root = nullptr;
  std::unique_ptr<NodeArena> arena;
};

struct Piece {
  uintptr_t begin;
  size_t size;
  int thread;
};

TEST(NodeArenaTest, ThreadsGetDisjointAlignedNodesOnLinesOfTheirOwn) {
  const size_t kChunk = 256 << 10;
  ArenaFixture f(kChunk);
  constexpr int kThreads = 4, kPerThread = 3000;
  std::mutex mu;
  std::vector<Piece> pieces;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<Piece> mine;
      for (int i = 0; i < kPerThread; i++) {
        // Mostly small nodes (shards), some mid-size (carved from the
        // chunk), a few bigger than a quarter chunk (a chunk each).
        const int kind = rng() % 1000;
        size_t size = pmem::kNodeAlign * (1 + rng() % 16);
        if (kind >= 995) {
          size = kChunk / 4 + pmem::kNodeAlign;
        } else if (kind >= 900) {
          size = pmem::kNodeAlign * (200 + rng() % 100);
        }
        char* p = nullptr;
        Status s = f.arena->Allocate(size, false, &p);
        ASSERT_TRUE(s.ok()) << s.ToString();
        mine.push_back({reinterpret_cast<uintptr_t>(p), size, t});
      }
      std::lock_guard<std::mutex> l(mu);
      pieces.insert(pieces.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_EQ(static_cast<size_t>(kThreads * kPerThread), pieces.size());

  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  size_t total = 0;
  std::map<uintptr_t, int> line_owner;  // cache line -> thread
  const uintptr_t base = reinterpret_cast<uintptr_t>(f.pool->base());
  for (size_t i = 0; i < pieces.size(); i++) {
    const Piece& p = pieces[i];
    total += p.size;
    EXPECT_EQ(0u, p.begin % pmem::kNodeAlign);
    EXPECT_GE(p.begin, base);
    if (i > 0) {
      ASSERT_LE(pieces[i - 1].begin + pieces[i - 1].size, p.begin)
          << "nodes overlap";
    }
    for (uintptr_t l = p.begin / pmem::kCacheLine;
         l <= (p.begin + p.size - 1) / pmem::kCacheLine; l++) {
      auto [it, fresh] = line_owner.emplace(l, p.thread);
      ASSERT_TRUE(fresh || it->second == p.thread)
          << "a cache line holds nodes of threads " << it->second << " and "
          << p.thread;
    }
  }
  EXPECT_GE(f.arena->UsedBytes(), total);
  std::printf("handed out %zu bytes; used %zu, reserved %zu\n", total,
              f.arena->UsedBytes(), f.arena->ReservedBytes());
  EXPECT_GE(f.arena->ReservedBytes(), f.arena->UsedBytes());
  // Bounded waste, not a chunk per node: a big node (> chunk / 4) takes a
  // chunk and gives up at most one chunk's tail; small and mid-size nodes
  // lose at most a block's tail shorter than the node (< 1/6 of a block
  // here), a partial line per change of thread, and one partly used chunk
  // plus one block per thread at the end.
  size_t big = 0;
  for (const Piece& p : pieces) big += p.size > kChunk / 4;
  EXPECT_LE(f.arena->ReservedBytes(),
            total + total / 4 + big * kChunk + 8 * kChunk);
}

TEST(NodeArenaTest, FreedBytesAreReusedFirst) {
  ArenaFixture f(64 << 10);
  char* a = nullptr;
  char* b = nullptr;
  ASSERT_TRUE(f.arena->Allocate(128, false, &a).ok());
  ASSERT_TRUE(f.arena->Allocate(128, false, &b).ok());
  EXPECT_EQ(0u, f.arena->FreeBytes());
  const size_t used = f.arena->UsedBytes();
  f.arena->Free(a, 128);
  EXPECT_EQ(128u, f.arena->FreeBytes());
  EXPECT_EQ(used - 128, f.arena->UsedBytes());
  char* c = nullptr;
  ASSERT_TRUE(f.arena->Allocate(64, false, &c).ok());
  EXPECT_EQ(a, c);  // the freed node's front
  EXPECT_EQ(64u, f.arena->FreeBytes());
  char* d = nullptr;
  ASSERT_TRUE(f.arena->Allocate(64, false, &d).ok());
  EXPECT_EQ(a + 64, d);
  EXPECT_EQ(0u, f.arena->FreeBytes());
}

}  // namespace
}  // namespace memtable
}  // namespace flintkv

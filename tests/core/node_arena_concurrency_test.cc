// NodeArena (memtable/node_arena.h) on its own, over a real pool: nodes are
// aligned and disjoint, no cache line holds nodes of two threads (running
// at once, or one after another with the same thread id and thread-local
// storage), the byte counters bound what was handed out, and freed bytes
// are reused first.
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
#include "memtable/thread_id.h"
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

// Allocates a node of size bytes, recorded as thread's in *mine.
::testing::AssertionResult AllocatePiece(NodeArena* arena, size_t size,
                                         int thread, std::vector<Piece>* mine) {
  char* p = nullptr;
  Status s = arena->Allocate(size, false, &p);
  if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
  mine->push_back({reinterpret_cast<uintptr_t>(p), size, thread});
  return ::testing::AssertionSuccess();
}

// Every thread's pieces.
struct AllPieces {
  void Add(const std::vector<Piece>& mine) {
    std::lock_guard<std::mutex> l(mu);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::mutex mu;
  std::vector<Piece> all;
};

// What the arena promises of the nodes it handed out (none freed): aligned,
// inside the pool, disjoint, no cache line holding nodes of two threads,
// and byte counters that cover them. *total: the bytes handed out.
void CheckPieces(const ArenaFixture& f, std::vector<Piece> pieces,
                 size_t* total) {
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  *total = 0;
  std::map<uintptr_t, int> line_owner;  // cache line -> thread
  const uintptr_t base = reinterpret_cast<uintptr_t>(f.pool->base());
  for (size_t i = 0; i < pieces.size(); i++) {
    const Piece& p = pieces[i];
    *total += p.size;
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
  EXPECT_GE(f.arena->UsedBytes(), *total);
  std::printf("handed out %zu bytes; used %zu, reserved %zu\n", *total,
              f.arena->UsedBytes(), f.arena->ReservedBytes());
  EXPECT_GE(f.arena->ReservedBytes(), f.arena->UsedBytes());
}

TEST(NodeArenaTest, ThreadsGetDisjointAlignedNodesOnLinesOfTheirOwn) {
  const size_t kChunk = 256 << 10;
  ArenaFixture f(kChunk);
  constexpr int kThreads = 4, kPerThread = 3000;
  AllPieces pieces;
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
        ASSERT_TRUE(AllocatePiece(f.arena.get(), size, t, &mine));
      }
      pieces.Add(mine);
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_EQ(static_cast<size_t>(kThreads * kPerThread), pieces.all.size());
  size_t total = 0;
  ASSERT_NO_FATAL_FAILURE(CheckPieces(f, pieces.all, &total));
  // Bounded waste, not a chunk per node: a big node (> chunk / 4) takes a
  // chunk and gives up at most one chunk's tail; small and mid-size nodes
  // lose at most a block's tail shorter than the node (< 1/6 of a block
  // here), a partial line per change of thread, and one partly used chunk
  // plus one block per thread at the end.
  size_t big = 0;
  for (const Piece& p : pieces.all) big += p.size > kChunk / 4;
  EXPECT_LE(f.arena->ReservedBytes(),
            total + total / 4 + big * kChunk + 8 * kChunk);
}

// Allocates from a thread's exit, after its ThreadId went back (declared
// before the thread takes an id, so destroyed after): such nodes come from
// the per-CPU shards, as RocksDB's late thread_local destructors' do.
struct AllocAtExit {
  NodeArena* arena = nullptr;
  AllPieces* pieces = nullptr;
  int thread = -1;
  int count = 0;
  size_t size = 0;
  ~AllocAtExit() {
    if (!arena) return;
    EXPECT_LT(ThreadId::Get(), 0) << "the thread still holds an id";
    std::vector<Piece> mine;
    for (int i = 0; i < count; i++) {
      EXPECT_TRUE(AllocatePiece(arena, size, thread, &mine));
    }
    pieces->Add(mine);
  }
};

// Threads run one after another (start, allocate, join, next), so each one
// gets the id its predecessor returned, hence its thread block, and (from
// glibc) its predecessor's thread-local storage, at the same address. Each
// leaves its last line partly used (three 48-byte nodes), in its block and,
// allocating again at exit without an id, in a shard. The next thread must
// still start on a fresh line, of the same block: no line holds nodes of
// two threads, and the block is not given up for it.
TEST(NodeArenaTest, ThreadsOneAfterAnotherGetLinesOfTheirOwn) {
  const size_t kChunk = 256 << 10;
  ArenaFixture f(kChunk);
  constexpr int kThreads = 16, kPerThread = 3;
  constexpr size_t kSize = 3 * pmem::kNodeAlign;
  AllPieces pieces;
  // Each written by one thread, read after it was joined.
  std::vector<int> ids(kThreads, -1);
  std::set<uintptr_t> tls_addrs;  // of a thread_local, per thread
  for (int t = 0; t < kThreads; t++) {
    std::thread([&, t] {
      thread_local AllocAtExit at_exit;
      at_exit.arena = f.arena.get();
      at_exit.pieces = &pieces;
      at_exit.thread = t;
      at_exit.count = kPerThread;
      at_exit.size = kSize;
      ids[t] = ThreadId::Get();  // after at_exit: returned before it dies
      std::vector<Piece> mine;
      for (int i = 0; i < kPerThread; i++) {
        ASSERT_TRUE(AllocatePiece(f.arena.get(), kSize, t, &mine));
      }
      pieces.Add(mine);
      tls_addrs.insert(reinterpret_cast<uintptr_t>(&at_exit));
    }).join();
  }
  std::printf("%d threads: thread id %d first, %zu thread_local addresses\n",
              kThreads, ids[0], tls_addrs.size());
  ASSERT_GE(ids[0], 0);
  for (int t = 1; t < kThreads; t++) {
    EXPECT_EQ(ids[0], ids[t]) << "thread " << t << " did not reuse the id";
  }
  ASSERT_EQ(static_cast<size_t>(2 * kThreads * kPerThread), pieces.all.size());
  size_t total = 0;
  ASSERT_NO_FATAL_FAILURE(CheckPieces(f, pieces.all, &total));
  // A change of thread gives up less than a line of the block (or shard
  // block) it continues; a refill gives up a tail shorter than a node and
  // less than a line to align the carve. A few refills at most here.
  EXPECT_LE(f.arena->UsedBytes(),
            total + 2 * kThreads * pmem::kCacheLine + 16 * pmem::kCacheLine);
  EXPECT_LT(f.arena->ReservedBytes(), 2 * kChunk);  // one chunk holds them
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

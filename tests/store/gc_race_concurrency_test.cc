// The version GC's upper-level unlink against a concurrent Promote,
// made deterministic by the persistence policy's race seams
// (memtable/policy_seams.h: OnBeforePromote, OnGcPredFound; the production
// policies declare none).
//
// A key has versions A (oldest) and B; a writer links a newer version N at
// level 0 and stops before its Promote. The GC collects A and B. When its
// walk has found B's predecessor x at level 1, the writer runs Promote,
// which links N between x and B (N's cached successor at level 1 is B), and
// returns. The old GC re-read x's pointer, saw N instead of B, concluded "B
// is not linked" and retired B while N still pointed to it (then freed it:
// a use-after-free, or a later unlink spinning forever). Invariant G4
// (docs/invariants.md): the walk's predecessor is only a candidate, the CAS
// validates it, and B is unlinked from every level before it is retired.
// Labelled 'concurrency' (TSAN) and run under ASAN like every test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/store.h"
#include "memtable/durable_skiplist.h"
#include "memtable/reclaim.h"
#include "memtable/version_gc.h"
#include "pmem/pool.h"
#include "tests/util/node_builder.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

// No persistence; the two race seams forward to the test's callbacks (set
// only while no other thread runs).
struct RacePersist : pmem::NoPersist {
  static inline std::function<void(const void*)> before_promote;
  static inline std::function<void(const void*, int)> gc_pred_found;
  static void OnBeforePromote(const void* node) {
    if (before_promote) before_promote(node);
  }
  static void OnGcPredFound(const void* node, int level) {
    if (gc_pred_found) gc_pred_found(node, level);
  }
};

// The race hooks are seen (else the list compiles them away).
static_assert(
    memtable::Declares<RacePersist>(memtable::Seam::kOnBeforePromote) &&
    memtable::Declares<RacePersist>(memtable::Seam::kOnGcPredFound));
using List = memtable::DurableSkipList<RacePersist>;
using Gc = memtable::VersionGc<RacePersist>;
using memtable::IndexNode;

class GcRaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        pmem::Pool::Open(test::QuietPoolOptions(tmp_.path()), &pool_).ok());
    pmem::ListRoot* root;
    ASSERT_TRUE(pool_->CreateList(pmem::kListStandalone, &root).ok());
    memtable::SkipListOptions o;
    o.chunk_size = 64 << 10;
    o.reclaim_space = true;
    list_ = std::make_unique<List>(&cmp_, pool_.get(), root, o);
    rec_ = std::make_unique<memtable::Reclaimer>(list_->visible_version_word());
    gc_ = std::make_unique<Gc>(list_.get(), rec_.get());
  }
  void TearDown() override {
    RacePersist::before_promote = nullptr;
    RacePersist::gc_pred_found = nullptr;
    gc_.reset();
    list_.reset();
  }
  // The node a Put linked: the newest version of key.
  const IndexNode* Put(const std::string& key, const std::string& value) {
    memtable::Reclaimer::Guard g(rec_.get(), false);
    pmem::NvmNode* n = nullptr;
    EXPECT_TRUE(test::BuildNode(list_.get(), key, value, 0, &n).ok());
    EXPECT_TRUE(list_->Insert(n).ok());
    const std::string pk = test::PrefixKey(key);
    return list_->Find(pk.data(), list_->VisibleVersion());
  }
  test::TempPool tmp_;
  memtable::BytewiseKeyComparator cmp_;
  std::unique_ptr<pmem::Pool> pool_;
  std::unique_ptr<List> list_;
  std::unique_ptr<memtable::Reclaimer> rec_;
  std::unique_ptr<Gc> gc_;
};

// Deterministic: the writer and the GC take turns at the two seams. Node
// heights are random, so keys are tried until B and N reach level 1 and A
// does not (an A linked at level 1 behind a B left linked would make the
// old GC spin forever instead of failing the check).
TEST_F(GcRaceTest, PromoteBeforeUnlinkedNodeKeepsItLinkedNoMore) {
  bool raced = false;
  for (int attempt = 0; attempt < 2000 && !raced; attempt++) {
    char key[16];
    std::snprintf(key, sizeof(key), "k%05d", attempt);
    const IndexNode* a = Put(key, "a");
    const IndexNode* b = Put(key, "b");
    if (a->height != 1 || b->height < 2) continue;
    std::mutex mu;
    std::condition_variable cv;
    const IndexNode* n = nullptr;  // the writer's node, linked at level 0
    bool go = false, done = false;
    RacePersist::before_promote = [&](const void* node) {
      std::unique_lock<std::mutex> l(mu);
      n = static_cast<const IndexNode*>(node);
      cv.notify_all();
      cv.wait(l, [&] { return go; });
    };
    std::thread writer([&] {
      Put(key, "n");
      std::lock_guard<std::mutex> l(mu);
      done = true;
      cv.notify_all();
    });
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return n != nullptr; });
    }
    RacePersist::before_promote = nullptr;  // the writer is past it
    auto release_writer = [&] {
      std::unique_lock<std::mutex> l(mu);
      go = true;
      cv.notify_all();
      cv.wait(l, [&] { return done; });
    };
    if (n->height < 2) {  // N must be promoted to level 1
      release_writer();
      writer.join();
      continue;
    }
    // The GC has found B's level-1 predecessor x: now N's Promote links N
    // between x and B, and the writer returns.
    bool fired = false;
    RacePersist::gc_pred_found = [&](const void* r, int level) {
      if (r != b || level != 1 || fired) return;
      fired = true;
      release_writer();
    };
    const uint64_t unlinked = gc_->RunPass();
    RacePersist::gc_pred_found = nullptr;
    writer.join();
    ASSERT_TRUE(fired) << "the GC never looked for B at level 1";
    raced = true;
    // B (and A) were unlinked and freed (no reader holds them): N, now
    // linked at every level, must not lead to B at any.
    EXPECT_GE(unlinked, 2u);
    EXPECT_GE(gc_->Stats().freed, 2u);
    for (int l = 0; l < n->height; l++) {
      ASSERT_NE(n->Next(l), b) << "level " << l << " still links B (freed)";
    }
    const std::string pk = test::PrefixKey(key);
    const IndexNode* f = list_->Find(pk.data(), list_->VisibleVersion());
    EXPECT_EQ(f, n);
    // Versions older than N are gone from the list: Find at B's version
    // finds nothing of this key.
    EXPECT_EQ(list_->Find(pk.data(), n->Version() - 1), nullptr);
  }
  ASSERT_TRUE(raced) << "no key got the node heights the race needs";
}

// The same race at full speed: writers overwrite a few keys (so every
// Promote lands next to the versions the GC unlinks) while a thread runs
// GC passes back to back; readers check every value. A few seconds by
// default; scripts/dev/gc_stress.sh runs it for longer (under TSAN), through
// FLINTKV_GC_STRESS_SECONDS. A hang (a GC spinning under the combiner
// lock) shows as writers making no progress: the test then aborts.
TEST(GcStressTest, WritersOnFewKeysGcInTightLoop) {
  const char* env = std::getenv("FLINTKV_GC_STRESS_SECONDS");
  const int seconds = env && *env ? std::atoi(env) : 2;
  constexpr int kWriters = 3, kReaders = 1, kKeys = 4;
  test::TempPool pool;
  StoreOptions o = test::QuietStoreOptions(pool.path(), 32ull << 20, 64 << 10);
  o.gc_interval_ms = 0;  // passes only from the loop below
  o.gc_nodes_per_hold = 4;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  auto key = [](int k) { return "key" + std::to_string(k); };
  auto value = [](int w, uint64_t c) {
    return "w" + std::to_string(w) + ":" + std::to_string(c) + "|" +
           std::string(8 + c % 64, 'v');
  };
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0}, passes{0}, bad{0};
  std::vector<std::thread> th;
  for (int w = 0; w < kWriters; w++) {
    th.emplace_back([&, w] {
      for (uint64_t c = 0; !stop.load(std::memory_order_relaxed); c++) {
        WriteOptions wo;
        wo.sync = c % 3 != 0;  // some weak writes: the GC drains them
        if (!store->Put(wo, key(static_cast<int>((c + w) % kKeys)), value(w, c))
                 .ok()) {
          bad.fetch_add(1);
        }
        writes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (int r = 0; r < kReaders; r++) {
    th.emplace_back([&] {
      std::string v;
      for (uint64_t c = 0; !stop.load(std::memory_order_relaxed); c++) {
        Status st = store->Get(key(static_cast<int>(c % kKeys)), &v);
        if (st.IsNotFound()) continue;
        size_t bar = v.find('|');
        if (!st.ok() || v.empty() || v[0] != 'w' || bar == std::string::npos ||
            v.size() - bar - 1 < 8) {
          bad.fetch_add(1);
        }
      }
    });
  }
  th.emplace_back([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      if (!store->GarbageCollect().ok()) bad.fetch_add(1);
      passes.fetch_add(1, std::memory_order_relaxed);
    }
  });
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  uint64_t last = 0;
  int stalled = 0;
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    uint64_t now = writes.load();
    stalled = now == last ? stalled + 1 : 0;
    last = now;
    if (stalled >= 60) {
      std::fprintf(stderr, "no write completed for 60 s: hang\n");
      std::abort();
    }
  }
  stop.store(true);
  for (auto& t : th) t.join();
  StoreStats st = store->GetStats();
  std::printf(
      "[gc-stress] %d s: %llu writes, %llu GC passes, %llu nodes "
      "unlinked, %llu freed\n",
      seconds, static_cast<unsigned long long>(writes.load()),
      static_cast<unsigned long long>(passes.load()),
      static_cast<unsigned long long>(st.gc_unlinked),
      static_cast<unsigned long long>(st.gc_freed));
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(st.gc_freed, 0u);
  for (int k = 0; k < kKeys; k++) {
    std::string v;
    EXPECT_TRUE(store->Get(key(k), &v).ok()) << key(k);
  }
}

}  // namespace
}  // namespace flintkv

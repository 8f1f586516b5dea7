// Version GC of the standalone store, deterministic:
// passes run only from Store::GarbageCollect() (no background thread), so
// every count below is exact. What is collected (older versions, deleted
// keys), what is kept (latest values, snapshot and iterator versions),
// memory pinned by an iterator, free space rebuilt by recovery, and the
// overwrite-forever workload in a pool of a few copies (quick variant; the
// 10 million write run is gc_overwrite_slow_test).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "flintkv/store.h"
#include "tests/store/gc_overwrite.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

class GcTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    StoreOptions o = test::QuietStoreOptions(pool_.path(), 64ull << 20);
    o.gc_interval_ms = 0;  // passes only when the test asks
    ASSERT_TRUE(Store::Open(o, &store_).ok());
  }
  void Reopen() {
    store_.reset();
    Open();
  }
  std::string Get(const std::string& k, const Snapshot* s = nullptr) {
    std::string v;
    Status st = store_->Get(ReadOptions{s}, k, &v);
    return st.ok() ? v : st.IsNotFound() ? "<none>" : st.ToString();
  }
  void Gc() { ASSERT_TRUE(store_->GarbageCollect().ok()); }
  uint64_t Nodes() { return store_->GetStats().nodes; }

  test::TempPool pool_;
  std::unique_ptr<Store> store_;
};

TEST_F(GcTest, OlderVersionsAreCollectedLatestKept) {
  for (int i = 0; i < 5; i++) {
    ASSERT_TRUE(store_->Put("a", "a" + std::to_string(i)).ok());
    ASSERT_TRUE(store_->Put("b", "b" + std::to_string(i)).ok());
  }
  EXPECT_EQ(Nodes(), 10u);
  Gc();
  EXPECT_EQ(Nodes(), 2u);
  EXPECT_EQ(Get("a"), "a4");
  EXPECT_EQ(Get("b"), "b4");
  StoreStats st = store_->GetStats();
  EXPECT_EQ(st.gc_unlinked, 8u);
  EXPECT_EQ(st.gc_freed, 8u);  // no reader held them
  EXPECT_GT(st.pmem_bytes_free, 0u);
  Reopen();  // the unlinks are durable
  EXPECT_EQ(store_->GetStats().recovered_nodes, 2u);
  EXPECT_EQ(Get("a"), "a4");
}

TEST_F(GcTest, DeletedKeysVanishCompletely) {
  ASSERT_TRUE(store_->Put("a", "1").ok());
  ASSERT_TRUE(store_->Put("a", "2").ok());
  ASSERT_TRUE(store_->Delete("a").ok());
  ASSERT_TRUE(store_->Delete("never-written").ok());
  ASSERT_TRUE(store_->Put("b", "x").ok());
  Gc();
  EXPECT_EQ(Nodes(), 1u);  // only b
  EXPECT_EQ(Get("a"), "<none>");
  auto it = store_->NewIterator();
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "b");
  it.reset();
  Reopen();
  EXPECT_EQ(store_->GetStats().recovered_nodes, 1u);
  EXPECT_EQ(Get("a"), "<none>");
}

// V1 (memtable/version_gc.h): a tombstone carrying the newest version is
// kept, so a reopen resumes versions above every version handed out; a
// later pass takes it once a newer write exists. Before, the pass took the
// last delete and the reopened store reused its version (and the smoke
// test's version check failed whenever the background GC ran first).
TEST_F(GcTest, NewestTombstoneKeptVersionsIncreaseAcrossReopen) {
  ASSERT_TRUE(store_->Put("a", "1").ok());
  ASSERT_TRUE(store_->Put("b", "2").ok());
  ASSERT_TRUE(store_->Delete("b").ok());
  ASSERT_EQ(store_->GetStats().visible_version, 3u);
  Gc();
  EXPECT_EQ(Nodes(), 2u);  // a and b's tombstone (b@2 collected)
  EXPECT_EQ(Get("b"), "<none>");
  Reopen();
  EXPECT_EQ(store_->GetStats().visible_version, 3u);
  ASSERT_TRUE(store_->Put("c", "3").ok());
  EXPECT_EQ(store_->GetStats().visible_version, 4u);
  Gc();
  EXPECT_EQ(Nodes(), 2u);  // a and c: the tombstone is no longer newest
  Reopen();
  EXPECT_EQ(store_->GetStats().visible_version, 4u);
  EXPECT_EQ(Get("b"), "<none>");
}

TEST_F(GcTest, SnapshotKeepsWhatItSees) {
  ASSERT_TRUE(store_->Put("a", "old").ok());
  ASSERT_TRUE(store_->Put("d", "doomed").ok());
  auto snap = store_->GetSnapshot();
  ASSERT_TRUE(store_->Put("a", "mid").ok());
  ASSERT_TRUE(store_->Put("a", "new").ok());
  ASSERT_TRUE(store_->Delete("d").ok());
  Gc();
  // Versions above the oldest snapshot stay (also "mid", which no reader
  // can see: the horizon is the oldest snapshot, docs/gc.md).
  EXPECT_EQ(Nodes(), 5u);
  EXPECT_EQ(Get("a", snap.get()), "old");
  EXPECT_EQ(Get("d", snap.get()), "doomed");
  EXPECT_EQ(Get("a"), "new");
  EXPECT_EQ(Get("d"), "<none>");
  snap.reset();
  Gc();
  EXPECT_EQ(Nodes(), 2u);  // a, and d's tombstone: the newest version (V1)
  EXPECT_EQ(Get("a"), "new");
  EXPECT_EQ(Get("d"), "<none>");
}

TEST_F(GcTest, IteratorKeepsItsVersionsAndPinsMemory) {
  ASSERT_TRUE(store_->Put("a", "1").ok());
  ASSERT_TRUE(store_->Put("a", "2").ok());  // "1" is garbage already
  ASSERT_TRUE(store_->Put("b", "1").ok());
  auto it = store_->NewIterator();
  ASSERT_TRUE(store_->Put("b", "2").ok());  // newer than the iterator
  Gc();
  StoreStats st = store_->GetStats();
  EXPECT_EQ(st.gc_unlinked, 1u);  // a=1; b=1 is the iterator's
  EXPECT_EQ(st.gc_freed, 0u);     // unlinked after the iterator began
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "a");
  EXPECT_EQ(it->value(), "2");
  it->Next();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "1");
  it.reset();
  Gc();
  st = store_->GetStats();
  EXPECT_EQ(st.gc_unlinked, 2u);
  EXPECT_EQ(st.gc_freed, 2u);
  EXPECT_EQ(Get("b"), "2");
}

TEST_F(GcTest, BatchesAndReopenReuseSpaceWithoutNewChunks) {
  for (int round = 0; round < 30; round++) {
    WriteBatch b;
    for (int k = 0; k < 200; k++) {
      b.Put("k" + std::to_string(k), std::string(300, 'a' + round % 26));
    }
    ASSERT_TRUE(store_->Write(b).ok());
    Gc();
  }
  uint64_t reserved = store_->GetStats().pmem_bytes_reserved;
  Reopen();
  StoreStats st = store_->GetStats();
  EXPECT_EQ(st.recovered_nodes, 200u);
  // Recovery found the free bytes of the existing chunks (P14) ...
  EXPECT_EQ(st.pmem_bytes_reserved, reserved);
  EXPECT_GT(st.pmem_bytes_free, 0u);
  for (int round = 0; round < 30; round++) {
    for (int k = 0; k < 200; k++) {
      ASSERT_TRUE(
          store_->Put("k" + std::to_string(k), std::string(300, 'z')).ok());
    }
    Gc();
  }
  // ... so overwriting after the reopen took no new chunk.
  EXPECT_EQ(store_->GetStats().pmem_bytes_reserved, reserved);
  EXPECT_EQ(Get("k7"), std::string(300, 'z'));
}

TEST(GcOffTest, GarbageCollectRefusedAndVersionsKept) {
  test::TempPool pool;
  StoreOptions o = test::QuietStoreOptions(pool.path());
  o.gc = false;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  ASSERT_TRUE(store->Put("a", "1").ok());
  ASSERT_TRUE(store->Put("a", "2").ok());
  EXPECT_TRUE(store->GarbageCollect().IsInvalidArgument());
  EXPECT_EQ(store->GetStats().nodes, 2u);
}

// Quick variant of the overwrite-forever test, also run under ASAN (the
// full 10 million writes: gc_overwrite_slow_test, Release only). The background
// thread and full-pool passes do the collecting.
TEST(GcOverwriteTest, FixedKeySetStaysInFixedPool) {
  test::TempPool pool;
  const uint64_t total = test::Scaled(500000, 8, 2);
  test::OverwriteResult r = test::RunOverwrite(
      test::OverwriteOptions(pool.path(), true), 10000, total);
  test::Print("gc on", r);
  EXPECT_TRUE(r.first_error.ok()) << r.first_error.ToString();
  EXPECT_EQ(r.writes, total);
  EXPECT_LE(r.final_stats.nodes, 5u * 10000);
  EXPECT_LE(r.final_stats.dram_index_bytes, 4u << 20);  // index reused too
}

// The control: the same workload without GC fills the pool in a few rounds.
TEST(GcOverwriteTest, WithoutGcThePoolFills) {
  test::TempPool pool;
  test::OverwriteResult r = test::RunOverwrite(
      test::OverwriteOptions(pool.path(), false), 10000, 1000000);
  test::Print("gc off", r);
  EXPECT_TRUE(r.first_error.IsNoSpace()) << r.first_error.ToString();
  EXPECT_LT(r.writes, 10u * 10000);  // fewer than 10 copies fit
}

}  // namespace
}  // namespace flintkv

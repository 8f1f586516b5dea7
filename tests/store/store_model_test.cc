// Model-based tests of flintkv::Store against std::map (error handling is in
// store_error_test.cc).
//
// The randomized test runs Put / Delete / Write (with duplicate keys inside a
// batch: last wins) / Get / snapshots / iterators (full scans both ways,
// Seek, SeekForPrev, SeekToLast, direction changes from the middle) and
// close-and-reopen, and checks every read against the model. Snapshots keep
// a copy of the model taken when they were created.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "flintkv/store.h"
#include "tests/store/store_model_check.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

using test::CheckGets;
using test::CheckScans;
using test::CheckSeeks;
using test::ExpectIterAt;
using test::Model;
using test::Printable;

// ---------------------------------------------------------------------------
// Key and value generators

std::vector<std::string> MakeKeyPool(std::mt19937_64* rng) {
  std::vector<std::string> keys = {
      std::string(),
      std::string(1, '\0'),
      std::string(2, '\0'),
      std::string(1, '\xff'),
      std::string("\xff\xff\xff", 3),
      "a",
      "ab",
      std::string("ab\0", 3),
      "abc",
      "b",
      std::string(127, 'k'),  // longest one-byte-prefix key
      std::string(128, 'k'),  // first two-byte varint prefix
      std::string(129, 'k'),
      std::string(300, 'k'),
      std::string(127, 'k') + "\x01",
  };
  for (int i = 0; i < 60; i++)
    keys.push_back(test::RandomBytes(rng, 1 + (*rng)() % 12, true));
  for (int i = 0; i < 30; i++)
    keys.push_back(test::RandomBytes(rng, (*rng)() % 20, false));
  for (int i = 0; i < 20; i++) {
    // Long keys sharing a long prefix, differing near the end.
    std::string k(128 + (*rng)() % 200, 'L');
    k += test::RandomBytes(rng, 1 + (*rng)() % 4, false);
    keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

std::string RandomValue(std::mt19937_64* rng, size_t big_value) {
  uint64_t r = (*rng)() % 1000;
  size_t n;
  if (r < 30) {
    n = 0;
  } else if (r < 900) {
    n = 1 + (*rng)() % 64;
  } else if (r < 995) {
    n = 100 + (*rng)() % 400;
  } else {
    n = big_value;  // bigger than a quarter chunk: a chunk of its own
  }
  return test::RandomBytes(rng, n, false);
}

// ---------------------------------------------------------------------------
// Randomized model test

struct ModelTestParam {
  uint64_t seed;
  uint64_t chunk_size;
};

class StoreModelTest : public ::testing::TestWithParam<ModelTestParam> {};

TEST_P(StoreModelTest, RandomOpsMatchModel) {
  const ModelTestParam p = GetParam();
  std::mt19937_64 rng(p.seed);
  test::TempPool pool;
  StoreOptions options =
      test::QuietStoreOptions(pool.path(), 128ull << 20, p.chunk_size);
  // Version GC passes at chosen points only (deterministic): every read
  // below, latest and snapshot, checks that GC removed nothing visible.
  options.gc_interval_ms = 0;
  std::mt19937_64 gc_rng(p.seed ^ 0x6c);
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(options, &store).ok());

  const std::vector<std::string> keys = MakeKeyPool(&rng);
  std::vector<std::string> targets = keys;  // seek targets incl. absent keys
  for (int i = 0; i < 40; i++) {
    targets.push_back(
        test::RandomBytes(&rng, (rng() % 3) ? 1 + rng() % 10 : 0, rng() % 2));
  }
  std::vector<std::string> get_keys = keys;
  get_keys.push_back("absent-key");
  get_keys.push_back(std::string(200, '\x7f'));

  struct Snap {
    std::unique_ptr<Snapshot> snap;
    Model model;
    uint64_t op;
  };
  std::vector<Snap> snaps;
  Model model;
  uint64_t expected_version = 0;
  int reopens = 0;
  const int kOps = test::LongMode() ? 20000 : test::Scaled(3000, 3, 2);
  const size_t big_value = p.chunk_size / 4 + 1 + rng() % 1000;

  auto pick_key = [&]() -> std::string {
    if (rng() % 20 == 0)
      return test::RandomBytes(&rng, rng() % 8, false);  // fresh
    return keys[rng() % keys.size()];
  };

  for (int op = 0; op < kOps; op++) {
    std::string where =
        "seed " + std::to_string(p.seed) + " op " + std::to_string(op);
    if (gc_rng() % 40 == 0) {
      ASSERT_TRUE(store->GarbageCollect().ok()) << where;
    }
    uint64_t r = rng() % 1000;
    if (r < 350) {
      std::string k = pick_key(), v = RandomValue(&rng, big_value);
      ASSERT_TRUE(store->Put(k, v).ok()) << where;
      model[k] = v;
      expected_version++;
    } else if (r < 500) {
      std::string k = pick_key();
      ASSERT_TRUE(store->Delete(k).ok()) << where;
      model.erase(k);
      expected_version++;
    } else if (r < 650) {
      WriteBatch b;
      Model after = model;
      int n = static_cast<int>(rng() % 10);
      std::vector<std::string> batch_keys;
      for (int i = 0; i < n; i++) {
        // Reuse a key of this batch a third of the time: last op wins.
        std::string k = (!batch_keys.empty() && rng() % 3 == 0)
                            ? batch_keys[rng() % batch_keys.size()]
                            : pick_key();
        batch_keys.push_back(k);
        if (rng() % 4 == 0) {
          b.Delete(k);
          after.erase(k);
        } else {
          std::string v = RandomValue(&rng, big_value);
          b.Put(k, v);
          after[k] = v;
        }
      }
      ASSERT_TRUE(store->Write(b).ok()) << where;
      model.swap(after);
      if (n > 0) expected_version++;
    } else if (r < 700) {
      CheckGets(store.get(), nullptr, model, get_keys, where + " latest");
    } else if (r < 760) {
      if (snaps.size() < 6) {
        snaps.push_back(
            {store->GetSnapshot(), model, static_cast<uint64_t>(op)});
      }
    } else if (r < 800) {
      if (!snaps.empty()) snaps.erase(snaps.begin() + rng() % snaps.size());
    } else if (r < 900) {
      CheckSeeks(store.get(), nullptr, model, targets, &rng, where + " latest");
    } else if (r < 985) {
      if (!snaps.empty()) {
        Snap& s = snaps[rng() % snaps.size()];
        std::string w = where + " snapshot@op" + std::to_string(s.op);
        CheckGets(store.get(), s.snap.get(), s.model, get_keys, w);
        CheckSeeks(store.get(), s.snap.get(), s.model, targets, &rng, w);
      } else {
        CheckScans(store.get(), nullptr, model, where + " latest");
      }
    } else if (r < 995) {
      if (!snaps.empty()) {
        Snap& s = snaps[rng() % snaps.size()];
        CheckScans(store.get(), s.snap.get(), s.model,
                   where + " snapshot@op" + std::to_string(s.op));
      }
    } else {
      // Close and reopen: recovery must reproduce the model exactly.
      StoreStats before = store->GetStats();
      EXPECT_EQ(before.visible_version, expected_version) << where;
      snaps.clear();
      ASSERT_TRUE(store->Close().ok());
      store.reset();
      Status s = Store::Open(options, &store);
      ASSERT_TRUE(s.ok()) << where << " reopen: " << s.ToString();
      reopens++;
      StoreStats after = store->GetStats();
      EXPECT_EQ(after.visible_version, before.visible_version) << where;
      EXPECT_EQ(after.recovered_nodes, before.nodes) << where;
      EXPECT_EQ(after.dropped_uncommitted, 0u) << where;
      EXPECT_EQ(after.rolled_back_batch, 0u) << where;
      CheckScans(store.get(), nullptr, model, where + " after reopen");
      CheckGets(store.get(), nullptr, model, get_keys, where + " after reopen");
    }
    if (HasFatalFailure()) return;
    ASSERT_EQ(store->GetStats().visible_version, expected_version) << where;
  }
  // Final: every snapshot still sees its own past, and the latest state
  // survives one more reopen.
  for (Snap& s : snaps) {
    CheckScans(store.get(), s.snap.get(), s.model,
               "final snapshot@op" + std::to_string(s.op));
  }
  CheckScans(store.get(), nullptr, model, "final");
  snaps.clear();
  // No snapshot, iterator or read left: a pass leaves exactly the newest
  // version of every live key (no older version, no tombstone). A final
  // Put makes the newest version a live one: a tombstone carrying the
  // newest version is kept (V1, memtable/version_gc.h).
  ASSERT_TRUE(store->Put("\xff final", "v").ok());
  model["\xff final"] = "v";
  ASSERT_TRUE(store->GarbageCollect().ok());
  EXPECT_EQ(store->GetStats().nodes, model.size());
  CheckScans(store.get(), nullptr, model, "final after GC");
  store.reset();
  ASSERT_TRUE(Store::Open(options, &store).ok());
  EXPECT_EQ(store->GetStats().recovered_nodes, model.size());
  CheckScans(store.get(), nullptr, model, "final reopen");
  CheckGets(store.get(), nullptr, model, get_keys, "final reopen");
  RecordProperty("reopens", reopens);
}

INSTANTIATE_TEST_SUITE_P(
    Seeds, StoreModelTest,
    ::testing::Values(ModelTestParam{1, 256 << 10},
                      ModelTestParam{2, 256 << 10}, ModelTestParam{3, 64 << 10},
                      ModelTestParam{42, 4 << 10},
                      ModelTestParam{0xf11e7, 1 << 20}),
    [](const ::testing::TestParamInfo<ModelTestParam>& info) {
      return "seed" + std::to_string(info.param.seed) + "_chunk" +
             std::to_string(info.param.chunk_size >> 10) + "k";
    });

// ---------------------------------------------------------------------------
// Deterministic basics

class StoreBasicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = test::QuietStoreOptions(pool_.path());
    ASSERT_TRUE(Store::Open(options_, &store_).ok());
  }
  void Reopen() {
    store_.reset();
    Status s = Store::Open(options_, &store_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  test::TempPool pool_;
  StoreOptions options_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreBasicTest, EmptyStore) {
  std::string v;
  EXPECT_TRUE(store_->Get("", &v).IsNotFound());
  EXPECT_TRUE(store_->Get("x", &v).IsNotFound());
  std::unique_ptr<Iterator> it = store_->NewIterator();
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  it->SeekToLast();
  EXPECT_FALSE(it->Valid());
  it->Seek("");
  EXPECT_FALSE(it->Valid());
  it->SeekForPrev("\xff");
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(store_->Write(WriteBatch()).ok());
  EXPECT_EQ(store_->GetStats().visible_version, 0u);
  Reopen();
  it = store_->NewIterator();
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
}

TEST_F(StoreBasicTest, EmptyKeyAndEmptyValue) {
  ASSERT_TRUE(store_->Put("", "empty-key").ok());
  ASSERT_TRUE(store_->Put("k", "").ok());
  std::string v = "junk";
  ASSERT_TRUE(store_->Get("", &v).ok());
  EXPECT_EQ(v, "empty-key");
  ASSERT_TRUE(store_->Get("k", &v).ok());
  EXPECT_EQ(v, "");
  std::unique_ptr<Iterator> it = store_->NewIterator();
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "");
  it->SeekForPrev("");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "");
  it->Prev();
  EXPECT_FALSE(it->Valid());
  ASSERT_TRUE(store_->Delete("").ok());
  EXPECT_TRUE(store_->Get("", &v).IsNotFound());
  Reopen();
  EXPECT_TRUE(store_->Get("", &v).IsNotFound());
  ASSERT_TRUE(store_->Get("k", &v).ok());
  EXPECT_EQ(v, "");
}

TEST_F(StoreBasicTest, BatchLastOpWins) {
  WriteBatch b;
  b.Put("a", "1");
  b.Put("a", "2");
  b.Put("b", "1");
  b.Delete("b");
  b.Delete("c");
  b.Put("c", "3");
  b.Put("a", "final");
  ASSERT_TRUE(store_->Write(b).ok());
  EXPECT_EQ(store_->GetStats().visible_version, 1u);  // one batch, one version
  auto check = [&] {
    std::string v;
    ASSERT_TRUE(store_->Get("a", &v).ok());
    EXPECT_EQ(v, "final");
    EXPECT_TRUE(store_->Get("b", &v).IsNotFound());
    ASSERT_TRUE(store_->Get("c", &v).ok());
    EXPECT_EQ(v, "3");
    std::unique_ptr<Iterator> it = store_->NewIterator();
    std::vector<std::string> seen;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      seen.emplace_back(it->key());
    }
    EXPECT_EQ(seen, (std::vector<std::string>{"a", "c"}));
  };
  check();
  Reopen();
  check();
}

TEST_F(StoreBasicTest, SnapshotSeesThePast) {
  ASSERT_TRUE(store_->Put("a", "a1").ok());
  ASSERT_TRUE(store_->Put("b", "b1").ok());
  std::unique_ptr<Snapshot> s1 = store_->GetSnapshot();
  ASSERT_TRUE(store_->Put("a", "a2").ok());
  ASSERT_TRUE(store_->Delete("b").ok());
  ASSERT_TRUE(store_->Put("c", "c2").ok());
  std::unique_ptr<Iterator> old_it = store_->NewIterator(ReadOptions{s1.get()});
  std::unique_ptr<Iterator> implicit = store_->NewIterator();  // snapshot now
  WriteBatch wb;
  wb.Put("a", "a3");
  wb.Put("d", "d3");
  ASSERT_TRUE(store_->Write(wb).ok());

  std::string v;
  ASSERT_TRUE(store_->Get(ReadOptions{s1.get()}, "a", &v).ok());
  EXPECT_EQ(v, "a1");
  ASSERT_TRUE(store_->Get(ReadOptions{s1.get()}, "b", &v).ok());
  EXPECT_EQ(v, "b1");
  EXPECT_TRUE(store_->Get(ReadOptions{s1.get()}, "c", &v).IsNotFound());
  ASSERT_TRUE(store_->Get("a", &v).ok());
  EXPECT_EQ(v, "a3");

  Model m1 = {{"a", "a1"}, {"b", "b1"}};
  CheckScans(store_.get(), s1.get(), m1, "s1");
  // The iterator created before the batch without a snapshot is pinned too.
  Model m2 = {{"a", "a2"}, {"c", "c2"}};
  implicit->SeekToFirst();
  ExpectIterAt(implicit.get(), m2, m2.begin(), "implicit");
  implicit->Next();
  ExpectIterAt(implicit.get(), m2, std::next(m2.begin()), "implicit");
  implicit->Next();
  EXPECT_FALSE(implicit->Valid());
  old_it->SeekToLast();
  ASSERT_TRUE(old_it->Valid());
  EXPECT_EQ(old_it->key(), "b");
  EXPECT_EQ(old_it->value(), "b1");
}

TEST_F(StoreBasicTest, PrevFromMiddleAcrossVersionsAndTombstones) {
  // Many versions of each key, some keys deleted: Prev must skip both.
  Model m;
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < 50; i++) {
      std::string k = "key" + std::to_string(1000 + i);
      if ((i + round) % 7 == 0) {
        ASSERT_TRUE(store_->Delete(k).ok());
        m.erase(k);
      } else {
        std::string v = "v" + std::to_string(round);
        ASSERT_TRUE(store_->Put(k, v).ok());
        m[k] = v;
      }
    }
  }
  std::unique_ptr<Iterator> it = store_->NewIterator();
  it->Seek("key1025");
  auto mit = m.lower_bound("key1025");
  for (int i = 0; i < 60; i++) {
    ExpectIterAt(it.get(), m, mit, "prev step " + std::to_string(i));
    if (mit == m.end()) break;
    it->Prev();
    mit = mit == m.begin() ? m.end() : std::prev(mit);
  }
  CheckScans(store_.get(), nullptr, m, "versions");
}

TEST_F(StoreBasicTest, ManyChunksAndReopens) {
  // Small chunks: many arena refills, and every reopen starts new arenas.
  store_.reset();
  options_.pool.chunk_size = 4096;
  ASSERT_TRUE(Store::Open(options_, &store_).ok());
  Model m;
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < 500; i++) {
      std::string k = "k" + std::to_string((i * 7919 + r) % 700);
      std::string v(static_cast<size_t>(i % 300), static_cast<char>('a' + r));
      ASSERT_TRUE(store_->Put(k, v).ok());
      m[k] = v;
    }
    Reopen();
    CheckScans(store_.get(), nullptr, m, "round " + std::to_string(r));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace flintkv

// Model-based tests of flintkv::Store against std::map, plus error handling
// (sizes, full pool, bad pool files, double open).
//
// The randomized test runs Put / Delete / Write (with duplicate keys inside a
// batch: last wins) / Get / snapshots / iterators (full scans both ways,
// Seek, SeekForPrev, SeekToLast, direction changes from the middle) and
// close-and-reopen, and checks every read against the model. Snapshots keep
// a copy of the model taken when they were created.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "flintkv/store.h"
#include "tests/test_util.h"

namespace flintkv {
namespace {

using Model = std::map<std::string, std::string>;
using test::Printable;

// ---------------------------------------------------------------------------
// Model checking helpers

void ExpectIterAt(Iterator* it, const Model& m, Model::const_iterator mit,
                  const std::string& where) {
  if (mit == m.end()) {
    EXPECT_FALSE(it->Valid())
        << where << ": expected end, got key " << Printable(it->key());
    return;
  }
  ASSERT_TRUE(it->Valid()) << where << ": expected key "
                           << Printable(mit->first) << ", got end";
  EXPECT_EQ(it->key(), mit->first) << where;
  EXPECT_EQ(it->value(), mit->second)
      << where << " key " << Printable(mit->first);
}

// Full forward and backward scans must reproduce the model exactly.
void CheckScans(Store* store, const Snapshot* snap, const Model& m,
                const std::string& where) {
  std::unique_ptr<Iterator> it = store->NewIterator(snap);
  it->SeekToFirst();
  for (auto mit = m.begin(); mit != m.end(); ++mit) {
    ASSERT_TRUE(it->Valid())
        << where << " forward: missing key " << Printable(mit->first);
    ASSERT_EQ(it->key(), mit->first) << where << " forward";
    ASSERT_EQ(it->value(), mit->second) << where << " forward";
    it->Next();
  }
  ASSERT_FALSE(it->Valid())
      << where << " forward: extra key " << Printable(it->key());
  it->SeekToLast();
  for (auto mit = m.rbegin(); mit != m.rend(); ++mit) {
    ASSERT_TRUE(it->Valid())
        << where << " backward: missing key " << Printable(mit->first);
    ASSERT_EQ(it->key(), mit->first) << where << " backward";
    ASSERT_EQ(it->value(), mit->second) << where << " backward";
    it->Prev();
  }
  ASSERT_FALSE(it->Valid())
      << where << " backward: extra key " << Printable(it->key());
}

// Random seeks followed by random walks in both directions.
void CheckSeeks(Store* store, const Snapshot* snap, const Model& m,
                const std::vector<std::string>& targets, std::mt19937_64* rng,
                const std::string& where) {
  std::unique_ptr<Iterator> it = store->NewIterator(snap);
  for (int round = 0; round < 8; round++) {
    const std::string& t = targets[(*rng)() % targets.size()];
    Model::const_iterator mit;
    std::string what;
    switch ((*rng)() % 4) {
      case 0:
        it->Seek(t);
        mit = m.lower_bound(t);
        what = "Seek(" + Printable(t) + ")";
        break;
      case 1:
        it->SeekForPrev(t);
        mit = m.upper_bound(t);
        mit = mit == m.begin() ? m.end() : std::prev(mit);
        what = "SeekForPrev(" + Printable(t) + ")";
        break;
      case 2:
        it->SeekToLast();
        mit = m.empty() ? m.end() : std::prev(m.end());
        what = "SeekToLast";
        break;
      default:
        it->SeekToFirst();
        mit = m.begin();
        what = "SeekToFirst";
        break;
    }
    ExpectIterAt(it.get(), m, mit, where + " " + what);
    if (::testing::Test::HasFatalFailure()) return;
    // Walk: change direction at random, from wherever we are.
    for (int step = 0; step < 12 && mit != m.end(); step++) {
      if ((*rng)() % 2) {
        it->Next();
        ++mit;
        what += " Next";
      } else {
        it->Prev();
        mit = mit == m.begin() ? m.end() : std::prev(mit);
        what += " Prev";
      }
      ExpectIterAt(it.get(), m, mit, where + " " + what);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

void CheckGets(Store* store, const Snapshot* snap, const Model& m,
               const std::vector<std::string>& keys, const std::string& where) {
  std::string v;
  for (const std::string& k : keys) {
    Status s = store->Get(k, &v, snap);
    auto mit = m.find(k);
    if (mit == m.end()) {
      EXPECT_TRUE(s.IsNotFound())
          << where << " Get(" << Printable(k) << "): " << s.ToString()
          << " value " << Printable(v);
    } else {
      ASSERT_TRUE(s.ok()) << where << " Get(" << Printable(k)
                          << "): " << s.ToString();
      EXPECT_EQ(v, mit->second) << where << " Get(" << Printable(k) << ")";
    }
  }
}

// ---------------------------------------------------------------------------
// Key and value generators

std::string RandomBytes(std::mt19937_64* rng, size_t n, bool printable) {
  std::string s(n, '\0');
  for (char& c : s) {
    c = printable ? static_cast<char>('a' + (*rng)() % 26)
                  : static_cast<char>((*rng)() & 0xff);
  }
  return s;
}

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
    keys.push_back(RandomBytes(rng, 1 + (*rng)() % 12, true));
  for (int i = 0; i < 30; i++)
    keys.push_back(RandomBytes(rng, (*rng)() % 20, false));
  for (int i = 0; i < 20; i++) {
    // Long keys sharing a long prefix, differing near the end.
    std::string k(128 + (*rng)() % 200, 'L');
    k += RandomBytes(rng, 1 + (*rng)() % 4, false);
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
  return RandomBytes(rng, n, false);
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
        RandomBytes(&rng, (rng() % 3) ? 1 + rng() % 10 : 0, rng() % 2));
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
    if (rng() % 20 == 0) return RandomBytes(&rng, rng() % 8, false);  // fresh
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
  std::unique_ptr<Iterator> old_it = store_->NewIterator(s1.get());
  std::unique_ptr<Iterator> implicit = store_->NewIterator();  // snapshot now
  WriteBatch wb;
  wb.Put("a", "a3");
  wb.Put("d", "d3");
  ASSERT_TRUE(store_->Write(wb).ok());

  std::string v;
  ASSERT_TRUE(store_->Get("a", &v, s1.get()).ok());
  EXPECT_EQ(v, "a1");
  ASSERT_TRUE(store_->Get("b", &v, s1.get()).ok());
  EXPECT_EQ(v, "b1");
  EXPECT_TRUE(store_->Get("c", &v, s1.get()).IsNotFound());
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

// ---------------------------------------------------------------------------
// Error handling

TEST(StoreErrorTest, OversizedKeyOrValueWritesNothing) {
  test::TempPool pool;
  StoreOptions o = test::QuietStoreOptions(pool.path());
  o.max_key_size = 100;
  o.max_value_size = 1000;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  const std::string big_key(101, 'k'), max_key(100, 'k');
  const std::string big_val(1001, 'v'), max_val(1000, 'v');

  EXPECT_TRUE(store->Put(big_key, "v").IsInvalidArgument());
  EXPECT_TRUE(store->Put("k", big_val).IsInvalidArgument());
  EXPECT_TRUE(store->Delete(big_key).IsInvalidArgument());
  WriteBatch b;
  b.Put("ok1", "v");
  b.Put("bad", big_val);
  b.Put("ok2", "v");
  EXPECT_TRUE(store->Write(b).IsInvalidArgument());
  WriteBatch b2;
  b2.Put("ok3", "v");
  b2.Delete(big_key);
  EXPECT_TRUE(store->Write(b2).IsInvalidArgument());

  StoreStats st = store->GetStats();
  EXPECT_EQ(st.visible_version, 0u);
  EXPECT_EQ(st.nodes, 0u);
  std::string v;
  for (const char* k : {"k", "ok1", "bad", "ok2", "ok3"}) {
    EXPECT_TRUE(store->Get(k, &v).IsNotFound()) << k;
  }
  EXPECT_TRUE(store->Get(big_key, &v).IsNotFound());
  std::unique_ptr<Iterator> it = store->NewIterator();
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());

  // Exactly at the limits is fine.
  ASSERT_TRUE(store->Put(max_key, max_val).ok());
  ASSERT_TRUE(store->Get(max_key, &v).ok());
  EXPECT_EQ(v, max_val);
  store.reset();
  ASSERT_TRUE(Store::Open(o, &store).ok());
  ASSERT_TRUE(store->Get(max_key, &v).ok());
  EXPECT_EQ(v, max_val);
  EXPECT_EQ(store->GetStats().recovered_nodes, 1u);

  StoreOptions absurd = o;
  absurd.max_value_size = size_t{2} << 30;
  std::unique_ptr<Store> s2;
  store.reset();
  EXPECT_TRUE(Store::Open(absurd, &s2).IsInvalidArgument());
}

TEST(StoreErrorTest, PoolFullReturnsNoSpaceAndStaysReadable) {
  test::TempPool pool;
  // A small pool (libpmemobj's minimum is 8 MiB), small chunks.
  StoreOptions o = test::QuietStoreOptions(pool.path(), 16ull << 20, 64 << 10);
  std::unique_ptr<Store> store;
  Status s = Store::Open(o, &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Model m;
  const std::string value(1000, 'x');
  Status last;
  int i = 0;
  for (; i < 100000; i++) {
    std::string k = "key" + std::to_string(i);
    if (i % 10 == 9) {
      WriteBatch b;
      for (int j = 0; j < 5; j++) b.Put(k + "/" + std::to_string(j), value);
      last = store->Write(b);
      if (!last.ok()) break;
      for (int j = 0; j < 5; j++) m[k + "/" + std::to_string(j)] = value;
    } else {
      last = store->Put(k, value);
      if (!last.ok()) break;
      m[k] = value;
    }
  }
  ASSERT_TRUE(last.IsNoSpace()) << "after " << i << " ops: " << last.ToString();
  EXPECT_NE(last.message().find(pool.path()), std::string::npos)
      << last.ToString();
  EXPECT_GT(m.size(), 1000u);
  // Everything acknowledged is still there; nothing of a failed op is.
  CheckScans(store.get(), nullptr, m, "full");
  // More writes of all sizes: each fails cleanly with NoSpace or succeeds
  // (a thread's arena may still hold a small node); a failed batch leaves
  // nothing behind.
  int nospace = 0;
  for (int j = 0; j < 50; j++) {
    WriteBatch b;
    Model after = m;
    for (int k = 0; k < j % 7 + 1; k++) {
      std::string key = "more" + std::to_string(j) + "/" + std::to_string(k);
      std::string v(static_cast<size_t>((j * 7919 + k * 31) % 3000), 'm');
      b.Put(key, v);
      after[key] = v;
    }
    Status w = store->Write(b);
    ASSERT_TRUE(w.ok() || w.IsNoSpace()) << w.ToString();
    if (w.ok()) m.swap(after);
    nospace += w.IsNoSpace();
  }
  EXPECT_GT(nospace, 0);
  Status big = store->Put("huge", std::string(4 << 20, 'y'));
  EXPECT_TRUE(big.IsNoSpace()) << big.ToString();
  CheckScans(store.get(), nullptr, m, "full after more");
  store.reset();
  s = Store::Open(o, &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  CheckScans(store.get(), nullptr, m, "full after reopen");
  Status w = store->Put("after-reopen", "v");
  EXPECT_TRUE(w.ok() || w.IsNoSpace()) << w.ToString();
  if (w.ok()) m["after-reopen"] = "v";
  CheckScans(store.get(), nullptr, m, "full after reopen and put");
}

TEST(StoreErrorTest, MissingPoolWithoutCreate) {
  test::TempPool pool;
  StoreOptions o = test::QuietStoreOptions(pool.path());
  o.pool.create_if_missing = false;
  std::unique_ptr<Store> store;
  Status s = Store::Open(o, &store);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(store, nullptr);
  EXPECT_NE(s.message().find(pool.path()), std::string::npos) << s.ToString();
  EXPECT_NE(access(pool.path().c_str(), F_OK), 0) << "file was created";

  // error_if_exists on an existing pool.
  o.pool.create_if_missing = true;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  store.reset();
  o.pool.error_if_exists = true;
  s = Store::Open(o, &store);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(store, nullptr);
}

// Opens a non-pool or damaged file: non-OK, message names the file.
void CheckFailedOpen(const Status& s, const std::string& path,
                     const std::string& what) {
  EXPECT_FALSE(s.ok()) << what << ": opened";
  EXPECT_FALSE(s.message().empty()) << what;
  EXPECT_NE(s.message().find(path), std::string::npos)
      << what << ": message does not name the file: " << s.ToString();
  EXPECT_TRUE(s.IsCorruption() || s.IsInvalidArgument() || s.IsIOError())
      << what << ": " << s.ToString();
}

void ExpectOpenFails(const std::string& path, const std::string& what) {
  StoreOptions o = test::QuietStoreOptions(path);
  o.pool.create_if_missing = false;
  std::unique_ptr<Store> store;
  Status s = Store::Open(o, &store);
  EXPECT_EQ(store, nullptr) << what;
  CheckFailedOpen(s, path, what);
}

// Store::Open in a forked child; the parent gets the code and message (or a
// failure if the child crashed). For libpmemobj 1.12's pmemobj_check, which
// leaks its check state (~8 MB) when it rejects a truncated pool: the leak
// dies with the child instead of failing the ASAN build's leak check.
void ExpectOpenFailsInChild(const std::string& path, const std::string& what) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    StoreOptions o = test::QuietStoreOptions(path);
    o.pool.create_if_missing = false;
    std::unique_ptr<Store> store;
    Status s = Store::Open(o, &store);
    std::string out =
        std::to_string(static_cast<int>(s.code())) + "\n" + s.message();
    ssize_t n = write(fds[1], out.data(), out.size());
    _exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string in;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) in.append(buf, n);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << what << ": Store::Open crashed or failed in the child (status "
      << status << ")";
  size_t nl = in.find('\n');
  ASSERT_NE(nl, std::string::npos);
  auto code = static_cast<Status::Code>(std::stoi(in.substr(0, nl)));
  std::string msg = in.substr(nl + 1);
  Status s;
  switch (code) {
    case Status::Code::kOk:
      s = Status::OK();
      break;
    case Status::Code::kCorruption:
      s = Status::Corruption(msg);
      break;
    case Status::Code::kInvalidArgument:
      s = Status::InvalidArgument(msg);
      break;
    case Status::Code::kIOError:
      s = Status::IOError(msg);
      break;
    default:
      s = Status::NotSupported("unexpected code: " + msg);
      break;
  }
  CheckFailedOpen(s, path, what);
}

TEST(StoreErrorTest, ForeignFiles) {
  test::TempPool pool;
  const std::string& p = pool.path();
  ASSERT_TRUE(test::WriteFile(p, ""));
  ExpectOpenFails(p, "empty file");
  ASSERT_TRUE(test::WriteFile(p, "hello, I am a text file\nnot a pool\n"));
  ExpectOpenFails(p, "text file");
  std::mt19937_64 rng(7);
  ASSERT_TRUE(test::WriteFile(p, RandomBytes(&rng, 16 << 20, false)));
  ExpectOpenFails(p, "16 MiB of random bytes");
  ASSERT_TRUE(test::WriteFile(p, std::string(16 << 20, '\0')));
  ExpectOpenFails(p, "16 MiB of zeros");
  // A foreign file must not be modified by the failed open.
  std::string text(9 << 20, 't');
  ASSERT_TRUE(test::WriteFile(p, text));
  ExpectOpenFails(p, "9 MiB text");
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), text.size());
  // create_if_missing must not overwrite a foreign file either.
  StoreOptions o = test::QuietStoreOptions(p);
  std::unique_ptr<Store> store;
  EXPECT_FALSE(Store::Open(o, &store).ok());
}

// Creates a pool with some data in it, closed.
void MakePoolWithData(const std::string& path, uint64_t size) {
  StoreOptions o = test::QuietStoreOptions(path, size, 64 << 10);
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  for (int i = 0; i < 2000; i++) {
    ASSERT_TRUE(
        store->Put("key" + std::to_string(i), std::string(100, 'v')).ok());
  }
}

TEST(StoreErrorTest, TruncatedPool) {
  test::TempPool pool;
  const uint64_t size = 16 << 20;
  for (uint64_t keep : {size / 2, size - 4096, uint64_t{8} << 20,
                        uint64_t{4096}, uint64_t{100}}) {
    unlink(pool.path().c_str());
    MakePoolWithData(pool.path(), size);
    if (HasFatalFailure()) return;
    ASSERT_EQ(truncate(pool.path().c_str(), static_cast<off_t>(keep)), 0);
    ExpectOpenFailsInChild(pool.path(), "truncated to " + std::to_string(keep));
  }
}

// Offsets of every occurrence of `needle` in the file.
std::vector<size_t> FindAll(const std::string& data,
                            const std::string& needle) {
  std::vector<size_t> out;
  for (size_t pos = data.find(needle); pos != std::string::npos;
       pos = data.find(needle, pos + 1)) {
    out.push_back(pos);
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::string data;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) data.append(buf, n);
  std::fclose(f);
  return data;
}

void FlipByte(const std::string& path, size_t off) {
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char c;
  ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(off)), 1);
  c ^= 0x5a;
  ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(off)), 1);
  close(fd);
}

TEST(StoreErrorTest, FlippedByteInNodeHeaderIsCorruption) {
  // A node header covered by its check: the store must refuse the pool
  // (the node's key "key1000" is preceded by its varint length byte and the
  // 32-byte NvmNode header; flip the data_size field).
  test::TempPool pool;
  MakePoolWithData(pool.path(), 16 << 20);
  if (HasFatalFailure()) return;
  std::string data = ReadFile(pool.path());
  std::string needle = std::string(1, '\x07') + "key1000";
  std::vector<size_t> hits = FindAll(data, needle);
  ASSERT_EQ(hits.size(), 1u);
  ASSERT_GE(hits[0], 32u);
  FlipByte(pool.path(), hits[0] - 32 + 16);  // NvmNode::data_size
  ExpectOpenFails(pool.path(), "flipped data_size of a node");
}

TEST(StoreErrorTest, FlippedByteInPoolHeaderIsCorruption) {
  test::TempPool pool;
  MakePoolWithData(pool.path(), 16 << 20);
  if (HasFatalFailure()) return;
  // libpmemobj's pool header (first 4 KiB) carries a checksum.
  for (size_t off : {size_t{0}, size_t{8}, size_t{100}}) {
    FlipByte(pool.path(), off);
    ExpectOpenFails(pool.path(),
                    "flipped pool header byte " + std::to_string(off));
    FlipByte(pool.path(), off);  // restore
    StoreOptions o = test::QuietStoreOptions(pool.path());
    std::unique_ptr<Store> store;
    Status s = Store::Open(o, &store);
    ASSERT_TRUE(s.ok()) << "restored pool: " << s.ToString();
  }
}

TEST(StoreErrorTest, FlippedByteAnywhereNeverCrashes) {
  // A flip in value bytes cannot be detected (values carry no checksum), so
  // any one flip may open OK or fail; it must never crash, and an open store
  // must be fully scannable. Flips cover the middle of the file and the
  // region that holds the data.
  test::TempPool pool;
  const uint64_t size = 16 << 20;
  MakePoolWithData(pool.path(), size);
  if (HasFatalFailure()) return;
  const std::string pristine = ReadFile(pool.path());
  std::vector<size_t> hits = FindAll(pristine, "key1");
  ASSERT_FALSE(hits.empty());
  std::mt19937_64 rng(11);
  std::vector<size_t> offsets = {pristine.size() / 2, pristine.size() / 2 + 1};
  const int kFlips = test::LongMode() ? 400 : test::Scaled(40, 2, 2);
  for (int i = 0; i < kFlips; i++) {
    size_t base = hits[rng() % hits.size()];
    // Around a node: header, key, value, or the pool metadata pages.
    offsets.push_back(i % 4 == 3 ? rng() % 65536 : base - 40 + rng() % 160);
  }
  int failed = 0;
  for (size_t off : offsets) {
    ASSERT_TRUE(test::WriteFile(pool.path(), pristine));
    FlipByte(pool.path(), off);
    StoreOptions o = test::QuietStoreOptions(pool.path());
    o.pool.create_if_missing = false;
    std::unique_ptr<Store> store;
    Status s = Store::Open(o, &store);
    if (!s.ok()) {
      failed++;
      EXPECT_NE(s.message().find(pool.path()), std::string::npos)
          << "flip at " << off << ": " << s.ToString();
      continue;
    }
    // Opened: reads must not crash (content may differ in a value byte).
    std::unique_ptr<Iterator> it = store->NewIterator();
    size_t n = 0;
    for (it->SeekToFirst(); it->Valid() && n < 10000; it->Next()) n++;
    for (it->SeekToLast(); it->Valid() && n < 20000; it->Prev()) n++;
    std::string v;
    store->Get("key1500", &v);
  }
  RecordProperty("flips_rejected", failed);
}

TEST(StoreErrorTest, SecondOpenInSameProcessFails) {
  test::TempPool pool;
  StoreOptions o = test::QuietStoreOptions(pool.path());
  std::unique_ptr<Store> first;
  ASSERT_TRUE(Store::Open(o, &first).ok());
  ASSERT_TRUE(first->Put("k", "v").ok());
  std::unique_ptr<Store> second;
  Status s = Store::Open(o, &second);
  EXPECT_FALSE(s.ok()) << "the same pool was opened twice";
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(second, nullptr);
  // The first handle is unaffected.
  std::string v;
  ASSERT_TRUE(first->Get("k", &v).ok());
  EXPECT_EQ(v, "v");
  first.reset();
  ASSERT_TRUE(Store::Open(o, &second).ok());
  ASSERT_TRUE(second->Get("k", &v).ok());
}

TEST(StoreErrorTest, OperationsAfterClose) {
  test::TempPool pool;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(test::QuietStoreOptions(pool.path()), &store).ok());
  ASSERT_TRUE(store->Put("k", "v").ok());
  ASSERT_TRUE(store->Close().ok());
  std::string v;
  EXPECT_FALSE(store->Put("k", "v2").ok());
  EXPECT_FALSE(store->Delete("k").ok());
  WriteBatch b;
  b.Put("a", "b");
  EXPECT_FALSE(store->Write(b).ok());
  EXPECT_FALSE(store->Get("k", &v).ok());
  EXPECT_TRUE(store->Close().ok());  // idempotent
}

}  // namespace
}  // namespace flintkv

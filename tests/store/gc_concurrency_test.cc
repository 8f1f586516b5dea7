// Version GC against concurrent readers, writers, iterators and snapshots
//. Labelled 'concurrency': runs under TSAN and ASAN,
// where a node freed while a reader still holds it is a reported error.
// Checks are order-independent (deterministic outcome whatever the
// interleaving):
//  - each writer owns its keys and writes a per-key counter that only
//    grows: a reader never sees a key's counter go back, never misses a
//    key that was written before the reader started, never sees a value
//    that was not written;
//  - an iterator sees every stable key exactly once, in order, and a second
//    pass over the same iterator (its snapshot) returns exactly the same
//    entries; a snapshot's Gets return the same values every time;
//  - every write succeeds in a pool that only the GC keeps from filling.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/store.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

constexpr int kWriters = 2;
constexpr int kKeysPerWriter = 300;

std::string Key(int w, int k) {
  char b[24];
  std::snprintf(b, sizeof(b), "w%d.%04d", w, k);
  return b;
}
// "<counter>|" + filler of a length that varies (different node sizes).
std::string Value(uint64_t c) {
  std::string v = std::to_string(c) + "|";
  v.append(16 + (c * 37) % 200, static_cast<char>('a' + c % 26));
  return v;
}
bool Parse(const std::string& v, uint64_t* c) {
  size_t bar = v.find('|');
  if (bar == std::string::npos || bar == 0) return false;
  *c = std::stoull(v.substr(0, bar));
  return v == Value(*c);
}

class GcConcurrencyTest : public ::testing::TestWithParam<bool> {};

TEST_P(GcConcurrencyTest, ReadersWritersIteratorsSnapshots) {
  const bool background = GetParam();
  test::TempPool pool;
  // 16 MiB holds the live data many times over, but far less than the
  // versions written: the run fails with NoSpace unless space is reused.
  StoreOptions o = test::QuietStoreOptions(pool.path(), 16ull << 20, 256 << 10);
  o.gc_interval_ms = background ? 1 : 0;
  o.gc_nodes_per_hold = 64;
  o.durability.persist_interval_us = 200;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  for (int w = 0; w < kWriters; w++) {
    for (int k = 0; k < kKeysPerWriter; k++) {
      ASSERT_TRUE(store->Put(Key(w, k), Value(0)).ok());
    }
  }
  const int rounds = test::Scaled(200, 10, 4);
  std::atomic<int> writers_done{0};
  std::atomic<uint64_t> failures{0};
  std::vector<std::string> errors(8);
  auto fail = [&](int slot, const std::string& what) {
    if (failures.fetch_add(1) == 0) errors[slot] = what;
  };
  std::vector<std::thread> th;
  for (int w = 0; w < kWriters; w++) {
    th.emplace_back([&, w] {
      // Odd writers write weak (sync=false): the GC then drains their
      // pending writes before it unlinks (docs/gc.md), concurrently with
      // the background persister and the strong writers' drains.
      WriteOptions wo;
      wo.sync = w % 2 == 0;
      for (int r = 1; r <= rounds; r++) {
        for (int k = 0; k < kKeysPerWriter; k++) {
          Status s;
          if (k % 10 == 0) {  // some keys through batches
            WriteBatch b;
            b.Put(Key(w, k), Value(r));
            b.Put(Key(w, k + 1), Value(r));
            s = store->Write(wo, b);
            k++;
          } else {
            s = store->Put(wo, Key(w, k), Value(r));
          }
          if (!s.ok()) {
            fail(w, "write: " + s.ToString());
            return;
          }
        }
      }
      writers_done.fetch_add(1);
    });
  }
  // Reader: Gets; counters never go back.
  th.emplace_back([&] {
    std::vector<uint64_t> seen(kWriters * kKeysPerWriter, 0);
    uint64_t i = 0;
    while (writers_done.load() < kWriters && failures.load() == 0) {
      int w = static_cast<int>(i % kWriters);
      int k = static_cast<int>((i * 7919) % kKeysPerWriter);
      std::string v;
      uint64_t c;
      Status s = store->Get(Key(w, k), &v);
      if (!s.ok() || !Parse(v, &c) || c < seen[w * kKeysPerWriter + k]) {
        fail(2, "get " + Key(w, k) + ": " + s.ToString() + " " + v);
        return;
      }
      seen[w * kKeysPerWriter + k] = c;
      i++;
    }
  });
  // Iterators and snapshots: a second pass repeats the first exactly.
  th.emplace_back([&] {
    while (writers_done.load() < kWriters && failures.load() == 0) {
      auto snap = store->GetSnapshot();
      auto it = store->NewIterator(ReadOptions{snap.get()});
      std::vector<std::pair<std::string, std::string>> first;
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        first.emplace_back(std::string(it->key()), std::string(it->value()));
      }
      if (first.size() != size_t{kWriters} * kKeysPerWriter) {
        fail(3, "iterator saw " + std::to_string(first.size()) + " keys");
        return;
      }
      std::this_thread::yield();  // let writers and the GC move on
      size_t n = 0;
      for (it->SeekToLast(); it->Valid(); it->Prev(), n++) {
        const auto& e = first[first.size() - 1 - n];
        if (it->key() != e.first || it->value() != e.second) {
          fail(3, "iterator changed at " + e.first);
          return;
        }
      }
      for (size_t j = 0; j < first.size(); j += 37) {
        std::string v;
        if (!store->Get(ReadOptions{snap.get()}, first[j].first, &v).ok() ||
            v != first[j].second) {
          fail(3, "snapshot Get changed at " + first[j].first);
          return;
        }
      }
    }
  });
  // Explicit passes on top of the background ones (or instead of them).
  th.emplace_back([&] {
    while (writers_done.load() < kWriters && failures.load() == 0) {
      if (!store->GarbageCollect().ok()) fail(4, "GarbageCollect failed");
      std::this_thread::yield();
    }
  });
  for (auto& t : th) t.join();
  for (const auto& e : errors) EXPECT_TRUE(e.empty()) << e;
  ASSERT_EQ(failures.load(), 0u);
  // Final state: the last round everywhere, one node per key after a pass.
  ASSERT_TRUE(store->GarbageCollect().ok());
  StoreStats st = store->GetStats();
  EXPECT_EQ(st.nodes, uint64_t{kWriters} * kKeysPerWriter);
  EXPECT_GT(st.gc_freed, 0u);
  for (int w = 0; w < kWriters; w++) {
    for (int k = 0; k < kKeysPerWriter; k++) {
      std::string v;
      ASSERT_TRUE(store->Get(Key(w, k), &v).ok());
      EXPECT_EQ(v, Value(rounds));
    }
  }
  std::printf("[gc-concurrency] %s: %llu unlinked, %llu freed, %llu passes\n",
              background ? "background" : "explicit",
              static_cast<unsigned long long>(st.gc_unlinked),
              static_cast<unsigned long long>(st.gc_freed),
              static_cast<unsigned long long>(st.gc_passes));
}

INSTANTIATE_TEST_SUITE_P(Gc, GcConcurrencyTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "Background" : "ExplicitOnly";
                         });

// Deletes and re-puts under GC: a deleted-then-collected key comes back
// with its new value, never with an old one.
TEST(GcConcurrencyDeleteTest, DeleteRecreateUnderGc) {
  test::TempPool pool;
  StoreOptions o = test::QuietStoreOptions(pool.path(), 16ull << 20, 256 << 10);
  o.gc_interval_ms = 1;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  const int rounds = test::Scaled(300, 10, 4);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    std::vector<uint64_t> seen(64, 0);
    while (!done.load()) {
      for (int k = 0; k < 64; k++) {
        std::string v;
        uint64_t c;
        Status s = store->Get(Key(0, k), &v);
        if (s.IsNotFound()) continue;
        if (!s.ok() || !Parse(v, &c) || c < seen[k]) bad++;
        if (s.ok()) seen[k] = c;
      }
    }
  });
  for (int r = 1; r <= rounds; r++) {
    for (int k = 0; k < 64; k++) {
      ASSERT_TRUE(store->Put(Key(0, k), Value(r)).ok());
      if ((k + r) % 3 == 0) {
        ASSERT_TRUE(store->Delete(Key(0, k)).ok());
      }
    }
  }
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  // A last Put makes the newest version a live one (a tombstone carrying
  // the newest version is kept, V1 in memtable/version_gc.h).
  ASSERT_TRUE(store->Put("\xff final", "v").ok());
  ASSERT_TRUE(store->GarbageCollect().ok());
  uint64_t live = 1;
  for (int k = 0; k < 64; k++) {
    std::string v;
    Status s = store->Get(Key(0, k), &v);
    bool deleted = (k + rounds) % 3 == 0;
    EXPECT_EQ(s.IsNotFound(), deleted) << k;
    if (!deleted) {
      EXPECT_EQ(v, Value(rounds));
      live++;
    }
  }
  EXPECT_EQ(store->GetStats().nodes, live);
}

}  // namespace
}  // namespace flintkv

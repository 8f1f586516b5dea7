// Concurrency tests of flintkv::Store in leveldb's style.
//
// Writers: each owns some groups of K keys ("g<group>/<i>") and rewrites a
// whole group in one WriteBatch with one generation number (or deletes the
// whole group in one batch); all writers also batch-write one shared group;
// each writer bumps its own counter key "c<writer>" with Put.
// Readers, concurrently:
//  (a) snapshot + Get of all K keys of a group: all absent or all the same
//      generation (P5: never a partial batch);
//  (b) snapshot iterator over a group forward and backward: same check, and
//      both directions return identical content;
//  (c) full forward and backward scans over one snapshot: identical, sorted;
//  (d) latest view: a counter (and an owned group's generation) never goes
//      backwards for a reader (linearizability of the latest view; not
//      checked for snapshots).
// Afterwards the final state must equal the writers' deterministic
// expectation, before and after a reopen. Bounded op counts; no timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/store.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

constexpr int kGroupSize = 8;        // K keys per group
constexpr int kGroupsPerWriter = 4;  // owned groups
constexpr int kSharedGroup = 999;    // written by every writer

std::string GroupPrefix(int group) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "g%03d/", group);
  return buf;
}
std::string GroupKey(int group, int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%02d", i);
  return GroupPrefix(group) + buf;
}
std::string CounterKey(int writer) { return "c" + std::to_string(writer); }
// Values carry a generation; a filler of varying length makes node sizes
// differ across keys and generations.
std::string GenValue(uint64_t gen, int i) {
  return std::to_string(gen) + "|" + std::string((gen + i) % 40, 'f');
}
uint64_t ParseGen(std::string_view v) {
  uint64_t g = 0;
  size_t i = 0;
  for (; i < v.size() && v[i] != '|'; i++) {
    if (v[i] < '0' || v[i] > '9') return UINT64_MAX;
    g = g * 10 + static_cast<uint64_t>(v[i] - '0');
  }
  return i == 0 || i == v.size() ? UINT64_MAX : g;
}
std::string CounterValue(uint64_t seq) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%020llu",
                static_cast<unsigned long long>(seq));
  return buf;
}

// Collects failures from any thread; the main thread asserts on them.
class Errors {
 public:
  void Add(const std::string& msg) {
    std::lock_guard<std::mutex> g(mu_);
    count_++;
    if (msgs_.size() < 20) msgs_.push_back(msg);
  }
  int count() const {
    std::lock_guard<std::mutex> g(mu_);
    return count_;
  }
  std::string Summary() const {
    std::lock_guard<std::mutex> g(mu_);
    std::string s;
    for (const std::string& m : msgs_) s += "  " + m + "\n";
    return s;
  }

 private:
  mutable std::mutex mu_;
  int count_ = 0;
  std::vector<std::string> msgs_;
};

// Expected final state of one writer's keys, computed by the writer itself
// (its op sequence is deterministic from its seed).
struct WriterResult {
  std::map<std::string, std::string> owned;  // key -> value (absent: deleted)
  uint64_t counter = 0;
  std::set<uint64_t> shared_gens;  // generations it wrote to the shared group
  uint64_t ops = 0;
};

class ConcurrencyTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    threads_ = GetParam();
    writers_ = std::max(1, threads_ / 2);
    readers_ = std::max(1, threads_ - writers_);
    ops_per_writer_ =
        test::LongMode() ? 50000 : test::Scaled(24000 / writers_, 6, 2);
    options_ = test::QuietStoreOptions(pool_.path(), 256ull << 20, 256 << 10);
    ASSERT_TRUE(Store::Open(options_, &store_).ok());
  }

  void Writer(int w, WriterResult* out) {
    std::mt19937_64 rng(1000 + w);
    std::vector<uint64_t> gens(kGroupsPerWriter, 0);
    std::string v;
    for (int op = 0; op < ops_per_writer_; op++) {
      uint64_t r = rng() % 100;
      if (r < 40) {
        uint64_t seq = ++out->counter;
        Status s = store_->Put(CounterKey(w), CounterValue(seq));
        if (!s.ok()) return errors_.Add("Put counter: " + s.ToString());
        // Read-your-writes: an acknowledged write is readable at once.
        s = store_->Get(CounterKey(w), &v);
        if (!s.ok() || v != CounterValue(seq)) {
          errors_.Add("writer " + std::to_string(w) + " lost its counter " +
                      std::to_string(seq) + ": " + s.ToString() + " " + v);
        }
      } else if (r < 90) {
        int j = static_cast<int>(rng() % kGroupsPerWriter);
        int group = w * kGroupsPerWriter + j;
        WriteBatch b;
        bool del = r >= 85;
        uint64_t gen = ++gens[j];
        for (int i = 0; i < kGroupSize; i++) {
          if (i % 3 == 0) b.Put(GroupKey(group, i), "junk-shadowed");
        }
        for (int i = 0; i < kGroupSize; i++) {
          std::string k = GroupKey(group, i);
          if (del) {
            b.Delete(k);
            out->owned.erase(k);
          } else {
            b.Put(k, GenValue(gen, i));
            out->owned[k] = GenValue(gen, i);
          }
        }
        Status s = store_->Write(b);
        if (!s.ok()) return errors_.Add("Write: " + s.ToString());
        s = store_->Get(GroupKey(group, kGroupSize - 1), &v);
        bool good = del ? s.IsNotFound()
                        : (s.ok() && v == GenValue(gen, kGroupSize - 1));
        if (!good) {
          errors_.Add("writer " + std::to_string(w) + " group " +
                      std::to_string(group) + " gen " + std::to_string(gen) +
                      (del ? " delete" : " put") +
                      " not readable: " + s.ToString() + " " + v);
        }
      } else {
        uint64_t gen = shared_gen_.fetch_add(1) + 1;
        WriteBatch b;
        for (int i = 0; i < kGroupSize; i++) {
          b.Put(GroupKey(kSharedGroup, i), GenValue(gen, i));
        }
        Status s = store_->Write(b);
        if (!s.ok()) return errors_.Add("Write shared: " + s.ToString());
        out->shared_gens.insert(gen);
      }
      out->ops++;
    }
  }

  // Checks one group's content read at one point in time.
  void CheckGroup(const std::vector<std::pair<std::string, std::string>>& kv,
                  int group, const char* how) {
    if (kv.empty()) return;  // never written, or deleted as a whole
    std::string where = std::string(how) + " group " + std::to_string(group);
    if (kv.size() != kGroupSize) {
      return errors_.Add(where + ": partial batch, " +
                         std::to_string(kv.size()) + " of " +
                         std::to_string(kGroupSize) + " keys");
    }
    uint64_t gen = ParseGen(kv[0].second);
    for (int i = 0; i < kGroupSize; i++) {
      if (kv[i].first != GroupKey(group, i)) {
        return errors_.Add(where + ": unexpected key " +
                           test::Printable(kv[i].first));
      }
      if (kv[i].second != GenValue(gen, i)) {
        return errors_.Add(where + ": torn batch, key " + kv[i].first +
                           " has " + test::Printable(kv[i].second) +
                           ", key 0 has gen " + std::to_string(gen));
      }
    }
  }

  int RandomGroup(std::mt19937_64* rng) {
    if ((*rng)() % 4 == 0) return kSharedGroup;
    return static_cast<int>((*rng)() % (writers_ * kGroupsPerWriter));
  }

  void Reader(int id) {
    std::mt19937_64 rng(5000 + id);
    std::map<int, uint64_t> last_counter;  // latest view only
    std::map<int, uint64_t> last_gen;
    std::string v;
    uint64_t rounds = 0;
    while (!stop_.load(std::memory_order_acquire) || rounds < 50) {
      rounds++;
      uint64_t r = rng() % 100;
      if (r < 30) {
        // (a) snapshot Gets.
        int group = RandomGroup(&rng);
        std::unique_ptr<Snapshot> snap = store_->GetSnapshot();
        std::vector<std::pair<std::string, std::string>> kv;
        int missing = 0;
        for (int i = 0; i < kGroupSize; i++) {
          Status s =
              store_->Get(ReadOptions{snap.get()}, GroupKey(group, i), &v);
          if (s.ok()) {
            kv.emplace_back(GroupKey(group, i), v);
          } else if (s.IsNotFound()) {
            missing++;
          } else {
            errors_.Add("Get: " + s.ToString());
          }
        }
        if (missing != 0 && missing != kGroupSize) {
          errors_.Add("snapshot Get group " + std::to_string(group) +
                      ": partial batch, " + std::to_string(missing) +
                      " keys missing");
        } else {
          CheckGroup(kv, group, "snapshot Get");
        }
      } else if (r < 60) {
        // (b) snapshot iterator over a group, both directions.
        int group = RandomGroup(&rng);
        std::string prefix = GroupPrefix(group);
        std::unique_ptr<Snapshot> snap = store_->GetSnapshot();
        std::unique_ptr<Iterator> it =
            store_->NewIterator(ReadOptions{snap.get()});
        std::vector<std::pair<std::string, std::string>> fwd, bwd;
        for (it->Seek(prefix);
             it->Valid() && it->key().substr(0, prefix.size()) == prefix;
             it->Next()) {
          fwd.emplace_back(it->key(), it->value());
        }
        // Interleave another writer-visible change: the iterator must not
        // move off its snapshot. Use a fresh iterator on the same snapshot
        // for the backward scan.
        std::unique_ptr<Iterator> it2 =
            store_->NewIterator(ReadOptions{snap.get()});
        std::string end = prefix;
        end.back() = '/' + 1;  // first string after every "g<group>/..."
        for (it2->SeekForPrev(end);
             it2->Valid() && it2->key().substr(0, prefix.size()) == prefix;
             it2->Prev()) {
          bwd.emplace_back(it2->key(), it2->value());
        }
        std::reverse(bwd.begin(), bwd.end());
        if (fwd != bwd) {
          errors_.Add("group " + std::to_string(group) +
                      ": forward and backward scans of one snapshot differ (" +
                      std::to_string(fwd.size()) + " vs " +
                      std::to_string(bwd.size()) + " keys)");
        }
        CheckGroup(fwd, group, "snapshot iterator forward");
        CheckGroup(bwd, group, "snapshot iterator backward");
        // Prev from the middle, then Next back: same entries.
        if (fwd.size() == kGroupSize) {
          it->Seek(GroupKey(group, kGroupSize / 2));
          it->Prev();
          if (!it->Valid() || it->key() != fwd[kGroupSize / 2 - 1].first ||
              it->value() != fwd[kGroupSize / 2 - 1].second) {
            errors_.Add("group " + std::to_string(group) +
                        ": Prev from the middle left the snapshot");
          }
        }
      } else if (r < 65) {
        // (c) full scans over one snapshot (implicit snapshot of the
        // forward iterator reused for the backward one).
        std::unique_ptr<Snapshot> snap = store_->GetSnapshot();
        std::unique_ptr<Iterator> it =
            store_->NewIterator(ReadOptions{snap.get()});
        std::vector<std::pair<std::string, std::string>> fwd, bwd;
        for (it->SeekToFirst(); it->Valid(); it->Next()) {
          if (!fwd.empty() && !(fwd.back().first < it->key())) {
            errors_.Add("forward scan not strictly sorted at " +
                        test::Printable(it->key()));
            break;
          }
          fwd.emplace_back(it->key(), it->value());
        }
        for (it->SeekToLast(); it->Valid(); it->Prev()) {
          bwd.emplace_back(it->key(), it->value());
        }
        std::reverse(bwd.begin(), bwd.end());
        if (fwd != bwd) {
          errors_.Add(
              "full forward and backward scans of one snapshot "
              "differ (" +
              std::to_string(fwd.size()) + " vs " + std::to_string(bwd.size()) +
              " entries)");
        }
      } else {
        // (d) latest view must never go backwards.
        int w = static_cast<int>(rng() % writers_);
        Status s = store_->Get(CounterKey(w), &v);
        if (s.ok()) {
          uint64_t seq = std::stoull(v);
          auto it = last_counter.find(w);
          if (it != last_counter.end() && seq < it->second) {
            errors_.Add("counter " + CounterKey(w) + " went back from " +
                        std::to_string(it->second) + " to " +
                        std::to_string(seq));
          }
          last_counter[w] = seq;
        } else if (!s.IsNotFound() || last_counter.count(w)) {
          errors_.Add("counter " + CounterKey(w) +
                      " vanished: " + s.ToString());
        }
        int group = static_cast<int>(rng() % (writers_ * kGroupsPerWriter));
        s = store_->Get(GroupKey(group, static_cast<int>(rng() % kGroupSize)),
                        &v);
        if (s.ok()) {
          uint64_t gen = ParseGen(v);
          if (gen < last_gen[group]) {
            errors_.Add("group " + std::to_string(group) +
                        " generation went back from " +
                        std::to_string(last_gen[group]) + " to " +
                        std::to_string(gen));
          }
          last_gen[group] = std::max(last_gen[group], gen);
        }
      }
    }
    reader_rounds_.fetch_add(rounds);
  }

  void VerifyFinal(const std::vector<WriterResult>& results,
                   const std::string& where) {
    std::map<std::string, std::string> expected;
    std::set<uint64_t> shared_gens;
    for (int w = 0; w < writers_; w++) {
      const WriterResult& r = results[w];
      expected.insert(r.owned.begin(), r.owned.end());
      if (r.counter) expected[CounterKey(w)] = CounterValue(r.counter);
      shared_gens.insert(r.shared_gens.begin(), r.shared_gens.end());
    }
    // Shared group: whichever batch came last, all its keys.
    std::string v;
    Status s = store_->Get(GroupKey(kSharedGroup, 0), &v);
    if (shared_gens.empty()) {
      EXPECT_TRUE(s.IsNotFound()) << where;
    } else {
      ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
      uint64_t gen = ParseGen(v);
      EXPECT_EQ(shared_gens.count(gen), 1u)
          << where << ": shared group holds gen " << gen
          << " that no writer acknowledged";
      for (int i = 0; i < kGroupSize; i++) {
        expected[GroupKey(kSharedGroup, i)] = GenValue(gen, i);
      }
    }
    std::unique_ptr<Iterator> it = store_->NewIterator();
    auto e = expected.begin();
    size_t n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++e, ++n) {
      ASSERT_NE(e, expected.end())
          << where << ": unexpected key " << test::Printable(it->key());
      ASSERT_EQ(it->key(), e->first) << where;
      ASSERT_EQ(it->value(), e->second) << where << " key " << e->first;
    }
    EXPECT_EQ(e, expected.end()) << where << ": missing key " << e->first;
    for (const auto& kv : expected) {
      ASSERT_TRUE(store_->Get(kv.first, &v).ok()) << where << " " << kv.first;
      ASSERT_EQ(v, kv.second) << where << " " << kv.first;
    }
  }

  test::TempPool pool_;
  StoreOptions options_;
  std::unique_ptr<Store> store_;
  int threads_ = 0, writers_ = 0, readers_ = 0, ops_per_writer_ = 0;
  std::atomic<uint64_t> shared_gen_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> reader_rounds_{0};
  Errors errors_;
};

TEST_P(ConcurrencyTest, BatchesAtomicSnapshotsConsistentLatestMonotonic) {
  std::vector<WriterResult> results(writers_);
  std::vector<std::thread> threads;
  for (int r = 0; r < readers_; r++)
    threads.emplace_back([this, r] { Reader(r); });
  std::vector<std::thread> writer_threads;
  for (int w = 0; w < writers_; w++) {
    writer_threads.emplace_back(
        [this, w, &results] { Writer(w, &results[w]); });
  }
  for (std::thread& t : writer_threads) t.join();
  stop_.store(true, std::memory_order_release);
  for (std::thread& t : threads) t.join();

  ASSERT_EQ(errors_.count(), 0) << errors_.count() << " errors:\n"
                                << errors_.Summary();
  uint64_t total_ops = 0;
  for (const WriterResult& r : results) total_ops += r.ops;
  ASSERT_EQ(total_ops, static_cast<uint64_t>(writers_) * ops_per_writer_);
  // Every op bumped the version exactly once.
  EXPECT_EQ(store_->GetStats().visible_version, total_ops);
  VerifyFinal(results, "final");
  if (HasFatalFailure()) return;
  store_.reset();
  Status s = Store::Open(options_, &store_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  StoreStats st = store_->GetStats();
  EXPECT_EQ(st.dropped_uncommitted, 0u);
  EXPECT_EQ(st.rolled_back_batch, 0u);
  EXPECT_EQ(st.visible_version, total_ops);
  VerifyFinal(results, "after reopen");
  RecordProperty("reader_rounds", static_cast<int>(reader_rounds_.load()));
}

INSTANTIATE_TEST_SUITE_P(Threads, ConcurrencyTest, ::testing::Values(2, 4, 16),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "threads";
                         });

// Many writers hammer the same few keys with Puts, Deletes and overlapping
// batches; readers scan. Checks the list stays sorted with one entry per key
// in every snapshot, and that each key's final value is one that a writer
// wrote last for it (per-writer values are unique).
TEST(ConcurrencyHotKeys, OverlappingWritersKeepListSorted) {
  test::TempPool pool;
  StoreOptions options = test::QuietStoreOptions(pool.path(), 128ull << 20);
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(options, &store).ok());
  constexpr int kWriters = 6, kKeys = 16;
  const int ops = test::LongMode() ? 20000 : test::Scaled(3000, 6, 2);
  Errors errors;
  std::atomic<bool> stop{false};
  // last_written[w][k]: value writer w last acknowledged for key k ("" for
  // a delete), for the final check.
  std::vector<std::vector<std::string>> last_written(
      kWriters, std::vector<std::string>(kKeys));
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; w++) {
    writers.emplace_back([&, w] {
      std::mt19937_64 rng(77 + w);
      for (int i = 0; i < ops; i++) {
        int k = static_cast<int>(rng() % kKeys);
        std::string key = "hot" + std::to_string(k);
        std::string val = "w" + std::to_string(w) + "#" + std::to_string(i);
        Status s;
        if (rng() % 5 == 0) {
          s = store->Delete(key);
          if (s.ok()) last_written[w][k] = "";
        } else if (rng() % 3 == 0) {
          WriteBatch b;
          int k2 = (k + 1) % kKeys;
          std::string key2 = "hot" + std::to_string(k2);
          b.Put(key, val);
          b.Put(key2, val);
          s = store->Write(b);
          if (s.ok()) last_written[w][k] = last_written[w][k2] = val;
        } else {
          s = store->Put(key, val);
          if (s.ok()) last_written[w][k] = val;
        }
        if (!s.ok()) errors.Add(s.ToString());
      }
    });
  }
  std::thread reader([&] {
    while (!stop.load()) {
      std::unique_ptr<Iterator> it = store->NewIterator();
      std::string prev;
      int n = 0;
      for (it->SeekToFirst(); it->Valid(); it->Next(), n++) {
        std::string k(it->key());
        if (n > 0 && !(prev < k)) errors.Add("unsorted/duplicate at " + k);
        prev = k;
      }
      if (n > kKeys) errors.Add("more keys than written: " + std::to_string(n));
    }
  });
  for (std::thread& t : writers) t.join();
  stop = true;
  reader.join();
  ASSERT_EQ(errors.count(), 0) << errors.Summary();
  for (int k = 0; k < kKeys; k++) {
    std::string key = "hot" + std::to_string(k), v;
    Status s = store->Get(key, &v);
    std::string got = s.ok() ? v : "";
    ASSERT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
    bool someone = false;
    for (int w = 0; w < kWriters; w++) someone |= last_written[w][k] == got;
    EXPECT_TRUE(someone) << key << " holds " << got
                         << ", which is no writer's last write";
  }
}

}  // namespace
}  // namespace flintkv

// Differential tests of the "flintkv" memtable against RocksDB's default
// skiplist memtable: random operation streams, serial and concurrent,
// several column families, a small pool under pressure, two pools in one
// process, tailing iterators; and the pool stays bounded over many flushes.
//
// The harness (namespace diff): a reference DB (RocksDB's default skiplist)
// and a FlintKV DB (WAL off) in a Pair, and a Driver that sends both the
// same randomized operation stream and checks that every read, iterator
// step and full scan agrees.
//
// Pools and DBs live in $FLINTKV_TEST_DIR (ctest: /dev/shm), one unique
// directory per test, removed at the end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/rocksdb_memtable.h"
#include "memtable/rocksdb/pool_session.h"
#include "pmem/pool.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/listener.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/options.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/utilities/options_util.h"
#include "rocksdb/write_batch.h"
#include "tests/rocksdb/append_operator.h"
#include "tests/rocksdb/single_delete_model.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace diff {

using rocks::PoolSession;
using rocksdb::ColumnFamilyHandle;
using rocksdb::ReadOptions;
using rocksdb::Slice;
using rocksdb::WriteOptions;
using test::AppendOperator;
using test::TempDir;

constexpr uint64_t kPoolSize = 256ull << 20;
constexpr uint64_t kChunkSize = 64 << 10;
constexpr size_t kWriteBufferSize = 256 << 10;

// Counts flushes that RocksDB started on its own (memtable full), i.e.
// proof that ApproximateMemoryUsage drives memtable switches.
class FlushCounter : public rocksdb::EventListener {
 public:
  void OnFlushCompleted(rocksdb::DB*,
                        const rocksdb::FlushJobInfo& info) override {
    total++;
    if (info.flush_reason == rocksdb::FlushReason::kWriteBufferFull) auto_++;
  }
  std::atomic<int> total{0};
  std::atomic<int> auto_{0};
};

struct Config {
  bool concurrent = true;  // allow_concurrent_memtable_write
  bool hint = false;       // memtable_insert_with_hint_prefix_extractor
  int num_cfs = 3;
  uint64_t pool_size = kPoolSize;
  size_t write_buffer_size = kWriteBufferSize;
};

inline std::string CfName(int i) {
  return i == 0 ? rocksdb::kDefaultColumnFamilyName : "cf" + std::to_string(i);
}

inline std::string StatusStr(const rocksdb::Status& s) {
  return s.ok() ? "OK" : s.IsNotFound() ? "NotFound" : s.ToString();
}

// One open DB with its column family handles.
struct Db {
  rocksdb::DB* db = nullptr;
  std::vector<ColumnFamilyHandle*> cfs;
  std::shared_ptr<FlushCounter> flushes = std::make_shared<FlushCounter>();

  rocksdb::Status Open(const std::string& path, const rocksdb::Options& base,
                       int num_cfs) {
    rocksdb::Options o = base;
    o.listeners.push_back(flushes);
    std::vector<rocksdb::ColumnFamilyDescriptor> descs;
    for (int i = 0; i < num_cfs; i++) {
      descs.emplace_back(CfName(i), rocksdb::ColumnFamilyOptions(o));
    }
    return rocksdb::DB::Open(rocksdb::DBOptions(o), path, descs, &cfs, &db);
  }
  void Close() {
    if (!db) return;
    for (auto* h : cfs) db->DestroyColumnFamilyHandle(h);
    cfs.clear();
    EXPECT_TRUE(db->Close().ok());
    delete db;
    db = nullptr;
  }
  int SstFiles() const {
    std::vector<rocksdb::LiveFileMetaData> files;
    db->GetLiveFilesMetaData(&files);
    return static_cast<int>(files.size());
  }
};

inline rocksdb::Options BaseOptions(const Config& cfg) {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  o.write_buffer_size = cfg.write_buffer_size;
  o.max_write_buffer_number = 4;
  o.target_file_size_base = 1 << 20;
  o.max_bytes_for_level_base = 4 << 20;
  o.level0_file_num_compaction_trigger = 4;
  o.allow_concurrent_memtable_write = cfg.concurrent;
  o.merge_operator = std::make_shared<AppendOperator>();
  o.max_background_jobs = 2;
  return o;
}

inline std::shared_ptr<rocksdb::MemTableRepFactory> FlintFactory(
    const std::string& pool_dir, uint64_t pool_size = kPoolSize) {
  MemTableOptions mo;
  mo.pool_dir = pool_dir;
  mo.pool_size = pool_size;
  mo.chunk_size = kChunkSize;
  std::shared_ptr<rocksdb::MemTableRepFactory> f;
  rocksdb::Status s = NewMemTableRepFactory(mo, &f);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return f;
}

// A reference DB (default skiplist memtable) and a FlintKV DB that receive
// the same operations.
class Pair {
 public:
  Pair(const std::string& tag, const Config& cfg) : dir_(tag), cfg_(cfg) {}
  ~Pair() { Close(); }

  std::string pool_dir() const { return dir_.path() + "/pool"; }

  rocksdb::Status Open() {
    rocksdb::Options o = BaseOptions(cfg_);
    rocksdb::Status s = ref_.Open(dir_.path() + "/ref", o, cfg_.num_cfs);
    if (!s.ok()) return s;
    o.memtable_factory = FlintFactory(pool_dir(), cfg_.pool_size);
    if (cfg_.hint) {
      // Only on the FlintKV DB: Debian's assert-enabled 7.8.3 SkipListRep
      // trips InlineSkipList's splice assert (inlineskiplist.h:977) with
      // insert hints in this workload.
      o.memtable_insert_with_hint_prefix_extractor.reset(
          rocksdb::NewFixedPrefixTransform(4));
    }
    return flint_.Open(dir_.path() + "/flint", o, cfg_.num_cfs);
  }
  void Close() {
    ref_.Close();
    flint_.Close();
  }

  Db& ref() { return ref_; }
  Db& flint() { return flint_; }
  int num_cfs() const { return cfg_.num_cfs; }

 private:
  TempDir dir_;
  Config cfg_;
  Db ref_;
  Db flint_;
};

inline std::string Key(int n) {
  char buf[32];
  // Some keys get a suffix so that key lengths vary and "k00012" < "k00012x".
  std::snprintf(buf, sizeof(buf), "k%05d%s", n, n % 7 == 3 ? "x" : "");
  return buf;
}

// Randomized operation stream over a Pair, keys in [key_lo, key_hi).
class Driver {
 public:
  Driver(Pair* pair, uint64_t seed, int key_lo, int key_hi)
      : pair_(pair), rng_(seed), key_lo_(key_lo), key_hi_(key_hi) {}

  // Only this driver writes keys in [key_lo, key_hi); others write the rest.
  void set_restricted() { restricted_ = true; }

  int Rand(int n) { return static_cast<int>(rng_() % n); }
  int RandKeyNum() { return key_lo_ + Rand(key_hi_ - key_lo_); }
  std::string RandKey() { return Key(RandKeyNum()); }
  std::string RandValue() {
    int r = Rand(1000);
    size_t len = r < 5     ? 20000 + Rand(30000)  // own-chunk nodes
                 : r < 100 ? 1000 + Rand(3000)    // a few KiB
                           : Rand(200);
    std::string v(len, ' ');
    for (size_t i = 0; i < len; i++)
      v[i] = static_cast<char>('a' + rng_() % 26);
    return "v" + std::to_string(counter_++) + ":" + v;
  }

  // SingleDelete only where its result is defined (single_delete_model.h).
  test::SingleDeleteModel& State(int cf, const std::string& k) {
    return model_[{cf, k}];
  }

  // Applies one write op to a WriteBatch, updating the SingleDelete model.
  void AddWrite(rocksdb::WriteBatch* ref_b, rocksdb::WriteBatch* fl_b,
                std::vector<std::string>* keys_in_batch) {
    int cf = Rand(pair_->num_cfs());
    ColumnFamilyHandle* rh = pair_->ref().cfs[cf];
    ColumnFamilyHandle* fh = pair_->flint().cfs[cf];
    std::string k = RandKey();
    // Keep each key at most once per batch so the SingleDelete model holds.
    std::string tag = std::to_string(cf) + "/" + k;
    if (std::find(keys_in_batch->begin(), keys_in_batch->end(), tag) !=
        keys_in_batch->end()) {
      return;
    }
    keys_in_batch->push_back(tag);
    test::SingleDeleteModel& st = State(cf, k);
    int r = Rand(100);
    if (r < 50) {
      std::string v = RandValue();
      ref_b->Put(rh, k, v);
      fl_b->Put(fh, k, v);
      st.Put();
    } else if (r < 65) {
      ref_b->Delete(rh, k);
      fl_b->Delete(fh, k);
      st.Delete();
    } else if (r < 75 && st.CanSingleDelete()) {
      ref_b->SingleDelete(rh, k);
      fl_b->SingleDelete(fh, k);
      st.SingleDelete();
    } else if (r < 95) {
      std::string v = "m" + std::to_string(counter_++);
      ref_b->Merge(rh, k, v);
      fl_b->Merge(fh, k, v);
      st.Merge();
    } else {
      int a = RandKeyNum();
      int b = std::min(a + 1 + Rand(20), key_hi_);
      std::string lo = Key(a), hi = Key(b);
      ref_b->DeleteRange(rh, lo, hi);
      fl_b->DeleteRange(fh, lo, hi);
      for (int i = a; i < b; i++) State(cf, Key(i)).DeleteRange();
    }
  }

  // A write of 1 (plain op) or several (multi-key batch, across CFs) ops.
  std::string Write(int max_ops) {
    rocksdb::WriteBatch rb, fb;
    std::vector<std::string> keys;
    int n = 1 + Rand(max_ops);
    for (int i = 0; i < n; i++) AddWrite(&rb, &fb, &keys);
    WriteOptions wo;
    wo.disableWAL = true;
    rocksdb::Status a = pair_->ref().db->Write(wo, &rb);
    rocksdb::Status b = pair_->flint().db->Write(wo, &fb);
    if (!a.ok() || !b.ok()) {
      return "write failed: ref " + a.ToString() + " flint " + b.ToString();
    }
    return "";
  }

  // Snapshots are taken and released in pairs (one per DB).
  void TakeSnapshot() {
    if (snaps_.size() >= 3) ReleaseSnapshot(Rand(snaps_.size()));
    snaps_.push_back(
        {pair_->ref().db->GetSnapshot(), pair_->flint().db->GetSnapshot()});
  }
  void ReleaseSnapshot(size_t i) {
    pair_->ref().db->ReleaseSnapshot(snaps_[i].first);
    pair_->flint().db->ReleaseSnapshot(snaps_[i].second);
    snaps_.erase(snaps_.begin() + i);
  }
  void ReleaseAllSnapshots() {
    while (!snaps_.empty()) ReleaseSnapshot(snaps_.size() - 1);
  }
  // Read options for both DBs: latest (-1) or snapshot i.
  void SnapOptions(int snap, ReadOptions* r, ReadOptions* f) {
    if (snap >= 0) {
      r->snapshot = snaps_[snap].first;
      f->snapshot = snaps_[snap].second;
    }
  }
  int RandSnap() {
    return snaps_.empty() || Rand(3) == 0 ? -1 : Rand(snaps_.size());
  }

  std::string CompareGet() {
    int cf = Rand(pair_->num_cfs());
    int snap = RandSnap();
    ReadOptions ro, fo;
    SnapOptions(snap, &ro, &fo);
    std::string k = RandKey(), rv, fv;
    rocksdb::Status a = pair_->ref().db->Get(ro, pair_->ref().cfs[cf], k, &rv);
    rocksdb::Status b =
        pair_->flint().db->Get(fo, pair_->flint().cfs[cf], k, &fv);
    if (StatusStr(a) != StatusStr(b) || rv != fv) {
      return "Get(cf" + std::to_string(cf) + "," + k + ",snap " +
             std::to_string(snap) + "): ref " + StatusStr(a) + " '" +
             rv.substr(0, 40) + "' flint " + StatusStr(b) + " '" +
             fv.substr(0, 40) + "'";
    }
    return "";
  }

  std::string CompareMultiGet() {
    int snap = RandSnap();
    ReadOptions ro, fo;
    SnapOptions(snap, &ro, &fo);
    int n = 1 + Rand(16);
    std::vector<std::string> keys;
    std::vector<Slice> slices;
    std::vector<ColumnFamilyHandle*> rh, fh;
    for (int i = 0; i < n; i++) keys.push_back(RandKey());
    for (int i = 0; i < n; i++) {
      int cf = Rand(pair_->num_cfs());
      slices.emplace_back(keys[i]);
      rh.push_back(pair_->ref().cfs[cf]);
      fh.push_back(pair_->flint().cfs[cf]);
    }
    std::vector<std::string> rv, fv;
    auto a = pair_->ref().db->MultiGet(ro, rh, slices, &rv);
    auto b = pair_->flint().db->MultiGet(fo, fh, slices, &fv);
    for (int i = 0; i < n; i++) {
      if (StatusStr(a[i]) != StatusStr(b[i]) || rv[i] != fv[i]) {
        return "MultiGet key " + keys[i] + ": ref " + StatusStr(a[i]) +
               " flint " + StatusStr(b[i]);
      }
    }
    return "";
  }

  // Random iterator walk with random bounds, direction changes and seeks;
  // both iterators must agree at every step.
  std::string CompareIterWalk() {
    int cf = Rand(pair_->num_cfs());
    int snap = RandSnap();
    ReadOptions ro, fo;
    SnapOptions(snap, &ro, &fo);
    std::string lo = RandKey(), hi = RandKey();
    if (hi < lo) std::swap(lo, hi);
    if (restricted_ && Rand(2)) hi = Key(key_hi_);
    Slice lo_s(lo), hi_s(hi);
    // Other threads write outside [key_lo, key_hi): a restricted driver
    // always bounds its iterators to its own range.
    if (restricted_ || Rand(2)) {
      ro.iterate_lower_bound = fo.iterate_lower_bound = &lo_s;
    }
    if (restricted_ || Rand(2)) {
      ro.iterate_upper_bound = fo.iterate_upper_bound = &hi_s;
    }
    std::unique_ptr<rocksdb::Iterator> a(
        pair_->ref().db->NewIterator(ro, pair_->ref().cfs[cf]));
    std::unique_ptr<rocksdb::Iterator> b(
        pair_->flint().db->NewIterator(fo, pair_->flint().cfs[cf]));
    std::string trace;
    for (int step = 0; step < 40; step++) {
      int r = Rand(10);
      if (step == 0 || r == 0) {
        std::string k = RandKey();
        if (Rand(2)) {
          a->Seek(k), b->Seek(k), trace += " Seek(" + k + ")";
        } else {
          a->SeekForPrev(k), b->SeekForPrev(k),
              trace += " SeekForPrev(" + k + ")";
        }
      } else if (r == 1) {
        a->SeekToFirst(), b->SeekToFirst(), trace += " First";
      } else if (r == 2) {
        a->SeekToLast(), b->SeekToLast(), trace += " Last";
      } else if (a->Valid() && b->Valid()) {
        if (r < 7) {
          a->Next(), b->Next(), trace += " Next";
        } else {
          a->Prev(), b->Prev(), trace += " Prev";
        }
      }
      std::string err = CompareIterPos(a.get(), b.get());
      if (!err.empty()) {
        return "iterator cf" + std::to_string(cf) + " snap " +
               std::to_string(snap) + " [" + lo + "," + hi + ")" + trace +
               ": " + err;
      }
    }
    return "";
  }

  static std::string CompareIterPos(rocksdb::Iterator* a,
                                    rocksdb::Iterator* b) {
    if (!a->status().ok() || !b->status().ok()) {
      return "status ref " + a->status().ToString() + " flint " +
             b->status().ToString();
    }
    if (a->Valid() != b->Valid()) {
      return std::string("valid ref ") + (a->Valid() ? "1" : "0") + " flint " +
             (b->Valid() ? "1" : "0") +
             (a->Valid() ? " ref at " + a->key().ToString() : "") +
             (b->Valid() ? " flint at " + b->key().ToString() : "");
    }
    if (a->Valid() && (a->key() != b->key() || a->value() != b->value())) {
      return "ref at " + a->key().ToString() + " flint at " +
             b->key().ToString();
    }
    return "";
  }

  void Flush() {
    int cf = Rand(pair_->num_cfs());
    rocksdb::FlushOptions fo;
    fo.wait = Rand(2);
    EXPECT_TRUE(pair_->ref().db->Flush(fo, pair_->ref().cfs[cf]).ok());
    EXPECT_TRUE(pair_->flint().db->Flush(fo, pair_->flint().cfs[cf]).ok());
  }
  void Compact() {
    int cf = Rand(pair_->num_cfs());
    std::string lo = RandKey(), hi = RandKey();
    if (hi < lo) std::swap(lo, hi);
    Slice l(lo), h(hi);
    rocksdb::CompactRangeOptions co;
    bool all = Rand(3) == 0;
    EXPECT_TRUE(pair_->ref()
                    .db
                    ->CompactRange(co, pair_->ref().cfs[cf], all ? nullptr : &l,
                                   all ? nullptr : &h)
                    .ok());
    EXPECT_TRUE(pair_->flint()
                    .db
                    ->CompactRange(co, pair_->flint().cfs[cf],
                                   all ? nullptr : &l, all ? nullptr : &h)
                    .ok());
  }

  // One random step; "" or a description of the first difference.
  std::string Step(bool allow_reopen) {
    int r = Rand(1000);
    if (r < 450) return Write(1);
    if (r < 550) return Write(12);
    if (r < 720) return CompareGet();
    if (r < 800) return CompareMultiGet();
    if (r < 850) return CompareIterWalk();
    if (r < 880) {
      TakeSnapshot();
      return "";
    }
    if (r < 890 && !snaps_.empty()) {
      ReleaseSnapshot(Rand(snaps_.size()));
      return "";
    }
    if (r < 897) {
      Flush();
      return "";
    }
    if (r < 899) {
      Compact();
      return "";
    }
    if (r < 900 && allow_reopen) {
      ReleaseAllSnapshots();
      pair_->Close();
      rocksdb::Status s = pair_->Open();
      return s.ok() ? "" : "reopen: " + s.ToString();
    }
    return CompareGet();
  }

  ~Driver() { ReleaseAllSnapshots(); }

 private:
  Pair* pair_;
  std::mt19937_64 rng_;
  int key_lo_, key_hi_;
  bool restricted_ = false;
  uint64_t counter_ = 0;
  std::map<std::pair<int, std::string>, test::SingleDeleteModel> model_;
  std::vector<std::pair<const rocksdb::Snapshot*, const rocksdb::Snapshot*>>
      snaps_;
};

// Full forward and backward scans of every CF must be equal; returns the
// number of entries seen (forward).
inline std::string CompareScans(Pair* pair,
                                const rocksdb::Snapshot* rs = nullptr,
                                const rocksdb::Snapshot* fs = nullptr,
                                size_t* entries = nullptr) {
  for (int cf = 0; cf < pair->num_cfs(); cf++) {
    ReadOptions ro, fo;
    ro.snapshot = rs;
    fo.snapshot = fs;
    std::unique_ptr<rocksdb::Iterator> a(
        pair->ref().db->NewIterator(ro, pair->ref().cfs[cf]));
    std::unique_ptr<rocksdb::Iterator> b(
        pair->flint().db->NewIterator(fo, pair->flint().cfs[cf]));
    size_t n = 0;
    for (a->SeekToFirst(), b->SeekToFirst(); a->Valid() || b->Valid();
         a->Next(), b->Next(), n++) {
      std::string err = Driver::CompareIterPos(a.get(), b.get());
      if (!err.empty()) {
        return "forward scan cf" + std::to_string(cf) + " entry " +
               std::to_string(n) + ": " + err;
      }
    }
    std::string err = Driver::CompareIterPos(a.get(), b.get());
    if (!err.empty()) return "forward scan end: " + err;
    if (entries) *entries += n;
    size_t m = 0;
    for (a->SeekToLast(), b->SeekToLast(); a->Valid() || b->Valid();
         a->Prev(), b->Prev(), m++) {
      err = Driver::CompareIterPos(a.get(), b.get());
      if (!err.empty()) {
        return "backward scan cf" + std::to_string(cf) + " entry " +
               std::to_string(m) + ": " + err;
      }
    }
    if (m != n) return "backward scan saw " + std::to_string(m);
  }
  return "";
}

}  // namespace diff

namespace {

using diff::BaseOptions;
using diff::CompareScans;
using diff::Config;
using diff::Db;
using diff::Driver;
using diff::FlintFactory;
using diff::kChunkSize;
using diff::Key;
using diff::kPoolSize;
using diff::kWriteBufferSize;
using diff::Pair;
using rocks::PoolSession;
using rocksdb::ReadOptions;
using rocksdb::WriteOptions;
using test::TempDir;

struct DiffParam {
  uint64_t seed;
  bool concurrent;
  bool hint;
};

// Stable test names in ctest (gtest would print the struct's bytes).
void PrintTo(const DiffParam& p, std::ostream* os) {
  *os << "seed " << p.seed << (p.concurrent ? " concurrent" : " serial")
      << (p.hint ? " hint" : "");
}

class DifferentialTest : public ::testing::TestWithParam<DiffParam> {};

TEST_P(DifferentialTest, RandomOps) {
  const DiffParam p = GetParam();
  Config cfg;
  cfg.concurrent = p.concurrent;
  cfg.hint = p.hint;
  Pair pair("single", cfg);
  ASSERT_TRUE(pair.Open().ok());
  const int steps = test::SanitizerBuild() ? 4000 : 12000;
  {
    Driver d(&pair, p.seed, 0, 3000);
    for (int i = 0; i < steps; i++) {
      std::string err = d.Step(/*allow_reopen=*/true);
      ASSERT_EQ("", err) << "seed " << p.seed << " step " << i;
    }
    // A snapshot taken now must keep reading the same after more writes,
    // flushes and compactions.
    const rocksdb::Snapshot* rs = pair.ref().db->GetSnapshot();
    const rocksdb::Snapshot* fs = pair.flint().db->GetSnapshot();
    size_t before = 0;
    ASSERT_EQ("", CompareScans(&pair, rs, fs, &before));
    for (int i = 0; i < 500; i++) ASSERT_EQ("", d.Write(8));
    for (int cf = 0; cf < pair.num_cfs(); cf++) {
      ASSERT_TRUE(pair.flint().db->Flush({}, pair.flint().cfs[cf]).ok());
      ASSERT_TRUE(pair.ref().db->Flush({}, pair.ref().cfs[cf]).ok());
    }
    ASSERT_EQ("", CompareScans(&pair, rs, fs));
    pair.ref().db->ReleaseSnapshot(rs);
    pair.flint().db->ReleaseSnapshot(fs);
    size_t entries = 0;
    ASSERT_EQ("", CompareScans(&pair, nullptr, nullptr, &entries));
    EXPECT_GT(entries, 100u);
  }
  // Memtables filled up and were switched and flushed by RocksDB itself
  // (as often as the default memtable's, 1-2 times, now that usage counts
  // what nodes use rather than whole per-thread chunks).
  EXPECT_GT(pair.flint().flushes->auto_.load(), 0);
  EXPECT_GT(pair.flint().SstFiles(), 0);
  // Close and reopen once more: everything was flushed on close.
  pair.Close();
  ASSERT_TRUE(pair.Open().ok());
  ASSERT_EQ("", CompareScans(&pair));
}

INSTANTIATE_TEST_SUITE_P(
    Seeds, DifferentialTest,
    ::testing::Values(DiffParam{1, true, false}, DiffParam{2, false, false},
                      DiffParam{3, true, true}, DiffParam{4, false, true},
                      DiffParam{5, true, false}),
    [](const ::testing::TestParamInfo<DiffParam>& info) {
      return "seed" + std::to_string(info.param.seed) +
             (info.param.concurrent ? "_concurrent" : "_serial") +
             (info.param.hint ? "_hint" : "");
    });

// 4 writer threads on disjoint key ranges of both DBs, with reads of their
// own keys (which only they write) compared while the others write; then
// full scans. Exercises InsertKeyConcurrently and flushes under load.
void RunThreads(const Config& cfg, const std::string& tag, int steps,
                int min_auto_flushes) {
  {
    Pair pair(tag, cfg);
    ASSERT_TRUE(pair.Open().ok());
    constexpr int kThreads = 4;
    constexpr int kRange = 1000;
    std::vector<std::string> errors(kThreads);
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
      // A writer that waits for pool space forever would hang the test:
      // after 30 s, print the pool's state to help diagnose it.
      for (int i = 0; i < 300 && !done; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (done) return;
      std::shared_ptr<PoolSession> h;
      PoolSession::Open(pair.pool_dir(), 0, kChunkSize, &h);
      auto* pool = h->pool();
      std::fprintf(
          stderr, "pool state after 30 s: in use %llu free %llu reserve %llu\n",
          (unsigned long long)pool->BytesInUse(),
          (unsigned long long)pool->ApproxFreeBytes(),
          (unsigned long long)pool->reserve_bytes());
      for (auto* l : pool->Lists()) {
        auto chunks = pool->ChunksOf(l->list_id);
        uint64_t b = 0;
        for (auto& c : chunks) b += c.len;
        std::fprintf(stderr, "  list %llu state %u chunks %zu bytes %llu\n",
                     (unsigned long long)l->list_id, pmem::StateOf(*l),
                     chunks.size(), (unsigned long long)b);
      }
    });
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
      threads.emplace_back([&, t] {
        Driver d(&pair, 100 + t, t * kRange, (t + 1) * kRange);
        d.set_restricted();
        for (int i = 0; i < steps && errors[t].empty(); i++) {
          int r = d.Rand(100);
          std::string err;
          if (r < 60) {
            err = d.Write(r < 45 ? 1 : 10);
          } else if (r < 80) {
            err = d.CompareGet();
          } else if (r < 88) {
            err = d.CompareMultiGet();
          } else if (r < 95) {
            err = d.CompareIterWalk();
          } else if (r < 98) {
            d.TakeSnapshot();
          } else if (t == 0) {
            d.Flush();
          }
          if (!err.empty()) {
            errors[t] = "thread " + std::to_string(t) + " step " +
                        std::to_string(i) + ": " + err;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    done = true;
    watchdog.join();
    for (auto& e : errors) EXPECT_EQ("", e);
    // Iterator walks above were restricted to the thread's own range only
    // through random keys; compare everything now that writers are done.
    ASSERT_EQ("", CompareScans(&pair));
    EXPECT_GE(pair.flint().flushes->auto_.load(), min_auto_flushes);
    pair.Close();
    ASSERT_TRUE(pair.Open().ok());
    ASSERT_EQ("", CompareScans(&pair));
  }
}

TEST(DifferentialConcurrentTest, FourWritersDisjointRanges) {
  for (bool concurrent : {true, false}) {
    Config cfg;
    cfg.concurrent = concurrent;
    // Memtable usage counts what nodes use (not whole per-thread chunks),
    // so the 1500 steps of a sanitizer build fill the memtable once or
    // twice.
    RunThreads(cfg, concurrent ? "mt_conc" : "mt_serial",
               test::SanitizerBuild() ? 1500 : 5000,
               test::SanitizerBuild() ? 1 : 3);
  }
}

// A pool smaller than what RocksDB may keep in memtables (3 CFs x 4
// memtables x 1 MiB, plus libpmemobj's overhead, > 16 MiB): writes may hit
// the pool's reserve, the adapter then asks for memtable switches and waits
// for flushes; results must not change. (At 12 MiB libpmemobj refuses 64 KiB
// chunks while the pool is mostly free and writers wait forever.)
TEST(DifferentialConcurrentTest, SmallPoolUnderPressure) {
  Config cfg;
  cfg.pool_size = 16 << 20;
  cfg.write_buffer_size = 1 << 20;
  RunThreads(cfg, "pressure", test::SanitizerBuild() ? 1500 : 5000, 0);
}

// Two FlintKV DBs in one process, each with its own pool, written
// interleaved (and a reopen of one while the other stays open).
TEST(DifferentialTwoDbTest, TwoPoolsInOneProcess) {
  Config cfg;
  Pair a("two_a", cfg), b("two_b", cfg);
  ASSERT_TRUE(a.Open().ok());
  ASSERT_TRUE(b.Open().ok());
  ASSERT_NE(a.pool_dir(), b.pool_dir());
  {
    Driver da(&a, 7, 0, 2000), db(&b, 8, 0, 2000);
    const int steps = test::SanitizerBuild() ? 2000 : 6000;
    for (int i = 0; i < steps; i++) {
      ASSERT_EQ("", da.Step(false)) << "a step " << i;
      ASSERT_EQ("", db.Step(false)) << "b step " << i;
      if (i == steps / 2) {
        da.ReleaseAllSnapshots();
        a.Close();
        ASSERT_TRUE(a.Open().ok());
      }
    }
  }
  ASSERT_EQ("", CompareScans(&a));
  ASSERT_EQ("", CompareScans(&b));
  EXPECT_GT(a.flint().flushes->total.load(), 0);
  EXPECT_GT(b.flint().flushes->total.load(), 0);
}

// A tailing iterator keeps its memtable iterator across Seeks and must see
// writes made after it was created (SkipListRep does).
TEST(DifferentialIteratorTest, TailingIteratorSeesNewWrites) {
  Config cfg;
  cfg.num_cfs = 1;
  Pair pair("tail", cfg);
  ASSERT_TRUE(pair.Open().ok());
  WriteOptions wo;
  wo.disableWAL = true;
  for (Db* d : {&pair.ref(), &pair.flint()}) {
    ASSERT_TRUE(d->db->Put(wo, "a", "1").ok());
  }
  ReadOptions ro;
  ro.tailing = true;
  std::unique_ptr<rocksdb::Iterator> a(pair.ref().db->NewIterator(ro));
  std::unique_ptr<rocksdb::Iterator> b(pair.flint().db->NewIterator(ro));
  for (int i = 0; i < 50; i++) {
    std::string k = Key(i * 3);
    for (Db* d : {&pair.ref(), &pair.flint()}) {
      ASSERT_TRUE(d->db->Put(wo, k, "v" + std::to_string(i)).ok());
    }
    a->Seek(k);
    b->Seek(k);
    ASSERT_EQ("", Driver::CompareIterPos(a.get(), b.get())) << "i=" << i;
    ASSERT_TRUE(b->Valid());
    a->SeekToFirst();
    b->SeekToFirst();
    size_t n = 0;
    for (; a->Valid() || b->Valid(); a->Next(), b->Next(), n++) {
      ASSERT_EQ("", Driver::CompareIterPos(a.get(), b.get()));
    }
    EXPECT_EQ(static_cast<size_t>(i + 2), n);
  }
}

// Many memtables are created, flushed and destroyed: the pool's live lists
// and bytes stay bounded, and nothing is left once the DB is closed.
TEST(FlintPoolTest, PoolStaysBoundedOverManyFlushes) {
  TempDir dir("bounded");
  const std::string pool_dir = dir.path() + "/pool";
  Config cfg;
  rocksdb::Options o = BaseOptions(cfg);
  o.memtable_factory = FlintFactory(pool_dir);
  std::shared_ptr<PoolSession> handle;
  ASSERT_TRUE(PoolSession::Open(pool_dir, kPoolSize, kChunkSize, &handle).ok());
  pmem::Pool* pool = handle->pool();
  const uint64_t initial = pool->BytesInUse();
  Db db;
  ASSERT_TRUE(db.Open(dir.path() + "/db", o, cfg.num_cfs).ok());
  WriteOptions wo;
  wo.disableWAL = true;
  std::mt19937_64 rng(42);
  const int rounds = test::SanitizerBuild() ? 20 : 60;
  const size_t kValue = 1000;
  size_t max_lists = 0;
  uint64_t max_bytes = 0, written = 0;
  // Live memtables: per CF one mutable + (max_write_buffer_number - 1)
  // immutable, plus one being created during a switch.
  const size_t list_bound = cfg.num_cfs * o.max_write_buffer_number + 1;
  // Each holds at most ~write_buffer_size plus one chunk per writer plus
  // one big node of slack.
  const uint64_t byte_bound =
      list_bound * (kWriteBufferSize + 4 * kChunkSize) + (1 << 20);
  for (int round = 0; round < rounds; round++) {
    for (int i = 0; i < 1000; i++) {
      std::string v(kValue, static_cast<char>('a' + rng() % 26));
      int cf = static_cast<int>(rng() % cfg.num_cfs);
      ASSERT_TRUE(
          db.db->Put(wo, db.cfs[cf], Key(static_cast<int>(rng() % 20000)), v)
              .ok());
      written += kValue;
    }
    size_t lists = pool->Lists().size();
    uint64_t bytes = pool->BytesInUse() - initial;
    max_lists = std::max(max_lists, lists);
    max_bytes = std::max(max_bytes, bytes);
    ASSERT_LE(lists, list_bound) << "round " << round;
    ASSERT_LE(bytes, byte_bound) << "round " << round;
  }
  EXPECT_GT(written, 4 * byte_bound / 3);
  EXPECT_GT(db.flushes->auto_.load(), 20);
  db.Close();
  o.memtable_factory.reset();
  // Everything was flushed on close, so every list was dropped.
  EXPECT_EQ(0u, pool->Lists().size());
  EXPECT_EQ(initial, pool->BytesInUse());
  handle.reset();
  // And the pool file, opened afresh, agrees.
  PoolOptions po;
  po.path = PoolSession::PoolPath(pool_dir);
  po.create_if_missing = false;
  po.info_log = [](const std::string&) {};
  std::unique_ptr<pmem::Pool> reopened;
  ASSERT_TRUE(pmem::Pool::Open(po, &reopened).ok());
  EXPECT_EQ(0u, reopened->Lists().size());
  std::printf(
      "pool bound: max %zu lists, max %llu KiB in use, %llu KiB "
      "written, %d auto flushes\n",
      max_lists, static_cast<unsigned long long>(max_bytes >> 10),
      static_cast<unsigned long long>(written >> 10), db.flushes->auto_.load());
}

}  // namespace
}  // namespace flintkv

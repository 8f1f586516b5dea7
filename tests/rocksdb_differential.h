// The differential harness for the "flintkv" memtable: a reference DB
// (RocksDB's default skiplist) and a FlintKV DB (WAL off) in a Pair, and a
// Driver that sends both the same randomized operation stream and checks
// that every read, iterator step and full scan agrees. Used by
// rocksdb_differential_test.cc.
#pragma once

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
#include "tests/append_operator.h"
#include "tests/single_delete_model.h"
#include "tests/test_util.h"

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
}  // namespace flintkv

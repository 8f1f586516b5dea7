// SingleDelete results that depend on flush points, and the model that keeps
// the differential tests away from them (tests/rocksdb/single_delete_model.h).
//
// The differential tests send one operation stream to two DBs whose
// memtables fill, and so flush, at different points; an operation whose
// result depends on the flush points makes them differ without a bug in
// either. Plain RocksDB (default memtable) is enough to show it.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "tests/rocksdb/append_operator.h"
#include "tests/rocksdb/single_delete_model.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

enum Op { kPut, kMerge, kDelete, kSingleDelete, kDeleteRange, kNumOps };
const char* const kOpNames[] = {"Put", "Merge", "Delete", "SingleDelete",
                                "DeleteRange"};

// A DB with the default memtable, flushed only when asked.
class PlainDb {
 public:
  explicit PlainDb(const std::string& tag) : dir_(tag) {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.disable_auto_compactions = true;  // compactions only when asked
    o.merge_operator = std::make_shared<test::AppendOperator>();
    rocksdb::Status s = rocksdb::DB::Open(o, dir_.path(), &db_);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~PlainDb() {
    if (db_) {
      EXPECT_TRUE(db_->Close().ok());
      delete db_;
    }
  }
  rocksdb::DB* db() { return db_; }

  void Apply(Op op, const std::string& k, const std::string& v) {
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    rocksdb::Status s;
    switch (op) {
      case kPut:
        s = db_->Put(wo, k, v);
        break;
      case kMerge:
        s = db_->Merge(wo, db_->DefaultColumnFamily(), k, v);
        break;
      case kDelete:
        s = db_->Delete(wo, k);
        break;
      case kSingleDelete:
        s = db_->SingleDelete(wo, k);
        break;
      default:  // the range [k, k + '\0') holds k only
        s = db_->DeleteRange(wo, db_->DefaultColumnFamily(), k,
                             k + std::string(1, '\0'));
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void Flush() { ASSERT_TRUE(db_->Flush({}).ok()); }
  void CompactAll() {
    ASSERT_TRUE(db_->CompactRange({}, nullptr, nullptr).ok());
  }
  std::optional<std::string> Get(const std::string& k,
                                 const rocksdb::Snapshot* snap = nullptr) {
    rocksdb::ReadOptions ro;
    ro.snapshot = snap;
    std::string v;
    rocksdb::Status s = db_->Get(ro, k, &v);
    EXPECT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
    if (!s.ok()) return std::nullopt;
    return v;
  }

 private:
  test::TempDir dir_;
  rocksdb::DB* db_ = nullptr;
};

std::string Show(const std::optional<std::string>& v) {
  return v ? "'" + *v + "'" : "NotFound";
}

// The history behind the differential tests' flaky failure ("forward scan
// cf1 entry 546: ref at k01082 flint at k01083": k01082 got Put, Put, Put,
// Delete, Put, SingleDelete). Its result depends on whether the first Put
// was in an SST file when the rest was flushed: RocksDB drops the
// SingleDelete and the second Put as a pair, then the Delete as hidden, and
// v1 comes back. The model never issues this SingleDelete.
TEST(RocksdbSingleDeleteTest, PutDeletePutSingleDeleteDependsOnFlushPoint) {
  PlainDb early("sd_early"), late("sd_late");
  test::SingleDeleteModel model;
  for (PlainDb* d : {&early, &late}) d->Apply(kPut, "k", "v1");
  model.Put();
  early.Flush();  // v1 in an SST file before the rest is written
  for (PlainDb* d : {&early, &late}) {
    d->Apply(kDelete, "k", "");
    d->Apply(kPut, "k", "v2");
  }
  model.Delete();
  model.Put();
  EXPECT_FALSE(model.CanSingleDelete());
  for (PlainDb* d : {&early, &late}) {
    d->Apply(kSingleDelete, "k", "");
    d->Flush();
  }
  // RocksDB 7.8.3's behaviour (undefined by its documentation). If this
  // changes, the model may allow SingleDelete after a Delete again.
  EXPECT_EQ(std::optional<std::string>("v1"), early.Get("k"));
  EXPECT_EQ(std::nullopt, late.Get("k"));
}

// Every history of kLen operations on one key in which the model allows
// each SingleDelete, under every choice of flush points (after any
// operation): reads equal what a plain map gives, before and after a full
// compaction. One DB per flush schedule, one key per history.
TEST(RocksdbSingleDeleteTest, ModelAllowsOnlyFlushIndependentHistories) {
  constexpr int kLen = 5;
  struct History {
    std::string key;
    std::vector<Op> ops;
  };
  std::vector<History> histories;
  int total = 1;
  for (int i = 0; i < kLen; i++) total *= kNumOps;
  int with_single_delete = 0;
  for (int code = 0; code < total; code++) {
    History h;
    test::SingleDeleteModel model;
    bool allowed = true, has_sd = false;
    for (int i = 0, c = code; i < kLen; i++, c /= kNumOps) {
      Op op = static_cast<Op>(c % kNumOps);
      h.ops.push_back(op);
      switch (op) {
        case kPut:
          model.Put();
          break;
        case kMerge:
          model.Merge();
          break;
        case kDelete:
          model.Delete();
          break;
        case kSingleDelete:
          allowed = allowed && model.CanSingleDelete();
          model.SingleDelete();
          has_sd = true;
          break;
        default:
          model.DeleteRange();
      }
    }
    if (!allowed) continue;
    with_single_delete += has_sd;
    h.key = "h" + std::to_string(code);
    histories.push_back(h);
  }
  // The model still lets SingleDelete through in many histories, e.g.
  // Put, SingleDelete, Delete, Put, SingleDelete.
  EXPECT_GT(with_single_delete, 50);

  // What a plain map holds after the first n operations of each history.
  auto expect = [](const History& h, int n) {
    std::optional<std::string> v;
    for (int i = 0; i < n; i++) {
      std::string x = "v" + std::to_string(i);
      if (h.ops[i] == kPut) {
        v = x;
      } else if (h.ops[i] == kMerge) {
        v = v ? *v + "," + x : x;
      } else {
        v.reset();
      }
    }
    return v;
  };

  // snap_at: a snapshot is taken after that many operations (none if 0) and
  // held over the flushes and one full compaction (snapshot stripes).
  for (int snap_at : {0, 2, 4}) {
    for (int flushes = 0; flushes < (1 << kLen); flushes++) {
      PlainDb db("sd_model");
      const rocksdb::Snapshot* snap = nullptr;
      for (int i = 0; i < kLen; i++) {
        for (const History& h : histories) {
          db.Apply(h.ops[i], h.key, "v" + std::to_string(i));
        }
        if (flushes & (1 << i)) db.Flush();
        if (i + 1 == snap_at) snap = db.db()->GetSnapshot();
      }
      // Latest, then at the snapshot; after 0, 1 and 2 full compactions
      // (the snapshot is released before the second).
      for (int compactions = 0; compactions < 3; compactions++) {
        if (compactions > 0) db.CompactAll();
        if (compactions == 1 && snap) {
          db.db()->ReleaseSnapshot(snap);
          snap = nullptr;
        }
        for (const History& h : histories) {
          std::vector<const rocksdb::Snapshot*> reads = {nullptr};
          if (snap) reads.push_back(snap);
          for (const rocksdb::Snapshot* at : reads) {
            std::optional<std::string> got = db.Get(h.key, at);
            std::optional<std::string> want = expect(h, at ? snap_at : kLen);
            if (got == want) continue;
            std::string ops;
            for (int i = 0; i < kLen; i++) {
              ops += std::string(i ? ", " : "") + kOpNames[h.ops[i]] +
                     ((flushes & (1 << i)) ? " [flush]" : "") +
                     (i + 1 == snap_at ? " [snapshot]" : "");
            }
            FAIL() << ops << ", " << compactions << " full compactions, read "
                   << (at ? "at the snapshot" : "latest") << ": got "
                   << Show(got) << ", a map holds " << Show(want);
          }
        }
      }
      if (snap) db.db()->ReleaseSnapshot(snap);
    }
  }
}

}  // namespace
}  // namespace flintkv

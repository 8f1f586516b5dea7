// Recovery straight into SST files (recovery/sst_ingest.h): every crash
// window the ingestion opens, and the folding of a key's entries, checked
// against the memtable path (RecoveryOptions::ingest_sst = false) and
// against values written out by hand. Same style as
// rocksdb_acknowledged_writes_test.cc: a child writes and SIGKILLs itself, or
// dies at a FLINTKV_CRASH_POINT (or inside RocksDB's ingestion, through a
// FileSystem that kills the process), so what was acknowledged before the crash
// is known exactly.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "flintkv/recovery.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/merge_operator.h"
#include "tests/recovery/rocksdb_scenario.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

using test::BaseOptions;
using test::Check;
using test::DbDir;
using test::Die;
using test::Key;
using test::PlainOptions;
using test::Register;
using test::Ro;
using test::RunChild;

// "a" then "b" merge to "a+b"; no PartialMerge, so operands without a base
// cannot be folded into one entry (the memtable path takes them).
class FullOnlyOperator : public rocksdb::MergeOperator {
 public:
  bool FullMergeV2(const MergeOperationInput& in,
                   MergeOperationOutput* out) const override {
    out->new_value = in.existing_value ? in.existing_value->ToString() : "";
    for (const rocksdb::Slice& op : in.operand_list) {
      if (!out->new_value.empty()) out->new_value += "+";
      out->new_value += op.ToString();
    }
    return true;
  }
  const char* Name() const override { return "FlintTestFullOnly"; }
};

rocksdb::Options FullOnlyOptions() {
  rocksdb::Options o = BaseOptions();
  o.merge_operator = std::make_shared<FullOnlyOperator>();
  return o;
}

std::vector<rocksdb::ColumnFamilyDescriptor> Cfs() {
  return {{"default", BaseOptions()}, {"g", FullOnlyOptions()}};
}

// Merges with and without a base: operands only (no base anywhere),
// operands over a base in an SST file, a Put and a Delete with a newer
// operand in the same memtable. Without the SST file ("merges_only"), the
// recovery's file overlaps nothing in the DB, which RocksDB would ingest
// at sequence number 0 unless forced to give it one.
void Merges(const std::string& d, bool sst) {
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  if (sst) {
    Check(db->Put(wo, "base", "B"), "put");
    Check(db->Flush(rocksdb::FlushOptions()), "flush");
  }
  for (int op = 0; op < 3; op++) {
    for (int i = 0; i < 50; i++) {
      Check(db->Merge(wo, Key(i), std::to_string(op)), "merge");
    }
  }
  Check(db->Merge(wo, "base", "x"), "merge");
  Check(db->Merge(wo, "base", "y"), "merge");
  Check(db->Put(wo, "p", "p0"), "put");
  Check(db->Merge(wo, "p", "p1"), "merge");
  Check(db->Delete(wo, "d"), "delete");
  Check(db->Merge(wo, "d", "d1"), "merge");
  Die();
}
Register m1("merges", [](const std::string& d) { Merges(d, true); });
Register m5("merges_only", [](const std::string& d) { Merges(d, false); });

// FLINTKV_CRASH_POINT (set by the parent) kills this recovery.
Register m2("recover_crash", [](const std::string& d) {
  RecoverDB(BaseOptions(), DbDir(d), {}, Ro(d), nullptr);
  std::abort();  // the crash point must have fired
});
Register m2b("recover_crash_memtable_path", [](const std::string& d) {
  RecoveryOptions ro = Ro(d);
  ro.ingest_sst = false;
  RecoverDB(BaseOptions(), DbDir(d), {}, ro, nullptr);
  std::abort();
});

// Kills the process inside RocksDB's ingestion: right after the first
// hard link into the DB directory, before the MANIFEST records the file.
class KillAfterLinkFs : public rocksdb::FileSystemWrapper {
 public:
  using rocksdb::FileSystemWrapper::FileSystemWrapper;
  const char* Name() const override { return "KillAfterLinkFs"; }
  rocksdb::IOStatus LinkFile(const std::string& s, const std::string& t,
                             const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus st = target()->LinkFile(s, t, o, dbg);
    if (st.ok()) Die();
    return st;
  }
};
Register m3("recover_crash_in_ingest", [](const std::string& d) {
  auto fs = std::make_shared<KillAfterLinkFs>(rocksdb::FileSystem::Default());
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  rocksdb::Options o = BaseOptions();
  o.env = env.get();
  RecoverDB(o, DbDir(d), {}, Ro(d), nullptr);
  std::abort();  // the link must have happened
});

// Two unflushed memtables per column family, so keys have entries in both
// lists, with every entry type: folds across lists, fallbacks (SingleDelete,
// PutEntity, operands "g" cannot combine), hidden older entries.
//
// The child must write the same every time (SameDatabaseAsMemtablePath
// compares databases of different runs), so the memtable switch is made
// at a fixed point, not where the fill crosses write_buffer_size: that
// point moves with the memtable's ApproximateMemoryUsage, which depends on
// which CPUs the writer ran on (RocksDB's ConcurrentArena, which holds the
// index, carves per-CPU shard blocks, as NodeArena once did for the
// nodes). A writer moved to another CPU mid-fill
// switched one Put later, and the run held one more key. With background
// work paused, a Flush that does not wait switches the memtable and never
// flushes it. The fill stays far below write_buffer_size; both counts are
// checked, so a switch anywhere else aborts the child.
constexpr int kFillKeys = 2000;
void FillAndSwitch(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  for (int i = 0; i < kFillKeys; i++) {
    Check(db->Put(wo, cf, Key(i), std::string(100, 'f')), "fill");
  }
  uint64_t n = 1;
  db->GetIntProperty(cf, "rocksdb.num-immutable-mem-table", &n);
  if (n != 0) std::abort();
  rocksdb::FlushOptions fo;
  fo.wait = false;
  fo.allow_write_stall = true;
  Check(db->Flush(fo, cf), "switch");
  db->GetIntProperty(cf, "rocksdb.num-immutable-mem-table", &n);
  if (n != 1) std::abort();
}
void Writes(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, int list) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  std::string l = std::to_string(list);
  Check(db->Merge(wo, cf, "mm", "m" + l), "mm");  // operands in both lists
  Check(db->Merge(wo, cf, "mm", "n" + l), "mm");
  if (list == 1) {
    Check(db->Put(wo, cf, "pm", "p"), "pm");  // Put, then a Merge in list 2
    Check(db->Put(wo, cf, "sd", "s"), "sd");  // Put, then SingleDelete
    Check(db->Put(wo, cf, "pd", "p"), "pd");  // Put, then Delete
    Check(db->PutEntity(wo, cf, "ep", {{"c", "1"}}), "ep");  // then a Put
    Check(db->Put(wo, cf, "hidden", "old"), "hidden");
    Check(db->Put(wo, cf, "hidden", "new"), "hidden");
    Check(db->Delete(wo, cf, "dm"), "dm");  // Delete, then a Merge
  } else {
    Check(db->Merge(wo, cf, "pm", "m"), "pm");
    Check(db->SingleDelete(wo, cf, "sd"), "sd");
    Check(db->Delete(wo, cf, "pd"), "pd");
    Check(db->Put(wo, cf, "ep", "put"), "ep");
    Check(db->PutEntity(wo, cf, "e", {{"c1", "v1"}, {"c2", "v2"}}), "e");
    Check(db->Merge(wo, cf, "dm", "m"), "dm");
    Check(db->Merge(wo, cf, "one", "o"), "one");  // a single operand
  }
}
Register m4("two_lists_all_types", [](const std::string& d) {
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = Cfs();
  for (auto& cf : cfs) {
    cf.options.memtable_factory = test::Factory(d);
    cf.options.write_buffer_size = 4 << 20;
    cf.options.max_write_buffer_number = 4;
  }
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), cfs, &h, &db), "open");
  Check(db->PauseBackgroundWork(), "pause");  // no flush, no compaction
  for (auto* cf : h) {
    Writes(db, cf, 1);
    FillAndSwitch(db, cf);
    Writes(db, cf, 2);
  }
  Die();
});

Register m6("recover_crash_two_cfs", [](const std::string& d) {
  RecoverDB(BaseOptions(), DbDir(d), Cfs(), Ro(d), nullptr);
  std::abort();  // the crash point must have fired
});

const int kChild = test::RunScenarioIfChild();

// The keys on which two dumps differ (at most 10), for failure messages: a
// whole dump is too long for gtest to print.
std::string DiffKeys(const std::map<std::string, std::string>& a,
                     const std::map<std::string, std::string>& b) {
  std::string out;
  int shown = 0;
  auto note = [&](const std::string& k, const std::string* x,
                  const std::string* y) {
    if (shown++ < 10) {
      out += "\n  " + k + ": " + (x ? "\"" + *x + "\"" : "<absent>") + " vs " +
             (y ? "\"" + *y + "\"" : "<absent>");
    }
  };
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end()) {
      note(k, &v, nullptr);
    } else if (it->second != v) {
      note(k, &v, &it->second);
    }
  }
  for (const auto& [k, v] : b) {
    if (!a.count(k)) note(k, nullptr, &v);
  }
  return std::to_string(shown) + " keys differ" + out;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

class SstRecoveryCrashTest : public test::ScenarioTest {
 protected:
  std::string TmpDir() { return DbDir(dir_) + "/flintkv_recovery"; }

  // Recovers, checks the "merges" scenario's values and that the SST
  // directory is gone.
  void RecoverAndCheckMerges(bool sst = true) {
    RecoveryReport rep;
    rocksdb::Status s =
        RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), &rep);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_FALSE(Exists(TmpDir()));
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
    for (int i = 0; i < 50; i++) EXPECT_EQ(Get(db, Key(i)), "0,1,2") << i;
    EXPECT_EQ(Get(db, "base"), sst ? "B,x,y" : "x,y");
    EXPECT_EQ(Get(db, "p"), "p0,p1");
    EXPECT_EQ(Get(db, "d"), "d1");
    delete db;
  }

  // Every key and value of every column family ("g" entities included).
  std::map<std::string, std::string> Dump(const std::string& dir) {
    std::vector<rocksdb::ColumnFamilyHandle*> h;
    rocksdb::DB* db = nullptr;
    std::map<std::string, std::string> out;
    rocksdb::Status s =
        rocksdb::DB::Open(BaseOptions(), DbDir(dir), Cfs(), &h, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return out;
    for (auto* cf : h) {
      std::unique_ptr<rocksdb::Iterator> it(
          db->NewIterator(rocksdb::ReadOptions(), cf));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        std::string v;
        for (const auto& c : it->columns()) {
          v += c.name().ToString() + "=" + c.value().ToString() + ";";
        }
        out[cf->GetName() + ":" + it->key().ToString()] = v;
      }
      EXPECT_TRUE(it->status().ok());
    }
    for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
    delete db;
    return out;
  }
};

// Killed after the SST files are written, before the ingestion: nothing of
// them is in the DB, the files are left behind and removed by the next
// recovery, which replays everything once.
TEST_F(SstRecoveryCrashTest, KilledBeforeIngestReplaysOnce) {
  ASSERT_NO_FATAL_FAILURE(RunChild("merges", dir_));
  ASSERT_NO_FATAL_FAILURE(
      RunChild("recover_crash", dir_, "recovery_before_ingest"));
  EXPECT_TRUE(Exists(TmpDir() + "/cf0.sst"));
  RecoverAndCheckMerges();
}

// Killed after the ingestion, before the copy spans are closed: the next
// recovery closes them at its open sequence and finds every copy inside
// them (P11): no operand is applied twice.
TEST_F(SstRecoveryCrashTest, KilledAfterIngestAppliesMergesOnce) {
  for (bool sst : {true, false}) {
    SCOPED_TRACE(sst ? "over an SST file" : "into an empty DB");
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild(sst ? "merges" : "merges_only", dir_));
    ASSERT_NO_FATAL_FAILURE(
        RunChild("recover_crash", dir_, "recovery_after_ingest"));
    RecoverAndCheckMerges(sst);
  }
}

// Killed inside RocksDB's ingestion (file linked into the DB, MANIFEST not
// written): the file is not part of the DB; everything is replayed once.
TEST_F(SstRecoveryCrashTest, KilledInsideIngestReplaysOnce) {
  ASSERT_NO_FATAL_FAILURE(RunChild("merges", dir_));
  ASSERT_NO_FATAL_FAILURE(RunChild("recover_crash_in_ingest", dir_));
  RecoverAndCheckMerges();
}

// Killed at each new point and recovered again, twice in a row: each
// interrupted recovery takes a copy span of its own.
TEST_F(SstRecoveryCrashTest, RepeatedInterruptionsAppliesMergesOnce) {
  ASSERT_NO_FATAL_FAILURE(RunChild("merges", dir_));
  for (const char* point : {"recovery_after_ingest", "recovery_before_ingest",
                            "recovery_after_list"}) {
    ASSERT_NO_FATAL_FAILURE(RunChild("recover_crash", dir_, point));
  }
  RecoverAndCheckMerges();
}

// More interrupted recoveries than a list has copy-span slots (P11), by
// either path: the spans are merged, never a dead end, and every Merge
// operand is applied once.
TEST_F(SstRecoveryCrashTest, InterruptedMoreTimesThanSpanSlotsStillRecovers) {
  for (const char* child : {"recover_crash", "recover_crash_memtable_path"}) {
    SCOPED_TRACE(child);
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild("merges", dir_));
    for (int i = 0; i < 7; i++) {
      ASSERT_NO_FATAL_FAILURE(RunChild(child, dir_, "recovery_after_list"))
          << "interruption " << i;
    }
    RecoverAndCheckMerges();
  }
}

// Every entry type, across two lists per column family: the SST path gives
// the same database as the memtable path, and the values a reader expects;
// also when it was interrupted and run again.
TEST_F(SstRecoveryCrashTest, SameDatabaseAsMemtablePath) {
  ASSERT_NO_FATAL_FAILURE(RunChild("two_lists_all_types", dir_));
  const std::string other = dir_ + ".memtable_path";
  std::system(("rm -rf " + other + " && cp -a " + dir_ + " " + other).c_str());
  RecoveryReport sst_rep, mem_rep;
  rocksdb::Status s =
      RecoverDB(BaseOptions(), DbDir(dir_), Cfs(), Ro(dir_), &sst_rep);
  ASSERT_TRUE(s.ok()) << s.ToString();
  RecoveryOptions ro = Ro(other);
  ro.ingest_sst = false;
  s = RecoverDB(BaseOptions(), DbDir(other), Cfs(), ro, &mem_rep);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // One file per column family; the fallback keys: sd, e (both column
  // families) and mm in "g" (two operands without PartialMerge).
  EXPECT_EQ(sst_rep.sst_files, 2u) << sst_rep.ToString();
  EXPECT_EQ(sst_rep.fallback_keys, 5u) << sst_rep.ToString();
  EXPECT_EQ(mem_rep.sst_files, 0u);
  auto a = Dump(dir_);
  auto b = Dump(other);
  EXPECT_TRUE(a == b) << "SST path vs memtable path: " << DiffKeys(a, b);
  std::system(("rm -rf " + other).c_str());
  EXPECT_EQ(a["default:mm"], "=m1,n1,m2,n2;");
  EXPECT_EQ(a["g:mm"], "=m1+n1+m2+n2;");
  EXPECT_EQ(a["default:pm"], "=p,m;");
  EXPECT_EQ(a["g:dm"], "=m;");
  EXPECT_EQ(a["default:ep"], "=put;");
  EXPECT_EQ(a["g:e"], "c1=v1;c2=v2;");
  EXPECT_EQ(a["default:hidden"], "=new;");
  EXPECT_EQ(a["default:one"], "=o;");
  EXPECT_EQ(a.count("default:sd"), 0u);
  EXPECT_EQ(a.count("g:pd"), 0u);
  EXPECT_EQ(a.count(std::string("g:") + Key(0)), 1u);

  // Interrupted before or after its ingestion (with memtable-path copies
  // of the fallback keys) and run again: the same database (the child
  // writes the same every time, FillAndSwitch).
  for (const char* point :
       {"recovery_before_ingest", "recovery_after_ingest"}) {
    SCOPED_TRACE(point);
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild("two_lists_all_types", dir_));
    ASSERT_NO_FATAL_FAILURE(RunChild("recover_crash_two_cfs", dir_, point));
    s = RecoverDB(BaseOptions(), DbDir(dir_), Cfs(), Ro(dir_), &sst_rep);
    ASSERT_TRUE(s.ok()) << s.ToString();
    b = Dump(dir_);
    EXPECT_TRUE(b == a) << "re-run vs first SST recovery: " << DiffKeys(b, a);
  }
}

}  // namespace
}  // namespace flintkv

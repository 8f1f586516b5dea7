// Regression tests for the RocksDB drop-in: every configuration a
// RocksDB user can reach either keeps every acknowledged write or is refused
// at DB::Open with a message naming the option.
//
// Crashes are deterministic scenarios (tests/recovery/rocksdb_scenario.h): a
// child does its writes and then SIGKILLs itself, or dies at a
// FLINTKV_CRASH_POINT, so what was acknowledged before the crash is known
// exactly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "flintkv/inspect.h"
#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/sst_file_writer.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/utilities/stackable_db.h"
#include "rocksdb/version.h"
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
using test::PoolDir;
using test::Register;
using test::Ro;
using test::RunChild;
using test::TwoUnflushedMemtables;

// A comparator with 8-byte user-defined timestamps (none is public in 7.8.3).
class TsComparator : public rocksdb::Comparator {
 public:
  TsComparator() : rocksdb::Comparator(8) {}
  const char* Name() const override { return "AckWritesTs"; }
  int Compare(const rocksdb::Slice& a, const rocksdb::Slice& b) const override {
    return a.compare(b);
  }
  void FindShortestSeparator(std::string*,
                             const rocksdb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}
};

rocksdb::DB* OpenWrapper(const std::string& dir,
                         rocksdb::Options o = BaseOptions()) {
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = OpenDB(o, DbDir(dir), {{"default", o}}, &h, &db, Ro(dir));
  if (!s.ok()) {
    std::fprintf(stderr, "OpenDB: %s\n", s.ToString().c_str());
    std::abort();
  }
  for (auto* cf : h) {
    if (cf != db->DefaultColumnFamily()) db->DestroyColumnFamilyHandle(cf);
  }
  return db;
}

// ---- Child scenarios: write, then die by SIGKILL ----

// Plain factory, WAL off: n puts, then crash.
void PlainPuts(const std::string& dir, int n, bool wal) {
  rocksdb::Options o = PlainOptions(dir);
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(o, DbDir(dir), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = !wal;
  for (int i = 0; i < n; i++) Check(db->Put(wo, Key(i), "v" + Key(i)), "put");
  Die();
}

// A read through the wrapper of a write that RocksDB has published but the
// wrapper has not yet covered by W (written through the base DB, exactly
// the window between RocksDB's LastSequence publish and Publish()).
void ReadAboveW(const std::string& dir, const std::string& how) {
  rocksdb::DB* db = OpenWrapper(dir);
  Check(db->Put(rocksdb::WriteOptions(), "a", "1"), "put");
  auto* base = static_cast<rocksdb::StackableDB*>(db)->GetBaseDB();
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  Check(base->Put(wo, "b", "2"), "base put");
  std::string v;
  if (how == "get") {
    Check(db->Get(rocksdb::ReadOptions(), "b", &v), "get");
  } else if (how == "multiget") {
    std::vector<std::string> vals;
    auto st = db->MultiGet(rocksdb::ReadOptions(), {"b"}, &vals);
    Check(st[0], "multiget");
    v = vals[0];
  } else if (how == "iterator") {
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(rocksdb::ReadOptions()));
    it->Seek("b");
    if (it->Valid()) v = it->value().ToString();
  } else if (how == "snapshot") {
    const rocksdb::Snapshot* snap = db->GetSnapshot();
    rocksdb::ReadOptions ro;
    ro.snapshot = snap;
    Check(db->Get(ro, "b", &v), "snapshot get");
  }
  if (v != "2") std::abort();  // the read saw the write: it must survive
  Die();
}

Register r1("read_get", [](const std::string& d) { ReadAboveW(d, "get"); });
Register r2("read_multiget",
            [](const std::string& d) { ReadAboveW(d, "multiget"); });
Register r3("read_iterator",
            [](const std::string& d) { ReadAboveW(d, "iterator"); });
Register r4("read_snapshot",
            [](const std::string& d) { ReadAboveW(d, "snapshot"); });
Register r5("wrapper_empty", [](const std::string& d) {
  rocksdb::DB* db = OpenWrapper(d);
  Check(db->Put(rocksdb::WriteOptions(), "w", "1"), "put");
  Check(db->Flush(rocksdb::FlushOptions()), "flush");  // memtables empty
  Die();
});
Register r6("plain_puts",
            [](const std::string& d) { PlainPuts(d, 500, false); });
Register r7("plain_merges_wal", [](const std::string& d) {
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  for (int op = 0; op < 3; op++) {
    for (int i = 0; i < 50; i++) {
      Check(db->Merge(rocksdb::WriteOptions(), Key(i), std::to_string(op)),
            "merge");
    }
  }
  Die();
});
Register r8("plain_merges", [](const std::string& d) {
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  for (int op = 0; op < 3; op++) {
    for (int i = 0; i < 50; i++) {
      Check(db->Merge(wo, Key(i), std::to_string(op)), "merge");
    }
  }
  Die();
});
Register r9("recover_crash", [](const std::string& d) {
  // FLINTKV_CRASH_POINT (set by the parent) kills this recovery midway.
  rocksdb::Options o = BaseOptions();
  rocksdb::Status s = RecoverDB(o, DbDir(d), {}, Ro(d), nullptr);
  std::fprintf(stderr, "recovery returned: %s\n", s.ToString().c_str());
  std::abort();  // the crash point must have fired
});
Register r10("ingest", [](const std::string& d) {
  rocksdb::Options o = PlainOptions(d);
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(o, DbDir(d), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  Check(db->Put(wo, "m1", "sst"), "put");
  Check(db->Flush(rocksdb::FlushOptions()), "flush");
  for (int i = 0; i < 100; i++) Check(db->Put(wo, Key(i), "v"), "put");
  // Overlaps the L0 file, not the memtable: ingested into L0 with a global
  // sequence number above half of the memtable's entries, no flush.
  rocksdb::SstFileWriter w(rocksdb::EnvOptions(), o);
  std::string sst = d + "/ext.sst";
  Check(w.Open(sst), "sst open");
  Check(w.Put("m0", "ext"), "sst put");
  Check(w.Put("m2", "ext"), "sst put");
  Check(w.Finish(), "sst finish");
  Check(db->IngestExternalFile({sst}, rocksdb::IngestExternalFileOptions()),
        "ingest");
  for (int i = 100; i < 200; i++) Check(db->Put(wo, Key(i), "v"), "put");
  Die();
});
Register r11("entity", [](const std::string& d) {
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  rocksdb::WideColumns cols{{"c1", "v1"}, {"c2", "v2"}};
  Check(db->PutEntity(wo, db->DefaultColumnFamily(), "e", cols), "entity");
  Die();
});

Register r12("wrapper_delete_range", [](const std::string& d) {
  rocksdb::DB* db = OpenWrapper(d);
  rocksdb::WriteOptions wo;
  for (int i = 0; i < 100; i++) Check(db->Put(wo, Key(i), "v"), "put");
  Check(db->DeleteRange(wo, db->DefaultColumnFamily(), Key(10), Key(20)),
        "delete range");
  rocksdb::WriteBatch b;
  Check(b.Put(Key(5), "b"), "batch put");
  Check(b.DeleteRange(Key(30), Key(40)), "batch range");
  Check(b.Merge(Key(50), "m"), "batch merge");
  Check(db->Write(wo, &b), "write");
  for (int i = 100; i < 110; i++) Check(db->Put(wo, Key(i), "v"), "put");
  Die();
});
Register r13("wrapper_new_cf", [](const std::string& d) {
  rocksdb::DB* db = OpenWrapper(d);
  rocksdb::ColumnFamilyHandle* cf;
  Check(db->CreateColumnFamily(BaseOptions(), "x", &cf), "create cf");
  Check(db->Put(rocksdb::WriteOptions(), cf, "k", "in-x"), "put");
  Die();
});

// Two memtables flushed into one SST file (the newer entry hides the older),
// killed after the install and before MarkFlushed retires either list.
Register r14("flush_two_memtables", [](const std::string& d) {
  // Only the Flush below flushes: one immutable memtable is below
  // min_write_buffer_number_to_merge, and the second stays small.
  setenv("FLINTKV_CRASH_POINT", "flintkv_mark_flushed", 1);
  rocksdb::Options o = PlainOptions(d);
  o.write_buffer_size = 4 << 20;
  o.min_write_buffer_number_to_merge = 2;
  o.max_write_buffer_number = 4;
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(o, DbDir(d), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  Check(db->Put(wo, "k", "old"), "put");
  Check(db->Merge(wo, "m", "1"), "merge");
  uint64_t n = 0;
  for (int i = 0; n == 0 && i < 1000000; i++) {  // until the memtable switches
    Check(db->Put(wo, Key(i), std::string(100, 'f')), "fill");
    db->GetIntProperty("rocksdb.num-immutable-mem-table", &n);
  }
  if (n != 1) std::abort();
  Check(db->Put(wo, "k", "new"), "put");
  Check(db->Merge(wo, "m", "2"), "merge");
  db->Flush(rocksdb::FlushOptions());
  std::abort();  // the crash point must have fired
});

// Two unflushed memtables (an immutable one and the active one), crash.
Register r16("two_unflushed_memtables", [](const std::string& d) {
  TwoUnflushedMemtables(d, 100);
  Die();
});

// A Put in an immutable memtable and its SingleDelete in the active one
// (a flush of both drops the pair, the newest entries), crash.
Register r17("single_delete_pair_two_lists", [](const std::string& d) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  rocksdb::DB* db = TwoUnflushedMemtables(d, 10, [&](rocksdb::DB* db) {
    Check(db->Put(wo, "zzz", "gone"), "put");
  });
  Check(db->SingleDelete(wo, "zzz"), "single delete");  // the newest entry
  Die();
});
Register r18("recover_crash_memtable_path", [](const std::string& d) {
  // As recover_crash, replaying through DB writes (no SST ingestion).
  RecoveryOptions ro = Ro(d);
  ro.ingest_sst = false;
  rocksdb::Status s = RecoverDB(BaseOptions(), DbDir(d), {}, ro, nullptr);
  std::fprintf(stderr, "recovery returned: %s\n", s.ToString().c_str());
  std::abort();  // the crash point must have fired
});

// A Put flushed to SST, then 100 WAL-less Merges on the same key, crash.
Register r15("merges_over_flushed_base", [](const std::string& d) {
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  Check(db->Put(wo, "k", "base"), "put");
  Check(db->Flush(rocksdb::FlushOptions()), "flush");
  for (int i = 0; i < 100; i++) Check(db->Merge(wo, "k", "m"), "merge");
  Die();
});

// Re-executed child: runs the scenario before gtest's main.
const int kChild = test::RunScenarioIfChild();

class AcknowledgedWritesTest : public test::ScenarioTest {
 protected:
  // Offline recovery with stock-like options, then an open without the
  // plugin (what stock ldb / db_bench would see).
  rocksdb::DB* RecoverAndOpen(rocksdb::Options o = BaseOptions(),
                              RecoveryOptions ro = RecoveryOptions()) {
    if (ro.memtable.pool_dir.empty()) ro = Ro(dir_);
    RecoveryReport rep;
    rocksdb::Status s = RecoverDB(o, DbDir(dir_), {}, ro, &rep);
    EXPECT_TRUE(s.ok()) << s.ToString();
    rocksdb::DB* db = nullptr;
    s = rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return db;
  }
};

// 8a: a read through OpenDB's wrapper never returns what recovery drops.
TEST_F(AcknowledgedWritesTest, WrapperReadsSurviveCrash) {
  for (const char* how :
       {"read_get", "read_multiget", "read_iterator", "read_snapshot"}) {
    SCOPED_TRACE(how);
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild(how, dir_));
    rocksdb::DB* db = OpenWrapper(dir_);
    EXPECT_EQ(Get(db, "a"), "1");
    EXPECT_EQ(Get(db, "b"), "2") << "a read returned it before the crash";
    delete db;
  }
}

// 8b: a wrapper that crashed with empty memtables leaves no watermark that
// filters a later plain-factory run.
TEST_F(AcknowledgedWritesTest, StaleWatermarkDoesNotDropPlainWrites) {
  ASSERT_NO_FATAL_FAILURE(RunChild("wrapper_empty", dir_));
  ASSERT_NO_FATAL_FAILURE(RunChild("plain_puts", dir_));
  rocksdb::DB* db = RecoverAndOpen();
  ASSERT_NE(db, nullptr);
  for (int i = 0; i < 500; i++) ASSERT_EQ(Get(db, Key(i)), "v" + Key(i)) << i;
  EXPECT_EQ(Get(db, "w"), "1");
  delete db;
}

// 8c, 8g, section 2 (MemPurge): options that would bypass persistence are
// refused at DB::Open with a message naming the option.
struct RefusedCase {
  const char* option;
  std::function<void(rocksdb::Options*)> set;
};
std::vector<RefusedCase> RefusedCases() {
  return {
    {"inplace_update_support",
     [](rocksdb::Options* o) { o->inplace_update_support = true; }},
        {"inplace_callback",
         [](rocksdb::Options* o) {
           o->inplace_callback = [](char*, uint32_t*, rocksdb::Slice,
                                    std::string*) {
             return rocksdb::UpdateStatus::UPDATE_FAILED;
           };
         }},
        {"unordered_write",
         [](rocksdb::Options* o) { o->unordered_write = true; }},
        {"experimental_mempurge_threshold",
         [](rocksdb::Options* o) { o->experimental_mempurge_threshold = 1.0; }},
        {"avoid_flush_during_shutdown",
         [](rocksdb::Options* o) { o->avoid_flush_during_shutdown = true; }},
#if ROCKSDB_MAJOR >= 9
        {"write_identity_file",
         [](rocksdb::Options* o) { o->write_identity_file = false; }},
#endif
    {
      "timestamps", [](rocksdb::Options* o) {
        static TsComparator ts;
        o->comparator = &ts;
      }
    }
  };
}

TEST_F(AcknowledgedWritesTest, UnsupportedOptionsRefusedAtOpen) {
  for (const RefusedCase& c : RefusedCases()) {
    SCOPED_TRACE(c.option);
    rocksdb::Options o = PlainOptions(dir_);
    c.set(&o);
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, DbDir(dir_), &db);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.ToString().find(c.option), std::string::npos) << s.ToString();
  }
  // OpenDB refuses what its watermark cannot bound, by name.
  for (const char* opt : {"two_write_queues", "unordered_write"}) {
    rocksdb::Options o = BaseOptions();
    (std::strcmp(opt, "two_write_queues") == 0 ? o.two_write_queues
                                               : o.unordered_write) = true;
    std::vector<rocksdb::ColumnFamilyHandle*> h;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s =
        OpenDB(o, DbDir(dir_), {{"default", o}}, &h, &db, Ro(dir_));
    ASSERT_FALSE(s.ok()) << opt;
    EXPECT_NE(s.ToString().find(opt), std::string::npos) << s.ToString();
  }
}

// An option refused at Open cannot be switched on afterwards through the
// wrapper: RocksDB's SetOptions never asks the memtable factory (D4 in
// docs/results/rocksdb_peer_tests.md).
TEST_F(AcknowledgedWritesTest, WrapperRefusesRefusedOptionsAtSetOptions) {
  rocksdb::DB* db = OpenWrapper(dir_);
  rocksdb::Status s = db->SetOptions(
      db->DefaultColumnFamily(), {{"experimental_mempurge_threshold", "1.0"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("experimental_mempurge_threshold"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(db->GetOptions().experimental_mempurge_threshold, 0.0);
  // What the factory accepts still goes through, and RocksDB's own errors
  // still name the bad option.
  ASSERT_TRUE(db->SetOptions(db->DefaultColumnFamily(),
                             {{"write_buffer_size", "1048576"}})
                  .ok());
  EXPECT_EQ(db->GetOptions().write_buffer_size, 1048576u);
  s = db->SetOptions(db->DefaultColumnFamily(), {{"no_such_option", "1"}});
  EXPECT_FALSE(s.ok());
  ASSERT_TRUE(db->SetDBOptions({{"avoid_flush_during_shutdown", "true"}}).ok());
  delete db;
}

#ifdef FLINTKV_SOURCE_DIR
// Every refused option is in the configuration matrix of the docs.
TEST_F(AcknowledgedWritesTest, ConfigMatrixDocumented) {
  std::string doc = test::ReadFile(std::string(FLINTKV_SOURCE_DIR) +
                                   "/docs/rocksdb_config_matrix.md");
  ASSERT_FALSE(doc.empty());
  for (const RefusedCase& c : RefusedCases()) {
    EXPECT_NE(doc.find(c.option), std::string::npos)
        << c.option << " is not in docs/rocksdb_config_matrix.md";
  }
  for (const char* opt : {"two_write_queues", "unordered_write"}) {
    EXPECT_NE(doc.find(opt), std::string::npos) << opt;
  }
}
#endif

// avoid_flush_during_shutdown is a promise OpenDB keeps: the unflushed
// memtable stays in the pool and the next OpenDB brings it back.
TEST_F(AcknowledgedWritesTest, WrapperKeepsUnflushedMemtablesAcrossClose) {
  rocksdb::Options o = BaseOptions();
  o.avoid_flush_during_shutdown = true;
  rocksdb::DB* db = OpenWrapper(dir_, o);
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "x", "1").ok());
  ASSERT_TRUE(db->Merge(rocksdb::WriteOptions(), "m", "a").ok());
  delete db;
  db = OpenWrapper(dir_, o);
  EXPECT_EQ(Get(db, "x"), "1");
  ASSERT_TRUE(db->Merge(rocksdb::WriteOptions(), "m", "b").ok());
  delete db;
  db = OpenWrapper(dir_, o);
  EXPECT_EQ(Get(db, "m"), "a,b");
  delete db;
}

// 8f: RocksDB's defaults (WAL on) with wal_logged declared: Close and
// reopen work, in a loop, with no lists leaking into the pool; a second
// factory object works too.
TEST_F(AcknowledgedWritesTest, WalOnReopensWithoutLeaks) {
  for (int round = 0; round < 40; round++) {
    rocksdb::DB* db = nullptr;
    // A new factory object every round (options re-parsed, as a user would).
    rocksdb::Status s = rocksdb::DB::Open(
        PlainOptions(dir_, /*wal_logged=*/true), DbDir(dir_), &db);
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), Key(round), "v").ok());
    for (int i = 0; i <= round; i++) ASSERT_EQ(Get(db, Key(i)), "v") << i;
    delete db;
  }
  PoolSummary ps;
  ASSERT_TRUE(InspectPool(PoolDir(dir_), &ps).ok());
  EXPECT_LE(ps.lists.size(), 1u) << "lists leak across open/close";
}

// 8f, 8g: a crash with WAL-logged writes; RocksDB replays its WAL and the
// pool holds the same entries: every Merge operand is applied once, with
// and without avoid_flush_during_recovery.
TEST_F(AcknowledgedWritesTest, WalOnCrashMergesAppliedOnce) {
  for (bool avoid : {false, true}) {
    SCOPED_TRACE(avoid ? "avoid_flush_during_recovery" : "flush on recovery");
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild("plain_merges_wal", dir_));
    rocksdb::Options o = BaseOptions();
    o.avoid_flush_during_recovery = avoid;
    rocksdb::DB* db = RecoverAndOpen(o);
    ASSERT_NE(db, nullptr);
    for (int i = 0; i < 50; i++) ASSERT_EQ(Get(db, Key(i)), "0,1,2") << i;
    delete db;
  }
}

// 8j: a tool without the plugin writes after a WAL-less crash (reusing the
// lost sequence numbers); recovery must not take the pool's memtable for
// already flushed.
TEST_F(AcknowledgedWritesTest, ForeignWriterDoesNotFoolRecovery) {
  ASSERT_NO_FATAL_FAILURE(RunChild("plain_puts", dir_));
  {
    rocksdb::DB* db = nullptr;  // like stock ldb: default memtable, WAL on
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "foreign", "x").ok());
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    delete db;
  }
  // The foreign open is detected (S3): refused until the override.
  rocksdb::Status s =
      RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("allow_foreign_open"), std::string::npos)
      << s.ToString();
  RecoveryOptions ro = Ro(dir_);
  ro.allow_foreign_open = true;
  rocksdb::DB* db = RecoverAndOpen(BaseOptions(), ro);
  ASSERT_NE(db, nullptr);
  for (int i = 0; i < 500; i++) ASSERT_EQ(Get(db, Key(i)), "v" + Key(i)) << i;
  EXPECT_EQ(Get(db, "foreign"), "x");
  delete db;
}

// A write newer than a memtable's group that is in no leftover list (here:
// a tool without the plugin, after enough writes to pass the list's
// sequence numbers; the same holds for a WAL-logged write whose memtable
// insert was cut off by the crash — seen in the WAL kill campaign) is newer
// history: the group must not be replayed on top of it.
TEST_F(AcknowledgedWritesTest, NewerWriteOutsideListsSupersedesGroup) {
  ASSERT_NO_FATAL_FAILURE(RunChild("merges_over_flushed_base", dir_));
  {
    rocksdb::DB* db = nullptr;  // like stock ldb: default memtable, WAL on
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
    for (int i = 0; i < 200; i++) {
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), Key(i), "x").ok());
    }
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "k", "later").ok());
    delete db;  // WAL-logged, not flushed
  }
  RecoveryOptions ro = Ro(dir_);
  ro.allow_foreign_open = true;  // refused without (ForeignWriterDoesNot...)
  rocksdb::DB* db = RecoverAndOpen(BaseOptions(), ro);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, "k"), "later");
  delete db;
}

// Section 2: an ingested file's global sequence number does not fool
// recovery into dropping the memtable.
TEST_F(AcknowledgedWritesTest, IngestExternalFileThenCrash) {
  ASSERT_NO_FATAL_FAILURE(RunChild("ingest", dir_));
  rocksdb::DB* db = RecoverAndOpen();
  ASSERT_NE(db, nullptr);
  for (int i = 0; i < 200; i++) ASSERT_EQ(Get(db, Key(i)), "v") << i;
  EXPECT_EQ(Get(db, "m0"), "ext");
  EXPECT_EQ(Get(db, "m1"), "sst");
  delete db;
}

// Section 2: Merge operands are applied once even when a recovery is
// itself interrupted, after its copies reached SST files or before.
TEST_F(AcknowledgedWritesTest, InterruptedRecoveryAppliesMergesOnce) {
  for (const char* point : {"recovery_after_flush", "recovery_after_record",
                            "recovery_after_list"}) {
    SCOPED_TRACE(point);
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild("plain_merges", dir_));
    ASSERT_NO_FATAL_FAILURE(RunChild("recover_crash", dir_, point));
    rocksdb::DB* db = RecoverAndOpen();
    ASSERT_NE(db, nullptr);
    for (int i = 0; i < 50; i++) ASSERT_EQ(Get(db, Key(i)), "0,1,2") << i;
    delete db;
  }
}

// A recovery killed between marking two lists loses neither: the rerun
// took the unmarked newer list for a copy of an interrupted recovery and
// dropped it when the lists were marked oldest first.
TEST_F(AcknowledgedWritesTest, RecoveryKilledWhileMarkingListsLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(RunChild("two_unflushed_memtables", dir_));
  ASSERT_NO_FATAL_FAILURE(
      RunChild("recover_crash", dir_, "recovery_after_mark"));
  rocksdb::DB* db = RecoverAndOpen();
  ASSERT_NE(db, nullptr);
  const std::string count = Get(db, "count");  // in the newer list
  ASSERT_NE(count, "<NotFound: >");
  const int n = std::stoi(count);
  EXPECT_GT(n, 100);
  for (int i = 0; i < n; i++) ASSERT_EQ(Get(db, Key(i)), "v" + Key(i)) << i;
  delete db;
}

// A byte copy of the pool (an operator's safety copy) recovered after the
// original, or the original after the copy: the second recovery finds its
// lists recorded in the DB as recovered and drops them. It replayed them
// again, applying every Merge operand twice.
TEST_F(AcknowledgedWritesTest, PoolCopyRecoveredTwiceAppliesMergesOnce) {
  for (bool copy_first : {false, true}) {
    SCOPED_TRACE(copy_first ? "copy first" : "original first");
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild("plain_merges", dir_));
    const std::string copy = dir_ + "/pool_copy";
    ASSERT_EQ(std::system(("cp -a " + PoolDir(dir_) + " " + copy).c_str()), 0);
    RecoveryOptions first = Ro(dir_), second = Ro(dir_);
    (copy_first ? first : second).memtable.pool_dir = copy;
    RecoveryReport rep;
    rocksdb::Status s = RecoverDB(BaseOptions(), DbDir(dir_), {}, first, &rep);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_GT(rep.lists_replayed, 0u);
    s = RecoverDB(BaseOptions(), DbDir(dir_), {}, second, &rep);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(rep.lists_replayed, 0u);
    EXPECT_GT(rep.lists_already_recovered, 0u);
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
    for (int i = 0; i < 50; i++) ASSERT_EQ(Get(db, Key(i)), "0,1,2") << i;
    delete db;
  }
}

// A recovery killed while dropping the lists it flushed (R set): the
// restart finishes the drop. R was the DB's LastSequence, above what a
// reopen sees when the flush dropped the newest replayed entries (a
// SingleDelete pair), and the restart refused the record as damaged.
TEST_F(AcknowledgedWritesTest, RecoveryKilledWhileDroppingListsRestarts) {
  ASSERT_NO_FATAL_FAILURE(RunChild("single_delete_pair_two_lists", dir_));
  ASSERT_NO_FATAL_FAILURE(RunChild("recover_crash_memtable_path", dir_,
                                   "recovery_after_reset_begin"));
  rocksdb::DB* db = RecoverAndOpen();
  ASSERT_NE(db, nullptr);
  const std::string count = Get(db, "count");
  ASSERT_NE(count, "<NotFound: >");
  const int n = std::stoi(count);
  for (int i = 0; i < n; i++) ASSERT_EQ(Get(db, Key(i)), "v" + Key(i)) << i;
  EXPECT_EQ(Get(db, "zzz"), "<NotFound: >");
  delete db;
}

// Section 2: PutEntity through the plain factory is recovered.
TEST_F(AcknowledgedWritesTest, WideColumnEntityRecovered) {
  ASSERT_NO_FATAL_FAILURE(RunChild("entity", dir_));
  rocksdb::DB* db = RecoverAndOpen();
  ASSERT_NE(db, nullptr);
  {
    rocksdb::PinnableWideColumns cols;  // pins DB memory: released first
    ASSERT_TRUE(db->GetEntity(rocksdb::ReadOptions(), db->DefaultColumnFamily(),
                              "e", &cols)
                    .ok());
    ASSERT_EQ(cols.columns().size(), 2u);
    EXPECT_EQ(cols.columns()[0].name(), "c1");
    EXPECT_EQ(cols.columns()[1].value(), "v2");
  }
  delete db;
}

}  // namespace
}  // namespace flintkv

namespace flintkv {
namespace {

// Two memtables flushed into one SST file: recovery must not replay the
// older memtable's hidden entry over the newer one (older value resurfacing;
// seen in the plain kill campaign).
TEST_F(AcknowledgedWritesTest, MemtablesFlushedTogetherNotReplayedOverNewer) {
  ASSERT_NO_FATAL_FAILURE(RunChild("flush_two_memtables", dir_));
  rocksdb::DB* db = RecoverAndOpen();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, "k"), "new");
  EXPECT_EQ(Get(db, "m"), "1,2");
  delete db;
}

// Section 2: DeleteRange through OpenDB is crash-durable, alone and inside
// a WriteBatch.
TEST_F(AcknowledgedWritesTest, WrapperDeleteRangeSurvivesCrash) {
  ASSERT_NO_FATAL_FAILURE(RunChild("wrapper_delete_range", dir_));
  rocksdb::DB* db = OpenWrapper(dir_);
  for (int i = 0; i < 110; i++) {
    std::string want = "v";
    if ((i >= 10 && i < 20) || (i >= 30 && i < 40)) want = "<NotFound: >";
    if (i == 5) want = "b";
    if (i == 50) want = "v,m";
    EXPECT_EQ(Get(db, Key(i)), want) << i;
  }
  delete db;
}

// Column families created or imported through the wrapper after Open get
// the Open-time checks and the flintkv memtable (RocksDB consults the
// memtable factory's ValidateOptions only at DB::Open; StackableDB passed an
// import's own factory through, so its WAL-less writes lived in DRAM).
TEST_F(AcknowledgedWritesTest, WrapperChecksAndCoversLaterColumnFamilies) {
  rocksdb::DB* db = OpenWrapper(dir_);
  rocksdb::ColumnFamilyOptions purge = BaseOptions();
  purge.experimental_mempurge_threshold = 1.0;
  rocksdb::ColumnFamilyHandle* cf = nullptr;
  rocksdb::Status s = db->CreateColumnFamily(purge, "purge", &cf);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_NE(s.ToString().find("experimental_mempurge_threshold"),
            std::string::npos)
      << s.ToString();
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  s = db->CreateColumnFamilies({{"purge2", purge}}, &hs);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_TRUE(hs.empty());

  // Export a family of a plain DB and import it through the wrapper.
  const std::string src_dir = dir_ + "/src";
  rocksdb::DB* src = nullptr;
  rocksdb::Options so = BaseOptions();
  ASSERT_TRUE(rocksdb::DB::Open(so, src_dir, &src).ok());
  ASSERT_TRUE(src->Put(rocksdb::WriteOptions(), "imported", "v").ok());
  ASSERT_TRUE(src->Flush(rocksdb::FlushOptions()).ok());
  rocksdb::Checkpoint* ck = nullptr;
  ASSERT_TRUE(rocksdb::Checkpoint::Create(src, &ck).ok());
  rocksdb::ExportImportFilesMetaData* meta = nullptr;
  ASSERT_TRUE(ck->ExportColumnFamily(src->DefaultColumnFamily(),
                                     dir_ + "/export", &meta)
                  .ok());
  rocksdb::ImportColumnFamilyOptions io;
  io.move_files = false;
  s = db->CreateColumnFamilyWithImport(BaseOptions(), "imp", io, *meta, &cf);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_STREQ(db->GetOptions(cf).memtable_factory->Name(), "FlintKVFactory");
  EXPECT_EQ(Get(db, cf, "imported"), "v");
  db->DestroyColumnFamilyHandle(cf);
  delete meta;
  delete ck;
  delete src;
  delete db;
}

// A batch whose DeleteRange spans column families needs atomic_flush.
TEST_F(AcknowledgedWritesTest, WrapperCrossCfRangeDeleteNeedsAtomicFlush) {
  rocksdb::DB* db = OpenWrapper(dir_);
  rocksdb::ColumnFamilyHandle* cf;
  ASSERT_TRUE(db->CreateColumnFamily(BaseOptions(), "x", &cf).ok());
  rocksdb::WriteBatch b;
  ASSERT_TRUE(b.DeleteRange("a", "b").ok());
  ASSERT_TRUE(b.Put(cf, "k", "v").ok());
  rocksdb::Status s = db->Write(rocksdb::WriteOptions(), &b);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_NE(s.ToString().find("atomic_flush"), std::string::npos)
      << s.ToString();
  db->DestroyColumnFamilyHandle(cf);
  delete db;
}

// A column family created through the wrapper gets the durable memtable.
TEST_F(AcknowledgedWritesTest, WrapperCreatedColumnFamilyIsDurable) {
  ASSERT_NO_FATAL_FAILURE(RunChild("wrapper_new_cf", dir_));
  rocksdb::Options o = BaseOptions();
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      OpenDB(o, DbDir(dir_), {{"default", o}, {"x", o}}, &h, &db, Ro(dir_));
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string v;
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), h[1], "k", &v).ok());
  EXPECT_EQ(v, "in-x");
  for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
  delete db;
}

}  // namespace
}  // namespace flintkv

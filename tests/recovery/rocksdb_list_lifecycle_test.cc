// Regression tests for the RocksDB drop-in (recovery rules,
// list lifecycle). Same style as rocksdb_acknowledged_writes_test.cc: a child
// process (this binary re-executed with FLINTKV_LIFECYCLE_CHILD naming a
// scenario) writes and then SIGKILLs itself, or is killed at a
// FLINTKV_CRASH_POINT, so what was acknowledged before the crash is known
// exactly. No timing dependence.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/merge_operator.h"
#include "tests/recovery/rocksdb_scenario.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

using test::BaseOptions;
using test::Check;
using test::DbDir;
using test::Die;
using test::Factory;
using test::Key;
using test::Register;
using test::Ro;
using test::RunChild;

// ---- An older list's copy taken for a newer list's entry ----
// Three unflushed memtables A1, A2, A3 of the default column family
// (min_write_buffer_number_to_merge=3 keeps them all), key "a" = v1 in A1
// and v2 in A2. Column family "b" is flushed in the middle of A3, so the
// DB's LastSequence at the next open (SST max) lies inside A3's sequence
// range: a recovery's first copies get sequence numbers A3 also used.
void FillUntilImm(rocksdb::DB* db, int* next, uint64_t want) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  uint64_t n = 0;
  for (int i = 0; n < want && i < 1000000; i++) {
    Check(db->Put(wo, Key((*next)++), std::string(100, 'f')), "fill");
    db->GetIntProperty("rocksdb.num-immutable-mem-table", &n);
  }
  if (n != want) std::abort();
}

rocksdb::Options ThreeListOptions(const std::string& d) {
  rocksdb::Options o = BaseOptions();
  o.memtable_factory = Factory(d);
  o.write_buffer_size = 4 << 20;
  o.min_write_buffer_number_to_merge = 3;
  o.max_write_buffer_number = 6;
  return o;
}

Register cp1("three_lists", [](const std::string& d) {
  rocksdb::Options o = ThreeListOptions(d);
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(o, DbDir(d), {{"default", o}, {"b", o}}, &h, &db),
        "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  int next = 0;
  Check(db->Put(wo, "a", "v1"), "a=v1");  // A1
  FillUntilImm(db, &next, 1);
  Check(db->Put(wo, "a", "v2"), "a=v2");  // A2
  FillUntilImm(db, &next, 2);
  Check(db->Put(wo, "z1", "z"), "z1");  // A3
  Check(db->Put(wo, h[1], "y", "b"), "b:y");
  Check(db->Put(wo, "z2", "z"), "z2");
  Check(db->Put(wo, "z3", "z"), "z3");
  Check(db->Flush(rocksdb::FlushOptions(), h[1]), "flush b");  // SST max
  Die();
});

// A recovery killed when its first flush is installed (MarkFlushed): the
// first copies of A1 are in SST, nothing of A2. Small write buffers and
// max_write_buffer_number=2 stop the replay until that flush is done, so
// the flush holds only copies of A1 (which is 4 MiB). The memtable path
// (ingest_sst = false): the SST path flushes no copies.
Register cp2("recover_first_flush_crash", [](const std::string& d) {
  setenv("FLINTKV_CRASH_POINT", "flintkv_mark_flushed", 1);
  rocksdb::Options o = BaseOptions();
  o.write_buffer_size = 256 << 10;
  o.max_write_buffer_number = 2;
  RecoveryOptions ro = Ro(d);
  ro.batch_bytes = 64 << 10;
  ro.ingest_sst = false;
  RecoverDB(o, DbDir(d), {{"default", o}, {"b", o}}, ro, nullptr);
  std::abort();  // the crash point must have fired
});
// The SST path's counterpart: killed right after its ingestion (copies of
// every list at sequence numbers A3 also used), before the spans close.
Register cp3("recover_ingest_crash", [](const std::string& d) {
  rocksdb::Options o = BaseOptions();
  RecoverDB(o, DbDir(d), {{"default", o}, {"b", o}}, Ro(d), nullptr);
  std::abort();  // the crash point must have fired
});

// ---- WAL-logged DeleteRange over a WAL-less Put ----
Register dr1("mixed_wal_delete_range", [](const std::string& d) {
  rocksdb::Options o = BaseOptions();
  o.memtable_factory = Factory(d);
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(o, DbDir(d), &db), "open");
  rocksdb::WriteOptions nowal;
  nowal.disableWAL = true;
  Check(db->Put(nowal, "k", "v"), "put (WAL off)");
  Check(db->DeleteRange(rocksdb::WriteOptions(), db->DefaultColumnFamily(), "a",
                        "z"),
        "delete range (WAL on)");
  Die();
});

// ---- flintkv::OpenDB's DeleteRange, killed inside its flush ----
// "k30" is in an SST file (the parent wrote it); "k27" is only in the
// pool when the DeleteRange over both comes. Killed at the first
// MarkFlushed.
Register dr2("wrapper_delete_range_flush_crash", [](const std::string& d) {
  rocksdb::Options o = BaseOptions();
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  Check(OpenDB(o, DbDir(d), {{"default", o}}, &h, &db, Ro(d)), "open");
  Check(db->Put(rocksdb::WriteOptions(), "k27", "new"), "put");
  db->DeleteRange(rocksdb::WriteOptions(), h[0], "k26", "k31");
  std::abort();  // the crash point must have fired
});

const int kChild = test::RunScenarioIfChild();

using ListLifecycleTest = test::ScenarioTest;

// The wrapper's DeleteRange, killed inside its flush: the flush drops the
// older entries its tombstone covers, so if those were still in the
// tombstone's list when the process died after the flush's MANIFEST edit,
// recovery would replay "k27" above the tombstone while "k30" stayed
// deleted, half a DeleteRange. The wrapper flushes the older entries first:
// the unacknowledged DeleteRange happened for both keys or for neither.
TEST_F(ListLifecycleTest, WrapperDeleteRangeKilledInItsFlushIsAllOrNothing) {
  rocksdb::Options o = BaseOptions();
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(OpenDB(o, DbDir(dir_), {{"default", o}}, &h, &db, Ro(dir_)).ok());
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "k30", "old").ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
  delete db;
  ASSERT_NO_FATAL_FAILURE(RunChild("wrapper_delete_range_flush_crash", dir_,
                                   "flintkv_mark_flushed"));
  ASSERT_TRUE(OpenDB(o, DbDir(dir_), {{"default", o}}, &h, &db, Ro(dir_)).ok());
  const std::string k27 = Get(db, h[0], "k27"), k30 = Get(db, h[0], "k30");
  EXPECT_TRUE((k27 == "new" && k30 == "old") ||
              (k27 == "<NotFound: >" && k30 == "<NotFound: >"))
      << "k27=" << k27 << " k30=" << k30;
  for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
  delete db;
}

// flintkv::OpenDB of the default family with avoid_flush_during_shutdown
// (Close leaves the memtables in the pool); nullptr on failure.
rocksdb::DB* OpenKeepingMemtables(const std::string& dir) {
  rocksdb::Options o = BaseOptions();
  o.avoid_flush_during_shutdown = true;
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = OpenDB(o, DbDir(dir), {{"default", o}}, &h, &db, Ro(dir));
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (auto* cf : h) {
    if (cf != db->DefaultColumnFamily()) db->DestroyColumnFamilyHandle(cf);
  }
  return db;
}

// The "superseded by a newer list" rule takes the copy an interrupted
// recovery made of A1's "a" (its sequence number lies in A3's range) for a
// newer list's entry and skips A2's "a": the acknowledged v2 is lost and
// the older v1 is what the DB returns.
void CheckThreeLists(const std::string& dir) {
  rocksdb::Options o = BaseOptions();
  RecoveryReport rep;
  rocksdb::Status s =
      RecoverDB(o, DbDir(dir), {{"default", o}, {"b", o}}, Ro(dir), &rep);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(
      rocksdb::DB::Open(o, DbDir(dir), {{"default", o}, {"b", o}}, &h, &db)
          .ok());
  auto get = [&](rocksdb::ColumnFamilyHandle* cf, const std::string& k) {
    std::string v;
    rocksdb::Status g = db->Get(rocksdb::ReadOptions(), cf, k, &v);
    return g.ok() ? v : "<" + g.ToString() + ">";
  };
  EXPECT_EQ(get(h[0], "a"), "v2") << rep.ToString();
  EXPECT_EQ(get(h[0], "z1"), "z");
  EXPECT_EQ(get(h[0], "z3"), "z");
  EXPECT_EQ(get(h[1], "y"), "b");
  EXPECT_EQ(get(h[0], Key(0)), std::string(100, 'f'));
  for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
  delete db;
}

TEST_F(ListLifecycleTest, OlderListCopyDoesNotSupersedeNewerGroup) {
  ASSERT_NO_FATAL_FAILURE(RunChild("three_lists", dir_));
  ASSERT_NO_FATAL_FAILURE(RunChild("recover_first_flush_crash", dir_));
  CheckThreeLists(dir_);
}

TEST_F(ListLifecycleTest, IngestedCopiesDoNotSupersedeNewerGroup) {
  ASSERT_NO_FATAL_FAILURE(RunChild("three_lists", dir_));
  ASSERT_NO_FATAL_FAILURE(
      RunChild("recover_ingest_crash", dir_, "recovery_after_ingest"));
  CheckThreeLists(dir_);
}

// ---- A failed flush at Close ----
// An Env whose SST files cannot be created once `fail` is set (a full or
// failing disk).
class FailSstEnv : public rocksdb::EnvWrapper {
 public:
  explicit FailSstEnv(rocksdb::Env* base) : rocksdb::EnvWrapper(base) {}
  const char* Name() const override { return "FailSstEnv"; }
  rocksdb::Status NewWritableFile(const std::string& f,
                                  std::unique_ptr<rocksdb::WritableFile>* r,
                                  const rocksdb::EnvOptions& o) override {
    if (fail.load() && f.size() > 4 && f.substr(f.size() - 4) == ".sst") {
      return rocksdb::Status::IOError("injected: no space for " + f);
    }
    return target()->NewWritableFile(f, r, o);
  }
  std::atomic<bool> fail{false};
};

// Plain factory, WAL off (the intended use): a Close whose shutdown flush
// fails (RocksDB ignores that error) destroys the memtable, and ~FlintRep
// drops the list although its acknowledged entries exist nowhere else.
// A memtable destructor cannot tell "flush failed" from
// "the data is in the WAL", so the list stays (S4) unless the DB declared
// every write WAL-logged; the next plain DB::Open asks for recovery.
TEST_F(ListLifecycleTest, FailedCloseFlushKeepsAcknowledgedWrites) {
  FailSstEnv env(rocksdb::Env::Default());
  {
    rocksdb::Options o = BaseOptions();
    o.env = &env;
    o.memtable_factory = Factory(dir_);
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &db).ok());
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    ASSERT_TRUE(db->Put(wo, "k", "acked").ok());
    env.fail = true;
    rocksdb::Status cs = db->Close();  // the shutdown flush fails
    delete db;
    env.fail = false;
  }
  {  // Before recovery, a plain open is refused and names the command.
    rocksdb::DB* db = nullptr;
    rocksdb::Status s =
        rocksdb::DB::Open(test::PlainOptions(dir_), DbDir(dir_), &db);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.ToString().find("flintkv_tool recover"), std::string::npos)
        << s.ToString();
    delete db;
  }
  rocksdb::Status s =
      RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
  EXPECT_EQ(Get(db, db->DefaultColumnFamily(), "k"), "acked")
      << "an acknowledged WAL-less write vanished at Close";
  delete db;
}

// Plain factory, one write with the WAL off and a later DeleteRange with
// the WAL on (both acknowledged). RocksDB's WAL replay restores the range
// tombstone, which presence checks cannot see: replaying the Put would put
// it above the tombstone and bring the deleted value back. So
// recovery refuses the mix, changing nothing; the override replays.
TEST_F(ListLifecycleTest, WalLoggedDeleteRangeNotUndoneByReplay) {
  for (bool avoid_flush : {false, true}) {
    SCOPED_TRACE(avoid_flush ? "avoid_flush_during_recovery" : "default");
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild("mixed_wal_delete_range", dir_));
    rocksdb::Options o = BaseOptions();
    o.avoid_flush_during_recovery = avoid_flush;
    rocksdb::Status s = RecoverDB(o, DbDir(dir_), {}, Ro(dir_), nullptr);
    ASSERT_FALSE(s.ok()) << "recovery replayed under a WAL-logged DeleteRange";
    EXPECT_NE(s.ToString().find("DeleteRange"), std::string::npos)
        << s.ToString();
    EXPECT_NE(s.ToString().find("allow_wal_delete_range"), std::string::npos);
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
    EXPECT_EQ(Get(db, db->DefaultColumnFamily(), "k"), "<NotFound: >")
        << "a value deleted by an acknowledged DeleteRange resurfaced";
    delete db;
    // The pool still holds the Put; the override replays it, as documented.
    RecoveryOptions ro = Ro(dir_);
    ro.allow_wal_delete_range = true;
    ro.allow_foreign_open = true;  // the stock open above wrote OPTIONS
    ASSERT_TRUE(RecoverDB(o, DbDir(dir_), {}, ro, nullptr).ok());
  }
}

// flintkv::OpenDB twice in one process with avoid_flush_during_shutdown
// while something else in the process (here: a factory the caller made
// for the same pool_dir, as the plain-factory docs show) keeps the pool
// handle alive. The handle's leftover snapshot is from the first open, so
// the second OpenDB does not recover the memtable the first one kept.
TEST_F(ListLifecycleTest, WrapperReopenInProcessRecoversKeptMemtables) {
  auto user_factory = Factory(dir_);  // alive for the whole test
  auto open = [&] { return OpenKeepingMemtables(dir_); };
  rocksdb::DB* db = open();
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "x", "1").ok());
  delete db;  // the memtable stays in the pool
  db = open();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, db->DefaultColumnFamily(), "x"), "1")
      << "an acknowledged write is missing after an in-process reopen";
  delete db;
}

// FlintDB::Close marks itself closed, disables the watermark and gives up
// wrapper ownership even when DB::Close refuses (Aborted: an unreleased
// snapshot) and the DB stays open. With avoid_flush_during_shutdown the
// memtable is then destroyed later (at delete) as a plain-factory one and
// its list is dropped: the acknowledged write is lost.
TEST_F(ListLifecycleTest, WrapperCloseAbortedBySnapshotKeepsWrites) {
  auto open = [&] { return OpenKeepingMemtables(dir_); };
  rocksdb::DB* db = open();
  ASSERT_NE(db, nullptr);
  const rocksdb::Snapshot* snap = db->GetSnapshot();
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "x", "1").ok());
  rocksdb::Status cs = db->Close();
  EXPECT_TRUE(cs.IsAborted()) << cs.ToString();
  db->ReleaseSnapshot(snap);
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "y", "2").ok());
  delete db;
  db = open();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, db->DefaultColumnFamily(), "x"), "1");
  EXPECT_EQ(Get(db, db->DefaultColumnFamily(), "y"), "2");
  delete db;
}

// A column family dropped under OpenDB leaves its unflushed memtable in the
// pool (RocksDB frees it without MarkFlushed, and the wrapper keeps such
// lists). The next OpenDB must discard it, not replay it into a family of
// the same name created later, and must keep the other families' writes.
TEST_F(ListLifecycleTest, WrapperDroppedColumnFamilyListDiscarded) {
  rocksdb::Options o = BaseOptions();
  o.avoid_flush_during_shutdown = true;
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  auto open = [&](RecoveryReport* rep) {
    std::vector<rocksdb::ColumnFamilyHandle*> h;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s =
        OpenDB(o, DbDir(dir_), {{"default", o}}, &h, &db, Ro(dir_), rep);
    EXPECT_TRUE(s.ok()) << s.ToString();
    for (auto* cf : h) {
      if (cf != db->DefaultColumnFamily()) db->DestroyColumnFamilyHandle(cf);
    }
    return db;
  };
  RecoveryReport rep;
  rocksdb::DB* db = open(&rep);
  ASSERT_NE(db, nullptr);
  rocksdb::ColumnFamilyHandle* gone = nullptr;
  ASSERT_TRUE(db->CreateColumnFamily(o, "gone", &gone).ok());
  ASSERT_TRUE(db->Put(wo, "a", "1").ok());
  ASSERT_TRUE(db->Put(wo, gone, "k", "dropped").ok());
  ASSERT_TRUE(db->DropColumnFamily(gone).ok());
  ASSERT_TRUE(db->DestroyColumnFamilyHandle(gone).ok());
  ASSERT_TRUE(db->Put(wo, "b", "2").ok());
  delete db;  // unflushed memtables stay in the pool
  rep = RecoveryReport();
  db = open(&rep);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(rep.lists_dropped_cf, 1u) << rep.ToString();
  EXPECT_EQ(Get(db, db->DefaultColumnFamily(), "a"), "1");
  EXPECT_EQ(Get(db, db->DefaultColumnFamily(), "b"), "2");
  ASSERT_TRUE(db->CreateColumnFamily(o, "gone", &gone).ok());
  EXPECT_EQ(Get(db, gone, "k"), "<NotFound: >");
  ASSERT_TRUE(db->DestroyColumnFamilyHandle(gone).ok());
  delete db;
}

}  // namespace
}  // namespace flintkv

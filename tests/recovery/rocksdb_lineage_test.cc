// Which database state a pool's lists extend (pool_session.h S3): cases
// the operations model checker (tests/opcheck) found, each fixed here or
// refused with a way forward. docs/identity_model.md lists them all.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "flintkv/inspect.h"
#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/utilities/checkpoint.h"
#include "tests/recovery/rocksdb_scenario.h"

namespace flintkv {
namespace {

using test::BaseOptions;
using test::Check;
using test::DbDir;
using test::Die;
using test::Factory;
using test::PlainOptions;
using test::PoolDir;
using test::Register;
using test::Ro;
using test::RunChild;

rocksdb::DB* OpenWrapper(const std::string& d, rocksdb::Status* s) {
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  rocksdb::DB* db = nullptr;
  *s = OpenDB(BaseOptions(), DbDir(d),
              {{rocksdb::kDefaultColumnFamilyName, BaseOptions()}}, &hs, &db,
              Ro(d));
  if (!s->ok()) return nullptr;
  for (auto* h : hs) db->DestroyColumnFamilyHandle(h);
  return db;
}

// Plain factory, families "default" and "b" (made if missing).
rocksdb::DB* OpenPlainTwoFamilies(
    const std::string& d, std::vector<rocksdb::ColumnFamilyHandle*>* hs) {
  rocksdb::Options o = PlainOptions(d);
  o.create_missing_column_families = true;
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(o, DbDir(d), {{"default", o}, {"b", o}}, hs, &db),
        "open");
  return db;
}

// A RocksDB checkpoint of db at d/ckpt (it flushes first).
void TakeCheckpoint(rocksdb::DB* db, const std::string& d) {
  rocksdb::Checkpoint* cp = nullptr;
  Check(rocksdb::Checkpoint::Create(db, &cp), "checkpoint");
  Check(cp->CreateCheckpoint(d + "/ckpt"), "checkpoint");
  delete cp;
}

// Life 1 writes, a checkpoint is taken, life 1 writes more and dies; life
// 2 recovers it, writes, dies.
Register r1("lineage_life1", [](const std::string& d) {
  rocksdb::Status s;
  rocksdb::DB* db = OpenWrapper(d, &s);
  Check(s, "open");
  Check(db->Put(rocksdb::WriteOptions(), "a", "1"), "put");
  TakeCheckpoint(db, d);
  Check(db->Merge(rocksdb::WriteOptions(), "a", "2"), "merge");
  Die();
});
Register r2("lineage_life2", [](const std::string& d) {
  rocksdb::Status s;
  rocksdb::DB* db = OpenWrapper(d, &s);
  Check(s, "open");
  Check(db->Merge(rocksdb::WriteOptions(), "a", "3"), "merge");
  Die();
});

// A DB made by an earlier open (so that it has an IDENTITY when this life
// claims the pool), then a write, then a kill.
Register r3("identity_life", [](const std::string& d) {
  rocksdb::Status s;
  rocksdb::DB* db = OpenWrapper(d, &s);
  Check(s, "open");
  delete db;
  db = OpenWrapper(d, &s);
  Check(s, "reopen");
  Check(db->Put(rocksdb::WriteOptions(), "a", "1"), "put");
  Die();
});

// Plain factory, families "default" and "b": a WAL-less write to "b", a
// WAL-logged one to "default" (so a copy's last sequence passes the "b"
// write), a copy of the DB directory, then another write to "b", a flush
// of "b", a WAL-less write to "default", a kill.
Register r5("flush_after_copy_life", [](const std::string& d) {
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  rocksdb::DB* db = OpenPlainTwoFamilies(d, &hs);
  rocksdb::WriteOptions nowal;
  nowal.disableWAL = true;
  Check(db->Put(nowal, hs[1], "x", "1"), "put");
  Check(db->Put(rocksdb::WriteOptions(), hs[0], "w", "1"), "put (WAL)");
  Check(db->FlushWAL(true), "sync WAL");
  if (std::system(("cp -a " + DbDir(d) + " " + d + "/copy").c_str()) != 0) {
    std::abort();
  }
  Check(db->Put(nowal, hs[1], "x", "2"), "put");
  Check(db->Flush(rocksdb::FlushOptions(), hs[1]), "flush b");
  Check(db->Put(nowal, hs[0], "d", "1"), "put");
  Die();
});

// Plain factory, families "default" and "b": WAL-less writes to both, a
// checkpoint (which flushes both), another write to "default" and, if
// `b_written`, to "b" (else "b"'s memtable is empty), "b" dropped, a kill.
void DroppedFamilyLife(const std::string& d, bool b_written) {
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  rocksdb::DB* db = OpenPlainTwoFamilies(d, &hs);
  rocksdb::WriteOptions nowal;
  nowal.disableWAL = true;
  Check(db->Put(nowal, hs[0], "d", "1"), "put");
  Check(db->Put(nowal, hs[1], "x", "1"), "put");
  TakeCheckpoint(db, d);
  Check(db->Put(nowal, hs[0], "d", "2"), "put");
  if (b_written) Check(db->Put(nowal, hs[1], "x", "2"), "put");
  Check(db->DropColumnFamily(hs[1]), "drop");
  Check(db->DestroyColumnFamilyHandle(hs[1]), "destroy handle");
  Die();
}
Register r4("dropped_family_life",
            [](const std::string& d) { DroppedFamilyLife(d, true); });
Register r8("empty_family_dropped_life",
            [](const std::string& d) { DroppedFamilyLife(d, false); });

// flintkv::OpenDB: a Merge in the pool, a kill.
Register r6("merge_crash", [](const std::string& d) {
  rocksdb::Status s;
  rocksdb::DB* db = OpenWrapper(d, &s);
  Check(s, "open");
  Check(db->Merge(rocksdb::WriteOptions(), "m", "x"), "merge");
  Die();
});

// flintkv::OpenDB: a write, a checkpoint (which flushes), a DeleteRange
// over it (which flushes a memtable holding only its range tombstone),
// another write, a kill.
Register r11("range_delete_after_checkpoint_life", [](const std::string& d) {
  rocksdb::Status s;
  rocksdb::DB* db = OpenWrapper(d, &s);
  Check(s, "open");
  Check(db->Put(rocksdb::WriteOptions(), "a", "1"), "put");
  TakeCheckpoint(db, d);
  Check(db->DeleteRange(rocksdb::WriteOptions(), db->DefaultColumnFamily(), "a",
                        "b"),
        "delete range");
  Check(db->Put(rocksdb::WriteOptions(), "d", "1"), "put");
  Die();
});

// flintkv::OpenDB: a write, then a DeleteRange write whose sequence
// numbers no SST file holds after its flush (`empty`: an empty range;
// else a batch whose Put and SingleDelete the flush drops), another
// write, a kill.
void RangeDeleteWithoutFileSeqLife(const std::string& d, bool empty) {
  rocksdb::Status s;
  rocksdb::DB* db = OpenWrapper(d, &s);
  Check(s, "open");
  Check(db->Put(rocksdb::WriteOptions(), "a", "1"), "put");
  rocksdb::WriteBatch b;
  if (empty) {
    Check(b.DeleteRange("k", "k"), "batch");
  } else {
    Check(b.DeleteRange("a", "b"), "batch");
    Check(b.Put("x", "1"), "batch");
    Check(b.SingleDelete("x"), "batch");
  }
  Check(db->Write(rocksdb::WriteOptions(), &b), "delete range");
  Check(db->Put(rocksdb::WriteOptions(), "d", "1"), "put");
  Die();
}
Register r12("empty_range_delete_life", [](const std::string& d) {
  RangeDeleteWithoutFileSeqLife(d, true);
});
Register r13("range_delete_dropped_pair_life", [](const std::string& d) {
  RangeDeleteWithoutFileSeqLife(d, false);
});

// Plain factory: a WAL-less write, a checkpoint (which flushes), a family
// made after it with a WAL-less write, another write to "default", a kill.
Register r7("family_after_copy_life", [](const std::string& d) {
  rocksdb::DB* db = nullptr;
  rocksdb::Options o = PlainOptions(d);
  Check(rocksdb::DB::Open(o, DbDir(d), &db), "open");
  rocksdb::WriteOptions nowal;
  nowal.disableWAL = true;
  Check(db->Put(nowal, "d", "1"), "put");
  TakeCheckpoint(db, d);
  rocksdb::ColumnFamilyHandle* c = nullptr;
  Check(db->CreateColumnFamily(o, "c", &c), "create");
  Check(db->Put(nowal, c, "x", "1"), "put");
  Check(db->Put(nowal, "d", "2"), "put");
  Die();
});

// Plain factory, families "default" and "b": a WAL-less write to
// "default" only, a kill ("b"'s memtable is empty).
Register r9("one_family_written_life", [](const std::string& d) {
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  rocksdb::DB* db = OpenPlainTwoFamilies(d, &hs);
  rocksdb::WriteOptions nowal;
  nowal.disableWAL = true;
  Check(db->Put(nowal, hs[0], "d", "1"), "put");
  Die();
});

// Kills the process when RocksDB starts an OPTIONS file, once armed: the
// window between a DropColumnFamily's MANIFEST edit and the OPTIONS file
// that follows it (RocksDB opens the file before it serializes any
// factory, so S7 has not marked the dropped family's list).
std::atomic<bool> kill_at_options{false};
class KillAtOptionsEnv : public rocksdb::EnvWrapper {
 public:
  KillAtOptionsEnv() : EnvWrapper(rocksdb::Env::Default()) {}
  const char* Name() const override { return "KillAtOptionsEnv"; }
  rocksdb::Status NewWritableFile(const std::string& f,
                                  std::unique_ptr<rocksdb::WritableFile>* r,
                                  const rocksdb::EnvOptions& o) override {
    if (kill_at_options && f.find("OPTIONS-") != std::string::npos) Die();
    return EnvWrapper::NewWritableFile(f, r, o);
  }
};

// Plain factory, families "default" and "b": a WAL-less write to
// "default" only, then "b" dropped, killed inside the drop.
Register r10("drop_killed_before_options", [](const std::string& d) {
  static KillAtOptionsEnv env;
  rocksdb::Options o = PlainOptions(d);
  o.create_missing_column_families = true;
  o.env = &env;
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(o, DbDir(d), {{"default", o}, {"b", o}}, &hs, &db),
        "open");
  rocksdb::WriteOptions nowal;
  nowal.disableWAL = true;
  Check(db->Put(nowal, hs[0], "d", "1"), "put");
  kill_at_options = true;
  db->DropColumnFamily(hs[1]);
  std::abort();  // not reached: killed inside
});

class LineageTest : public test::ScenarioTest {
 protected:
  static bool Has(const rocksdb::Status& s, const std::string& what) {
    return s.ToString().find(what) != std::string::npos;
  }
  // An OpenDB expected to be refused, naming each of `names`; then the
  // operator's discard, after which the DB opens as it was and holds
  // `key` = `want`. `what` says what a successful open did wrong.
  void ExpectRefusedThenDiscarded(const std::string& what,
                                  std::vector<std::string> names,
                                  const std::string& key,
                                  const std::string& want) {
    rocksdb::Status s;
    rocksdb::DB* db = OpenWrapper(dir_, &s);
    if (db) {
      ADD_FAILURE() << what << ": " << key << "=" << Get(db, key);
      delete db;
      return;
    }
    for (const std::string& n : names) EXPECT_TRUE(Has(s, n)) << s.ToString();
    std::vector<std::string> dropped;
    ASSERT_TRUE(DiscardLeftovers(PoolDir(dir_), 0, false, &dropped).ok());
    db = OpenWrapper(dir_, &s);
    ASSERT_NE(db, nullptr) << s.ToString();
    EXPECT_EQ(Get(db, key), want);
    delete db;
  }
  // Replaces the DB by its checkpoint at dir_/ckpt, given the DB's
  // IDENTITY as RocksDB 9's checkpoint has it (its id is in the MANIFEST;
  // 7.8's lacks it, and is refused as unknown before any other check).
  void RestoreCheckpointWithIdentity() {
    ASSERT_EQ(std::system(("cp " + DbDir(dir_) + "/IDENTITY " + dir_ +
                           "/ckpt/ && rm -rf " + DbDir(dir_) + " && cp -a " +
                           dir_ + "/ckpt " + DbDir(dir_))
                              .c_str()),
              0);
  }
  // Puts the copy `copy` in the DB's place (the DB aside), recovers it and
  // returns the status; then puts the DB back.
  rocksdb::Status RecoverCopyInstead(const std::string& copy) {
    const std::string db = DbDir(dir_), orig = dir_ + "/orig";
    if (std::system(("mv " + db + " " + orig + " && cp -a " + copy + " " + db)
                        .c_str()) != 0) {
      return rocksdb::Status::IOError("could not put the copy in place");
    }
    rocksdb::Status s = RecoverDB(BaseOptions(), db, {}, Ro(dir_), nullptr);
    if (std::system(("rm -rf " + db + " && mv " + orig + " " + db).c_str()) !=
        0) {
      return rocksdb::Status::IOError("could not put the DB back");
    }
    return s;
  }
  // The copy at dir_/ckpt, recovered in the DB's place, is refused naming
  // "older than the pool" and `why`; the DB itself then recovers and, if
  // `want` is given, holds d = want.
  void ExpectCopyRefusedThenDbRecovers(const std::string& what,
                                       const std::string& why,
                                       const std::string& want) {
    rocksdb::Status s = RecoverCopyInstead(dir_ + "/ckpt");
    ASSERT_FALSE(s.ok()) << what;
    EXPECT_TRUE(Has(s, "older than the pool")) << s.ToString();
    EXPECT_TRUE(Has(s, why)) << s.ToString();
    s = RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (want.empty()) return;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
    EXPECT_EQ(Get(db, "d"), want);
    delete db;
  }
};

// A checkpoint of life 1 restored after life 2 recovered life 1's writes
// and wrote its own: life 2's lists extend a state the checkpoint lacks
// ("a" = 1,2), so replaying them over it (a = 1,3) makes a state that never
// was. Life 2's lists record the DB's last sequence after its recovery as
// their floor, which the checkpoint falls short of: refused, naming the
// remedies; discarding them leaves the checkpoint's state.
TEST_F(LineageTest, CheckpointOfAnEarlierLifeRefusedAfterItsRecovery) {
  ASSERT_NO_FATAL_FAILURE(RunChild("lineage_life1", dir_));
  ASSERT_NO_FATAL_FAILURE(RunChild("lineage_life2", dir_));
  ASSERT_NO_FATAL_FAILURE(RestoreCheckpointWithIdentity());
  ExpectRefusedThenDiscarded("replayed over an older checkpoint",
                             {"older than the pool", "allow_older_db"}, "a",
                             "1");
}

// A checkpoint taken before a DeleteRange through OpenDB, restored after
// the crash: the DeleteRange's flush made its tombstone durable, but the
// memtable it flushed held no entry a rep had seen, so the floor stayed
// below it and the later write ("d") was replayed over the checkpoint with
// "a" back. The wrapper raises the floor to the tombstone's sequence
// after its flush: refused; discarding leaves the checkpoint's state.
TEST_F(LineageTest, CheckpointOlderThanADeleteRangeRefused) {
  ASSERT_NO_FATAL_FAILURE(RunChild("range_delete_after_checkpoint_life", dir_));
  ASSERT_NO_FATAL_FAILURE(RestoreCheckpointWithIdentity());
  ExpectRefusedThenDiscarded(
      "replayed over a checkpoint older than a "
      "DeleteRange",
      {"older than the pool"}, "a", "1");
}

// The floor a DeleteRange raises is the newest sequence number its flush
// put in a file, not RocksDB's LastSequence: an empty range, or a Put and
// SingleDelete the flush drops, take numbers no file holds, the reopened
// DB's last sequence stays below them, and the DB's own open was refused
// as older than the pool (the remedy named, a discard, would drop "d").
TEST_F(LineageTest, DeleteRangeWithoutFileSeqKeepsItsDbOpenable) {
  for (const char* life :
       {"empty_range_delete_life", "range_delete_dropped_pair_life"}) {
    SCOPED_TRACE(life);
    ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0);
    ASSERT_NO_FATAL_FAILURE(RunChild(life, dir_));
    rocksdb::Status s;
    rocksdb::DB* db = OpenWrapper(dir_, &s);
    ASSERT_NE(db, nullptr) << s.ToString();
    EXPECT_EQ(Get(db, "d"), "1");
    const bool empty = std::string(life) == "empty_range_delete_life";
    EXPECT_EQ(Get(db, "a"), empty ? "1" : "<NotFound: >");
    delete db;
  }
}

// A copy of the DB without its IDENTITY file (RocksDB 7.8's Checkpoint and
// BackupEngine do not copy it): the lists name the DB's IDENTITY, and a DB
// without one was taken as matching (a missing fact skipped the check).
// Unknown now refuses, naming the lists and the override.
TEST_F(LineageTest, DbWithoutIdentityIsUnknownAndRefused) {
  ASSERT_NO_FATAL_FAILURE(RunChild("identity_life", dir_));
  ASSERT_EQ(std::remove((DbDir(dir_) + "/IDENTITY").c_str()), 0);
  rocksdb::Status s;
  rocksdb::DB* db = OpenWrapper(dir_, &s);
  if (db) {
    ADD_FAILURE() << "claimed by a DB without IDENTITY: a=" << Get(db, "a");
    delete db;
    return;
  }
  EXPECT_TRUE(Has(s, "IDENTITY this DB does not have")) << s.ToString();
  EXPECT_TRUE(Has(s, "accept_incarnation")) << s.ToString();
}

// Column families on two pool_dirs were accepted at Open; after a kill,
// the DB reopened without the second pool's family's writes, and that
// pool's recovery was refused as "another database's". Now refused at
// Open, naming both pools; DBs opened one after another on one thread,
// each on its own pool, are not.
TEST_F(LineageTest, ColumnFamiliesOnTwoPoolsRefusedAtOpen) {
  ASSERT_EQ(std::system(("mkdir -p " + dir_).c_str()), 0);
  rocksdb::Options o = PlainOptions(dir_);
  rocksdb::ColumnFamilyOptions other(o);
  other.memtable_factory = Factory(dir_ + "/second");
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(
      o, DbDir(dir_), {{rocksdb::kDefaultColumnFamilyName, o}, {"b", other}},
      &hs, &db);
  ASSERT_FALSE(s.ok()) << "a DB on two pools was opened";
  EXPECT_TRUE(Has(s, "two pools")) << s.ToString();
  EXPECT_TRUE(Has(s, PoolDir(dir_))) << s.ToString();
  EXPECT_TRUE(Has(s, dir_ + "/second")) << s.ToString();
  // The same open with one pool, then a second DB on the other pool.
  other.memtable_factory = o.memtable_factory;
  s = rocksdb::DB::Open(o, DbDir(dir_),
                        {{rocksdb::kDefaultColumnFamilyName, o}, {"b", other}},
                        &hs, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (auto* h : hs) db->DestroyColumnFamilyHandle(h);
  delete db;
  rocksdb::Options o2 = BaseOptions();
  o2.memtable_factory = Factory(dir_ + "/second");
  db = nullptr;
  s = rocksdb::DB::Open(o2, dir_ + "/db2", &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  delete db;
}

// A copy of the DB directory taken in the same life, before a flush of a
// memtable that held writes from both sides of the copy: the flush made a
// write durable that the copy lacks, so replaying the later lists over
// the copy makes a state that never was (x=1 with d=1). The flush raises
// the floor to the newest sequence number it made durable, past the copy's
// last: refused; the original DB recovers.
TEST_F(LineageTest, CopyOlderThanAFlushOfItsLifeRefused) {
  ASSERT_NO_FATAL_FAILURE(RunChild("flush_after_copy_life", dir_));
  rocksdb::Status s = RecoverCopyInstead(dir_ + "/copy");
  ASSERT_FALSE(s.ok()) << "replayed over a copy older than a flush";
  EXPECT_TRUE(Has(s, "older than the pool")) << s.ToString();
  s = RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(
                  BaseOptions(), DbDir(dir_),
                  {{"default", BaseOptions()}, {"b", BaseOptions()}}, &hs, &db)
                  .ok());
  EXPECT_EQ(Get(db, hs[0], "d"), "1");
  EXPECT_EQ(Get(db, hs[1], "x"), "2");
  for (auto* h : hs) db->DestroyColumnFamilyHandle(h);
  delete db;
}

// A copy taken before its life dropped a column family, restored after
// the crash: the dropped family's lists would be replayed into the copy's
// family, and the other families' lists over a state without the drop.
// The drop marked the family's lists (S7): refused, naming the family;
// the DB that dropped it recovers, the family's lists discarded.
TEST_F(LineageTest, CopyOlderThanAFamilyDropRefused) {
  ASSERT_NO_FATAL_FAILURE(RunChild("dropped_family_life", dir_));
  ExpectCopyRefusedThenDbRecovers("replayed into a copy older than the drop",
                                  "dropped", "2");
}

// The pool's lists recovered into the DB, then an image of the pool taken
// before that recovery put back, with the DB's record of recovered lists
// gone (deleted; a checkpoint or backup of the DB would not have it
// either): the lists were replayed again and the Merge applied twice. The
// DB's OPTIONS file records the creation time of the newest list its
// family recovered (S8): refused, and the discard leaves the DB as it is.
TEST_F(LineageTest, OlderPoolImageWithoutTheRecordIsRefused) {
  ASSERT_NO_FATAL_FAILURE(RunChild("merge_crash", dir_));
  const std::string pool_file = PoolDir(dir_) + "/flintkv.pool";
  ASSERT_EQ(std::system(("cp " + pool_file + " " + dir_ + "/image").c_str()),
            0);
  rocksdb::Status s;
  rocksdb::DB* db = OpenWrapper(dir_, &s);
  ASSERT_NE(db, nullptr) << s.ToString();
  ASSERT_TRUE(db->Merge(rocksdb::WriteOptions(), "m", "y").ok());
  rocksdb::CompactRangeOptions cro;  // sequence numbers zeroed: presence
  cro.bottommost_level_compaction =  // checks cannot find the copy
      rocksdb::BottommostLevelCompaction::kForce;
  ASSERT_TRUE(db->CompactRange(cro, nullptr, nullptr).ok());
  EXPECT_EQ(Get(db, "m"), "x,y");
  delete db;
  ASSERT_EQ(
      std::system(("rm " + DbDir(dir_) + "/FLINTKV_RECOVERED_LISTS && cp " +
                   dir_ + "/image " + pool_file)
                      .c_str()),
      0);
  ExpectRefusedThenDiscarded("replayed again",
                             {"recovered already", "flintkv_tool discard"}, "m",
                             "x,y");
}

// The same when the dropped family's memtable was empty (the checkpoint
// flushed it): the drop left no list with entries, so no mark survived,
// and "d"=2 was replayed over a copy that still has "b". The marked empty
// list stays as the drop's evidence (S9): refused, naming the family.
TEST_F(LineageTest, CopyOlderThanADropOfAnEmptyFamilyRefused) {
  ASSERT_NO_FATAL_FAILURE(RunChild("empty_family_dropped_life", dir_));
  PoolSummary ps;
  ASSERT_TRUE(InspectPool(PoolDir(dir_), &ps).ok());
  int marked = 0;
  for (const ListSummary& l : ps.lists) {
    marked += l.family_dropped && l.entries == 0 && l.column_family_id == 1;
  }
  EXPECT_EQ(marked, 1) << "the drop's evidence";
  ExpectCopyRefusedThenDbRecovers("replayed into a copy older than the drop",
                                  "dropped", "2");
}

// A kill inside DropColumnFamily, after its MANIFEST edit and before its
// OPTIONS file: the dropped family's empty list is unmarked, and the DB,
// the one that wrote the lists, lacks its family. Empty lists are not
// held to "lacks the family" (S9): recovered, not refused as older.
TEST_F(LineageTest, KillInsideDropOfAnEmptyFamilyRecovers) {
  ASSERT_NO_FATAL_FAILURE(RunChild("drop_killed_before_options", dir_));
  std::vector<std::string> names;
  ASSERT_TRUE(
      rocksdb::DB::ListColumnFamilies(BaseOptions(), DbDir(dir_), &names).ok());
  ASSERT_EQ(names.size(), 1u) << "the kill came before the drop's MANIFEST "
                                 "edit: the case is not reached";
  rocksdb::Status s =
      RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
  EXPECT_EQ(Get(db, "d"), "1");
  delete db;
}

// A killed life's empty lists (its families without unflushed writes)
// stayed in the pool for good, one more set at every crash. Once their
// life's leftovers are recovered they hold nothing of use: dropped.
TEST_F(LineageTest, EmptyListsOfARecoveredLifeAreDropped) {
  ASSERT_NO_FATAL_FAILURE(RunChild("one_family_written_life", dir_));
  PoolSummary before;
  ASSERT_TRUE(InspectPool(PoolDir(dir_), &before).ok());
  ASSERT_EQ(before.lists.size(), 2u);  // "default"'s, and "b"'s empty one
  rocksdb::Status s =
      RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  PoolSummary after;
  ASSERT_TRUE(InspectPool(PoolDir(dir_), &after).ok());
  for (const ListSummary& l : after.lists) {
    ADD_FAILURE() << "list " << l.list_id << " of column family "
                  << l.column_family_id << " left in the pool";
  }
}

// A checkpoint of a crashed DB opened at its own path, with the DB's pool
// (the same config), while the DB is still where it was: it claimed and
// replayed the DB's unflushed writes (its OPTIONS file names their life),
// and the DB then opened without them. The life recorded its DB's
// directory (S10): refused, naming that DB; the DB itself recovers them.
TEST_F(LineageTest, CheckpointRecoveredBesideItsDbRefused) {
  ASSERT_NO_FATAL_FAILURE(RunChild("lineage_life1", dir_));
  rocksdb::Status s =
      RecoverDB(BaseOptions(), dir_ + "/ckpt", {}, Ro(dir_), nullptr);
  ASSERT_FALSE(s.ok()) << "the checkpoint took its DB's unflushed writes";
  EXPECT_TRUE(Has(s, "still exists")) << s.ToString();
  EXPECT_TRUE(Has(s, "flintkv_tool recover --db=" + DbDir(dir_)))
      << s.ToString();
  rocksdb::DB* db = OpenWrapper(dir_, &s);
  ASSERT_NE(db, nullptr) << s.ToString();
  EXPECT_EQ(Get(db, "a"), "1,2");
  delete db;
}

// The same DB moved (its old directory gone) is still the DB that wrote
// the lists: recovered at its new path.
TEST_F(LineageTest, MovedDbRecoversAtItsNewPath) {
  ASSERT_NO_FATAL_FAILURE(RunChild("lineage_life1", dir_));
  const std::string moved = dir_ + "/moved";
  ASSERT_EQ(std::system(("mv " + DbDir(dir_) + " " + moved).c_str()), 0);
  rocksdb::Status s = RecoverDB(BaseOptions(), moved, {}, Ro(dir_), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), moved, &db).ok());
  EXPECT_EQ(Get(db, "a"), "1,2");
  delete db;
}

// A copy taken before its life made a column family, restored after the
// crash: the new family's lists were discarded as a dropped family's and
// the others replayed over the copy, a state that never was (d=2 without
// c/x). A list of a family the DB lacks that its life did not drop (S7
// would have marked it) means the DB is older than the family: refused.
TEST_F(LineageTest, CopyOlderThanAFamilyRefused) {
  ASSERT_NO_FATAL_FAILURE(RunChild("family_after_copy_life", dir_));
  ExpectCopyRefusedThenDbRecovers("replayed over a copy older than a family",
                                  "lacks column family", "");
}

}  // namespace
}  // namespace flintkv

const int kChild = flintkv::test::RunScenarioIfChild();

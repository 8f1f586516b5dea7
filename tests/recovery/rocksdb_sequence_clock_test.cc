// The DB's sequence clock across recovery (P18, recovery/sequence_clock.h):
// after each recovery path (RecoverDB on the SST path and the memtable
// path, OpenDB) the DB's last sequence number is at least the newest one
// acknowledged before the crash, and the next write gets a larger one; a
// recovery killed between the clock's two MANIFEST edits leaves a column
// family that the next recovery removes.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "rocksdb/db.h"
#include "tests/recovery/rocksdb_scenario.h"

namespace flintkv {
namespace test {
namespace {

// WAL-less puts and merges, a flush in the middle (so that the MANIFEST's
// last sequence is neither 0 nor the newest), then the DB's last sequence
// number is written to <dir>/acked and the process dies.
void WriteThenDie(const std::string& d, rocksdb::DB* db) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  for (int i = 0; i < 200; i++) Check(db->Put(wo, Key(i), "a"), "put");
  Check(db->Flush(rocksdb::FlushOptions()), "flush");
  for (int i = 0; i < 300; i++) Check(db->Put(wo, Key(i), "b"), "put");
  for (int op = 0; op < 3; op++) {
    Check(db->Merge(wo, "m", std::to_string(op)), "merge");
  }
  std::ofstream(d + "/acked") << db->GetLatestSequenceNumber() << "\n";
  Die();
}

Register r1("plain_writes", [](const std::string& d) {
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  WriteThenDie(d, db);
});
Register r2("wrapper_writes", [](const std::string& d) {
  rocksdb::Options o = BaseOptions();
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  Check(OpenDB(o, DbDir(d), {{"default", o}}, &h, &db, Ro(d)), "open");
  WriteThenDie(d, db);
});
Register r3("recover_killed_at_clock", [](const std::string& d) {
  // FLINTKV_CRASH_POINT=recovery_after_clock_import kills it there.
  rocksdb::Status s = RecoverDB(BaseOptions(), DbDir(d), {}, Ro(d), nullptr);
  std::fprintf(stderr, "recovery returned: %s\n", s.ToString().c_str());
  std::abort();
});

const int kChild = RunScenarioIfChild();

class ClockTest : public ScenarioTest {
 protected:
  uint64_t Acked() {
    uint64_t v = 0;
    std::ifstream(dir_ + "/acked") >> v;
    EXPECT_GT(v, 500u);
    return v;
  }
  // Every write of WriteThenDie, the clock at or past `acked`, and a new
  // write above it.
  void ExpectState(rocksdb::DB* db, uint64_t acked) {
    for (int i = 0; i < 300; i++) ASSERT_EQ(Get(db, Key(i)), "b") << i;
    ASSERT_EQ(Get(db, "m"), "0,1,2");
    EXPECT_GE(db->GetLatestSequenceNumber(), acked);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "after", "x").ok());
    EXPECT_GT(db->GetLatestSequenceNumber(), acked);
  }
  bool HasClockFamily() {
    std::vector<std::string> names;
    EXPECT_TRUE(
        rocksdb::DB::ListColumnFamilies(BaseOptions(), DbDir(dir_), &names)
            .ok());
    return std::count(names.begin(), names.end(), kClockCf) > 0;
  }
  static constexpr const char* kClockCf = "flintkv_sequence_clock";
};

TEST_F(ClockTest, RecoverDbKeepsTheClockOnBothPaths) {
  for (bool sst : {true, false}) {
    SCOPED_TRACE(sst ? "SST path" : "memtable path");
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild("plain_writes", dir_));
    const uint64_t acked = Acked();
    RecoveryOptions ro = Ro(dir_);
    ro.ingest_sst = sst;
    RecoveryReport rep;
    rocksdb::Status s = RecoverDB(BaseOptions(), DbDir(dir_), {}, ro, &rep);
    ASSERT_TRUE(s.ok()) << s.ToString();
    // The memtable path's own writes may carry the clock far enough.
    if (sst) {
      EXPECT_GE(rep.sequence_raised_to, acked) << rep.ToString();
    }
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
    ASSERT_NO_FATAL_FAILURE(ExpectState(db, acked));
    delete db;
    EXPECT_FALSE(HasClockFamily());
  }
}

TEST_F(ClockTest, OpenDbKeepsTheClock) {
  ASSERT_NO_FATAL_FAILURE(RunChild("wrapper_writes", dir_));
  const uint64_t acked = Acked();
  rocksdb::Options o = BaseOptions();
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      OpenDB(o, DbDir(dir_), {{"default", o}}, &h, &db, Ro(dir_));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectState(db, acked));
  for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
  delete db;
}

// Killed between the import that raised the clock and the drop of its
// column family: the MANIFEST holds the raised clock and the family. The
// next recovery, by RecoverDB or OpenDB, drops the family and completes.
TEST_F(ClockTest, KilledBetweenImportAndDropRecovers) {
  for (bool wrapper : {false, true}) {
    SCOPED_TRACE(wrapper ? "OpenDB" : "RecoverDB");
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild("plain_writes", dir_));
    const uint64_t acked = Acked();
    ASSERT_NO_FATAL_FAILURE(RunChild("recover_killed_at_clock", dir_,
                                     "recovery_after_clock_import"));
    ASSERT_TRUE(HasClockFamily()) << "the kill missed the window";
    rocksdb::DB* db = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> h;
    rocksdb::Options o = BaseOptions();
    if (wrapper) {
      rocksdb::Status s =
          OpenDB(o, DbDir(dir_), {{"default", o}}, &h, &db, Ro(dir_));
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(h.size(), 1u) << "the clock's handle reached the caller";
    } else {
      rocksdb::Status s = RecoverDB(o, DbDir(dir_), {}, Ro(dir_), nullptr);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &db).ok());
    }
    ASSERT_NO_FATAL_FAILURE(ExpectState(db, acked));
    for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
    delete db;
    EXPECT_FALSE(HasClockFamily());
  }
}

// A user's column family of the clock's name is the user's: recovery and
// OpenDB leave it and its data alone (only a family holding exactly the
// clock's key is taken for one a crash left).
TEST_F(ClockTest, UserFamilyOfTheClockNameIsKept) {
  {
    rocksdb::Options o = PlainOptions(dir_);
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &db).ok());
    rocksdb::ColumnFamilyHandle* cf = nullptr;
    ASSERT_TRUE(db->CreateColumnFamily(o, kClockCf, &cf).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf, "mine", "kept").ok());
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), cf).ok());
    db->DestroyColumnFamilyHandle(cf);
    delete db;
  }
  ASSERT_TRUE(
      RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), nullptr).ok());
  ASSERT_TRUE(HasClockFamily());
  rocksdb::Options o = BaseOptions();
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = OpenDB(o, DbDir(dir_), {{"default", o}, {kClockCf, o}},
                             &h, &db, Ro(dir_));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(Get(db, h[1], "mine"), "kept");
  for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
  delete db;
}

}  // namespace
}  // namespace test
}  // namespace flintkv

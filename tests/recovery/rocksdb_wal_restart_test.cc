// RocksDB's defaults (WAL on) with the plain factory: a clean Close or a
// crash, then DB::Open, just works when the DB's WAL holds every write the
// pool kept (pool_session.h S5, wal_coverage.h C1-C2); a DB with WAL-less
// writes the WAL does not hold keeps every acknowledged write as before
// (refused, then recovered). Each test reads every acknowledged key back.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "tests/recovery/rocksdb_scenario.h"

namespace flintkv {
namespace test {
namespace {

constexpr int kKeys = 400;

// Puts Key(i) = "v<i>" and three Merge operands per key, WAL on (RocksDB's
// default WriteOptions), in a DB whose write buffer holds them all.
void WriteWalOn(rocksdb::DB* db) {
  for (int i = 0; i < kKeys; i++) {
    Check(db->Put(rocksdb::WriteOptions(), Key(i), "v" + std::to_string(i)),
          "put");
  }
  for (int op = 0; op < 3; op++) {
    for (int i = 0; i < 50; i++) {
      Check(
          db->Merge(rocksdb::WriteOptions(), "m" + Key(i), std::to_string(op)),
          "merge");
    }
  }
}

Register r1("wal_on_crash", [](const std::string& d) {
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  WriteWalOn(db);
  Die();
});

// WAL-on writes, then WAL-less ones the WAL cannot hold, then a crash.
Register r2("mixed_crash", [](const std::string& d) {
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  WriteWalOn(db);
  rocksdb::WriteOptions off;
  off.disableWAL = true;
  Check(db->Put(off, "nowal", "acked"), "put");
  Check(db->Merge(off, "m" + Key(0), "3"), "merge");
  Die();
});

const int kChild = RunScenarioIfChild();

class WalRestartTest : public ScenarioTest {
 protected:
  // Every acknowledged write of WriteWalOn, each Merge operand once.
  void ExpectWalOnWrites(rocksdb::DB* db, const std::string& m0 = "0,1,2") {
    for (int i = 0; i < kKeys; i++) {
      ASSERT_EQ(Get(db, Key(i)), "v" + std::to_string(i)) << i;
    }
    ASSERT_EQ(Get(db, "m" + Key(0)), m0);
    for (int i = 1; i < 50; i++) ASSERT_EQ(Get(db, "m" + Key(i)), "0,1,2") << i;
  }
  // flintkv_tool's recovery, then every write of the "mixed" runs.
  void RecoverAndExpectMixedWrites() {
    ASSERT_TRUE(
        RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), nullptr).ok());
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
    ASSERT_NO_FATAL_FAILURE(ExpectWalOnWrites(db, "0,1,2,3"));
    EXPECT_EQ(Get(db, "nowal"), "acked");
    delete db;
  }
  size_t PoolLists() {
    PoolSummary ps;
    EXPECT_TRUE(InspectPool(PoolDir(dir_), &ps).ok());
    size_t n = 0;
    for (const auto& l : ps.lists) n += l.entries > 0;
    return n;
  }
  static std::string Text(const rocksdb::Status& s) { return s.ToString(); }
  static int Count(const std::string& s, const std::string& what) {
    int n = 0;
    for (size_t p = s.find(what); p != std::string::npos;
         p = s.find(what, p + 1)) {
      n++;
    }
    return n;
  }
};

// A clean Close with the WAL on leaves the memtables in the pool (RocksDB
// does not flush them); the next DB::Open finds them all in the WAL, drops
// them and lets RocksDB's WAL replay restore them. Three restarts in a row:
// the Merge operands are applied once each time.
TEST_F(WalRestartTest, CleanCloseReopens) {
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
    WriteWalOn(db);
    ASSERT_TRUE(db->Close().ok());
    delete db;
  }
  ASSERT_GE(PoolLists(), 1u) << "the Close flushed: nothing to check";
  for (int round = 0; round < 3; round++) {
    SCOPED_TRACE("restart " + std::to_string(round));
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_NO_FATAL_FAILURE(ExpectWalOnWrites(db));
    ASSERT_TRUE(
        db->Put(rocksdb::WriteOptions(), "round", std::to_string(round)).ok());
    delete db;
  }
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
  EXPECT_EQ(Get(db, "round"), "2");
  delete db;
}

// A kill with every write WAL-logged: DB::Open again, no tool run.
TEST_F(WalRestartTest, KillReopens) {
  ASSERT_NO_FATAL_FAILURE(RunChild("wal_on_crash", dir_));
  ASSERT_GE(PoolLists(), 1u);
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectWalOnWrites(db));
  delete db;
  EXPECT_EQ(PoolLists(), 0u) << "the WAL-held lists were not dropped";
}

// WAL on and off mixed, avoid_flush_during_shutdown set at run time: the
// Close leaves WAL-less writes in the pool, and the open is refused in
// terms of the WAL, naming the tool and wal_logged=true, "flintkv:" once.
// Recovery then brings every write back, each operand once.
TEST_F(WalRestartTest, MixedWithAvoidFlushKeepsEveryWrite) {
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
    ASSERT_TRUE(
        db->SetDBOptions({{"avoid_flush_during_shutdown", "true"}}).ok());
    WriteWalOn(db);
    rocksdb::WriteOptions off;
    off.disableWAL = true;
    ASSERT_TRUE(db->Put(off, "nowal", "acked").ok());
    ASSERT_TRUE(db->Merge(off, "m" + Key(0), "3").ok());
    ASSERT_TRUE(db->Close().ok());
    delete db;
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_FALSE(s.ok()) << "opened without the WAL-less writes";
  delete db;
  const std::string m = Text(s);
  EXPECT_EQ(Count(m, "flintkv: "), 1) << m;
  EXPECT_NE(m.find("not in the WAL"), std::string::npos) << m;
  EXPECT_NE(m.find("disableWAL"), std::string::npos) << m;
  EXPECT_NE(m.find("flintkv_tool recover"), std::string::npos) << m;
  EXPECT_NE(m.find("wal_logged=true"), std::string::npos) << m;
  ASSERT_NO_FATAL_FAILURE(RecoverAndExpectMixedWrites());
}

// The same mix, killed: refused, then recovered exactly.
TEST_F(WalRestartTest, MixedKillKeepsEveryWrite) {
  ASSERT_NO_FATAL_FAILURE(RunChild("mixed_crash", dir_));
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_FALSE(s.ok()) << "opened without the WAL-less writes";
  delete db;
  EXPECT_NE(Text(s).find("2 of their"), std::string::npos) << Text(s);
  ASSERT_NO_FATAL_FAILURE(RecoverAndExpectMixedWrites());
}

// C2: a WAL record that fails its checksum ends the read, and what the WAL
// no longer proves stays refused (RocksDB's point-in-time recovery would
// stop there too and lose the rest).
TEST_F(WalRestartTest, DamagedWalIsNoProof) {
  ASSERT_NO_FATAL_FAILURE(RunChild("wal_on_crash", dir_));
  std::string wal;
  for (int n = 1; n < 100 && wal.empty(); n++) {
    char name[32];
    std::snprintf(name, sizeof(name), "/%06d.log", n);
    struct stat st;
    if (stat((DbDir(dir_) + name).c_str(), &st) == 0 && st.st_size > 4096) {
      wal = DbDir(dir_) + name;
    }
  }
  ASSERT_FALSE(wal.empty()) << "no WAL file with data";
  {
    std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(2000);
    char c;
    f.read(&c, 1);
    c ^= 0x20;
    f.seekp(2000);
    f.write(&c, 1);
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_FALSE(s.ok()) << "took a damaged WAL for proof";
  delete db;
  EXPECT_NE(Text(s).find("checksum mismatch"), std::string::npos) << Text(s);
  EXPECT_GE(PoolLists(), 1u) << "a refused open dropped lists";
}

// Without the record of where the DB lives (a pool copied without it, a
// run of an older FlintKV) nothing can be checked: refused as before,
// saying why.
TEST_F(WalRestartTest, NoRecordedLocationRefuses) {
  ASSERT_NO_FATAL_FAILURE(RunChild("wal_on_crash", dir_));
  ASSERT_EQ(std::remove((PoolDir(dir_) + "/flintkv.db_location").c_str()), 0);
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_FALSE(s.ok());
  delete db;
  EXPECT_NE(Text(s).find("WAL cannot be found"), std::string::npos) << Text(s);
  ASSERT_TRUE(
      RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), nullptr).ok());
  ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectWalOnWrites(db));
  delete db;
}

// The record names the DB by its OPTIONS file, not by path alone: once the
// DB was opened by another life (here a stock open without the plugin,
// which replays and flushes the WAL), the leftovers are not dropped on the
// WAL's word.
TEST_F(WalRestartTest, DbOpenedElsewhereSinceIsNoProof) {
  ASSERT_NO_FATAL_FAILURE(RunChild("wal_on_crash", dir_));
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &db).ok());
    delete db;
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_FALSE(s.ok());
  delete db;
  EXPECT_NE(Text(s).find("opened again since"), std::string::npos) << Text(s);
}

}  // namespace
}  // namespace test
}  // namespace flintkv

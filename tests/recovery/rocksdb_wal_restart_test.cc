// RocksDB's defaults (WAL on) with the plain factory: a clean Close or a
// crash, then DB::Open, just works when the DB's WAL holds every write the
// pool kept (pool_session.h S5, wal_coverage.h C1-C2); a DB with WAL-less
// writes the WAL does not hold keeps every acknowledged write as before
// (refused, then recovered). Each test reads every acknowledged key back.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "flintkv/inspect.h"
#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/utilities/transaction_db.h"
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
  // The DB's WAL files, oldest first.
  std::vector<std::string> WalFiles() {
    std::vector<std::string> out;
    for (int n = 1; n < 200; n++) {
      char name[32];
      std::snprintf(name, sizeof(name), "/%06d.log", n);
      if (access((DbDir(dir_) + name).c_str(), F_OK) == 0) {
        out.push_back(DbDir(dir_) + name);
      }
    }
    return out;
  }
  static uint64_t Size(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
  }
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
  EXPECT_NE(m.find("were not found in the WAL"), std::string::npos) << m;
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
  for (const std::string& w : WalFiles()) {
    if (wal.empty() && Size(w) > 4096) wal = w;
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
  EXPECT_NE(Text(s).find("read only up to"), std::string::npos) << Text(s);
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

// best_efforts_recovery replays no WAL: the WAL's word is no proof there.
TEST_F(WalRestartTest, BestEffortsRecoveryIsRefused) {
  ASSERT_NO_FATAL_FAILURE(RunChild("wal_on_crash", dir_));
  const size_t lists = PoolLists();
  rocksdb::Options o = PlainOptions(dir_);
  o.best_efforts_recovery = true;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, DbDir(dir_), &db);
  ASSERT_FALSE(s.ok()) << "opened without replaying the WAL";
  delete db;
  EXPECT_NE(Text(s).find("best_efforts_recovery"), std::string::npos)
      << Text(s);
  EXPECT_EQ(PoolLists(), lists);
}

// A TransactionDB's batches start with a Noop, and its commits carry
// markers: RocksDB asserts that a handler accepts them. Plain writes and
// one-phase commits reopen with no tool run.
TEST_F(WalRestartTest, TransactionDbReopens) {
  for (int round = 0; round < 2; round++) {
    rocksdb::TransactionDB* t = nullptr;
    rocksdb::Status s = rocksdb::TransactionDB::Open(
        PlainOptions(dir_), rocksdb::TransactionDBOptions(), DbDir(dir_), &t);
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (round == 0) {
      for (int i = 0; i < 100; i++) {
        ASSERT_TRUE(t->Put(rocksdb::WriteOptions(), Key(i), "v").ok());
      }
      rocksdb::Transaction* txn = t->BeginTransaction(rocksdb::WriteOptions());
      ASSERT_TRUE(txn->Put("txnkey", "x").ok());
      ASSERT_TRUE(txn->Commit().ok());
      delete txn;
      ASSERT_TRUE(t->Close().ok());
      ASSERT_GE(PoolLists(), 1u);
    } else {
      for (int i = 0; i < 100; i++) ASSERT_EQ(Get(t, Key(i)), "v") << i;
      EXPECT_EQ(Get(t, "txnkey"), "x");
    }
    delete t;
  }
}

// C2: a zeroed region in an older WAL ends the read. RocksDB's reader
// skips the rest of that block, finds a fragment without its start and
// ends point-in-time recovery there, dropping every later WAL: a list held
// only by a later WAL must not be dropped on its word. The refused open
// leaves the pool as it was.
TEST_F(WalRestartTest, ZeroedRegionInOlderWalIsNoProof) {
  rocksdb::Options o = PlainOptions(dir_);
  o.write_buffer_size = 1 << 20;
  o.min_write_buffer_number_to_merge = 2;
  o.max_write_buffer_number = 4;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &db).ok());
  std::vector<std::string> wals = WalFiles();
  ASSERT_EQ(wals.size(), 1u);
  const std::string wal = wals[0];
  for (int i = 0; i < 100; i++) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), Key(i), "v").ok());
  }
  // One WAL record of about `bytes` (a range deletion: in no list).
  auto record = [&](size_t bytes) {
    const size_t half = (bytes - 7 - 17) / 2;
    ASSERT_TRUE(db->DeleteRange(rocksdb::WriteOptions(),
                                db->DefaultColumnFamily(),
                                "zzz" + std::string(half - 3, 'a'),
                                "zzz" + std::string(half - 3, 'b'))
                    .ok());
  };
  const uint64_t off = Size(wal);
  ASSERT_LT(off % 32768, 32768u - 8192);
  uint64_t to_page = 4096 - off % 4096;
  if (to_page < 400) to_page += 4096;
  ASSERT_NO_FATAL_FAILURE(record(to_page));
  const uint64_t page = Size(wal);
  ASSERT_EQ(page % 4096, 0u) << page;
  ASSERT_NO_FATAL_FAILURE(record(40000));  // starts at `page`, spans blocks
  uint64_t switched = 0;
  for (int i = 0; switched == 0 && i < 1000; i++) {  // a new WAL
    ASSERT_NO_FATAL_FAILURE(record(40000));
    db->GetIntProperty("rocksdb.num-immutable-mem-table", &switched);
  }
  ASSERT_EQ(switched, 1u);
  for (int i = 0; i < 100; i++) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "p" + Key(i), "w").ok());
  }
  ASSERT_TRUE(db->Close().ok());
  delete db;
  ASSERT_GE(WalFiles().size(), 2u);
  const size_t lists = PoolLists();
  {
    std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(page);
    const std::string zeros(4096, '\0');
    f.write(zeros.data(), zeros.size());
  }
  db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, DbDir(dir_), &db);
  ASSERT_FALSE(s.ok()) << "dropped lists a WAL RocksDB skips held";
  delete db;
  EXPECT_NE(Text(s).find("zeroed region"), std::string::npos) << Text(s);
  EXPECT_EQ(PoolLists(), lists) << "a refused open changed the pool";
}

// A recycling log writer zero-pads the last 7 to 10 bytes of a block (its
// headers are 11 bytes): that is padding, not a zeroed region. Tiny
// records put such a tail in almost every block.
TEST_F(WalRestartTest, RecycledLogsReopen) {
  rocksdb::Options o = PlainOptions(dir_);
  // RocksDB 7.8 recycles logs only in this recovery mode.
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords;
  o.recycle_log_file_num = 2;
  o.write_buffer_size = 64 << 20;
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &db).ok());
    for (int i = 0; i < 30000; i++) {
      ASSERT_TRUE(
          db->Put(rocksdb::WriteOptions(), Key(i), std::string(i % 7, 'v'))
              .ok());
    }
    ASSERT_TRUE(db->Close().ok());
    delete db;
  }
  ASSERT_GE(PoolLists(), 1u);
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, DbDir(dir_), &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (int i = 0; i < 30000; i += 7) {
    ASSERT_EQ(Get(db, Key(i)), std::string(i % 7, 'v')) << i;
  }
  delete db;
}

// The open's wal_dir is compared with the one the DB's OPTIONS file
// names as a directory, not as a string (RocksDB sanitizes it only after
// the factory has seen it).
TEST_F(WalRestartTest, WalDirSpelledDifferentlyReopens) {
  rocksdb::Options o = PlainOptions(dir_);
  o.wal_dir = DbDir(dir_) + "/wal";
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &db).ok());
    WriteWalOn(db);
    ASSERT_TRUE(db->Close().ok());
    delete db;
  }
  o.wal_dir += "/";
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, DbDir(dir_), &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectWalOnWrites(db));
  delete db;
}

}  // namespace
}  // namespace test
}  // namespace flintkv

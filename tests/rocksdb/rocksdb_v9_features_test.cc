// What RocksDB 9 adds on the memtable path, with the flintkv memtable
// (built only against RocksDB 9, tests/CMakeLists.txt):
// - paranoid_memory_checks: RocksDB then reads the memtable through
//   GetAndValidate / NextAndValidate / PrevAndValidate / SeekAndValidate,
//   which MemTableRep implements as NotSupported by default;
// - TimedPut (kTypeValuePreferredSeqno entries), recovered after a crash
//   with the WAL off, both by replay and into SST files;
// - memtable_max_range_deletions (flushes on range deletions) across a
//   kill, with the OpenDB wrapper.
#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/utilities/debug.h"
#include "rocksdb/version.h"
#include "rocksdb/write_batch.h"
#include "tests/recovery/rocksdb_scenario.h"

static_assert(ROCKSDB_MAJOR >= 9, "RocksDB 9 features");

namespace flintkv {
namespace {

using test::DbDir;
using test::Key;
using test::PlainOptions;
using test::Ro;

// With the seqno-to-time mapping on, a flush keeps a TimedPut's type
// (0x18), so a TimedPut replayed as a plain Put would show.
rocksdb::Options Timed(rocksdb::Options o) {
  o.preserve_internal_time_seconds = 1000000;
  return o;
}

// Writes a few TimedPuts and a Put with the WAL off, then dies.
const test::Register kTimed("timed_put", [](const std::string& dir) {
  rocksdb::Options o = Timed(PlainOptions(dir));
  rocksdb::DB* db = nullptr;
  test::Check(rocksdb::DB::Open(o, DbDir(dir), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  for (int i = 0; i < 50; i++) {
    rocksdb::WriteBatch b;
    test::Check(b.TimedPut(db->DefaultColumnFamily(), Key(i), "t" + Key(i),
                           /*write_unix_time=*/1700000000 + i),
                "timed put");
    test::Check(db->Write(wo, &b), "write");
  }
  test::Check(db->Put(wo, "plain", "p"), "put");
  test::Die();
});
// OpenDB with memtable_max_range_deletions=2 (RocksDB 8.10+: a memtable
// with that many range deletions asks for a flush): range deletions and
// writes around them, killed while the memtables switch and flush.
rocksdb::Options RangeLimited() {
  rocksdb::Options o = test::BaseOptions();
  o.memtable_max_range_deletions = 2;
  return o;
}
rocksdb::DB* OpenWrapper(const std::string& dir, const rocksdb::Options& o) {
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  test::Check(OpenDB(o, DbDir(dir), {{"default", o}}, &h, &db, Ro(dir)),
              "OpenDB");
  return db;
}
const test::Register kRanges("range_deletion_limit", [](const std::string& d) {
  rocksdb::DB* db = OpenWrapper(d, RangeLimited());
  rocksdb::WriteOptions wo;
  for (int r = 0; r < 10; r++) {
    for (int i = 0; i < 100; i++) {
      test::Check(db->Put(wo, Key(r * 100 + i), "v" + std::to_string(r)),
                  "put");
    }
    test::Check(db->DeleteRange(wo, db->DefaultColumnFamily(),
                                Key(r * 100 + 10), Key(r * 100 + 20)),
                "delete range");
  }
  test::Die();
});

const int kChild = test::RunScenarioIfChild();

class RocksV9Test : public test::ScenarioTest {
 protected:
  // user key -> "type:value" of every version, for the timed_put keys.
  static std::vector<std::string> Versions(rocksdb::DB* db) {
    std::vector<rocksdb::KeyVersion> v;
    EXPECT_TRUE(rocksdb::GetAllKeyVersions(db, Key(0), Key(99), 1000, &v).ok());
    std::vector<std::string> out;
    for (const auto& kv : v) {
      // A flushed TimedPut (type 0x18) carries its preferred sequence number
      // after the value: a number local to each DB, so it is left out.
      std::string value = kv.value;
      if (kv.type == 0x18 && value.size() >= 8) value.resize(value.size() - 8);
      out.push_back(kv.user_key + "=" + std::to_string(kv.type) + ":" + value);
    }
    return out;
  }
  // The timed_put scenario's TimedPuts in a DB with RocksDB's own memtable,
  // flushed.
  std::vector<std::string> Baseline() {
    const std::string dir = dir_ + "/baseline";
    rocksdb::DB* db = nullptr;
    EXPECT_TRUE(rocksdb::DB::Open(Timed(test::BaseOptions()), dir, &db).ok());
    if (db == nullptr) return {};
    for (int i = 0; i < 50; i++) {
      rocksdb::WriteBatch b;
      EXPECT_TRUE(b.TimedPut(db->DefaultColumnFamily(), Key(i), "t" + Key(i),
                             1700000000 + i)
                      .ok());
      EXPECT_TRUE(db->Write(rocksdb::WriteOptions(), &b).ok());
    }
    EXPECT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    std::vector<std::string> v = Versions(db);
    delete db;
    return v;
  }
  // Overwrites the one occurrence of `from` in the files of `pool_dir` with
  // `to` (same length), through a shared mapping: what a flipped PMEM bit
  // does to a key under a running DB.
  void Rot(const std::string& pool_dir, const std::string& from,
           const std::string& to) {
    ASSERT_EQ(from.size(), to.size());
    glob_t g;
    ASSERT_EQ(glob((pool_dir + "/*").c_str(), 0, nullptr, &g), 0);
    int found = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
      int fd = open(g.gl_pathv[i], O_RDWR);
      ASSERT_GE(fd, 0);
      struct stat st;
      ASSERT_EQ(fstat(fd, &st), 0);
      if (st.st_size == 0) {
        close(fd);
        continue;
      }
      char* p = static_cast<char*>(
          mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
      ASSERT_NE(p, MAP_FAILED);
      char* end = p + st.st_size;
      for (char* q = p; q + from.size() <= end; q++) {
        q = static_cast<char*>(std::memchr(q, from[0], end - q));
        if (q == nullptr) break;
        if (q + from.size() <= end &&
            std::memcmp(q, from.data(), from.size()) == 0) {
          std::memcpy(q, to.data(), to.size());
          found++;
        }
      }
      munmap(p, st.st_size);
      close(fd);
    }
    globfree(&g);
    ASSERT_EQ(found, 1) << "occurrences of " << from << " in " << pool_dir;
  }
  // A DB with the flintkv memtable in `dir`, paranoid_memory_checks as asked.
  static void OpenFlint(const std::string& dir, bool paranoid,
                        rocksdb::DB** db) {
    rocksdb::Options o = PlainOptions(dir);
    o.paranoid_memory_checks = paranoid;
    ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir), db).ok());
  }
  static rocksdb::WriteOptions WalOff() {
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    return wo;
  }
  // A DB in dir_/<tag> with keys key-1..3, key-2 then rotted to key-9 in
  // PMEM; returns the statuses of a forward and a backward scan.
  void RottedScans(const std::string& tag, bool paranoid, rocksdb::Status* fwd,
                   rocksdb::Status* bwd) {
    const std::string dir = dir_ + "/" + tag;
    rocksdb::DB* db = nullptr;
    ASSERT_NO_FATAL_FAILURE(OpenFlint(dir, paranoid, &db));
    for (int i = 1; i <= 3; i++) {
      ASSERT_TRUE(db->Put(WalOff(), "key-" + std::to_string(i), "v").ok());
    }
    ASSERT_NO_FATAL_FAILURE(Rot(test::PoolDir(dir), "key-2", "key-9"));
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
    }
    *fwd = it->status();
    for (it->SeekToLast(); it->Valid(); it->Prev()) {
    }
    *bwd = it->status();
    it.reset();
    delete db;
  }
};

// Before: every read of a flintkv memtable with paranoid_memory_checks
// failed with "GetAndValidate() not implemented" (or the iterator's
// NotSupported).
TEST_F(RocksV9Test, ParanoidMemoryChecksReadTheMemtable) {
  rocksdb::DB* db = nullptr;
  ASSERT_NO_FATAL_FAILURE(OpenFlint(dir_, /*paranoid=*/true, &db));
  for (int i = 0; i < 200; i += 2) {
    ASSERT_TRUE(db->Put(WalOff(), Key(i), "v" + Key(i)).ok());
  }
  for (int i = 0; i < 200; i++) {
    std::string v;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), Key(i), &v);
    if (i % 2 == 0) {
      ASSERT_TRUE(s.ok()) << i << ": " << s.ToString();
      EXPECT_EQ(v, "v" + Key(i));
    } else {
      EXPECT_TRUE(s.IsNotFound()) << i << ": " << s.ToString();
    }
  }
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(rocksdb::ReadOptions()));
  int n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(n, 100);
  n = 0;
  for (it->SeekToLast(); it->Valid(); it->Prev()) n++;
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(n, 100);
  it->Seek(Key(51));
  ASSERT_TRUE(it->Valid()) << it->status().ToString();
  EXPECT_EQ(it->key().ToString(), Key(52));
  it.reset();
  delete db;
}

// A key rotted in PMEM out of order: with the checks on, scans that cross
// it say Corruption; without them (the control) they return no error.
TEST_F(RocksV9Test, ParanoidMemoryChecksReportKeysOutOfOrder) {
  rocksdb::Status fwd, bwd;
  ASSERT_NO_FATAL_FAILURE(RottedScans("paranoid", true, &fwd, &bwd));
  EXPECT_TRUE(fwd.IsCorruption()) << fwd.ToString();
  EXPECT_TRUE(bwd.IsCorruption()) << bwd.ToString();
  ASSERT_NO_FATAL_FAILURE(RottedScans("plain", false, &fwd, &bwd));
  EXPECT_TRUE(fwd.ok()) << fwd.ToString();
  EXPECT_TRUE(bwd.ok()) << bwd.ToString();
}

// TimedPut entries (RocksDB 9) survive a crash with the WAL off, replayed
// into the DB or built into SST files.
TEST_F(RocksV9Test, TimedPutRecoveredAfterCrash) {
  for (bool sst : {false, true}) {
    SCOPED_TRACE(sst ? "into SST files" : "replay");
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(test::RunChild("timed_put", dir_));
    RecoveryOptions ro = Ro(dir_);
    ro.ingest_sst = sst;
    RecoveryReport report;
    rocksdb::Status s =
        RecoverDB(Timed(test::BaseOptions()), DbDir(dir_), {}, ro, &report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(
        rocksdb::DB::Open(Timed(test::BaseOptions()), DbDir(dir_), &db).ok());
    for (int i = 0; i < 50; i++) EXPECT_EQ(Get(db, Key(i)), "t" + Key(i)) << i;
    EXPECT_EQ(Get(db, "plain"), "p");
    // Entry by entry (type and stored value, which carries the write time)
    // as RocksDB itself leaves the same TimedPuts after a flush.
    EXPECT_EQ(Versions(db), Baseline());
    delete db;
  }
}

// memtable_max_range_deletions with the OpenDB wrapper: the flushes it
// asks for and a kill leave every write and range deletion in place.
TEST_F(RocksV9Test, RangeDeletionLimitSurvivesCrash) {
  ASSERT_NO_FATAL_FAILURE(test::RunChild("range_deletion_limit", dir_));
  rocksdb::DB* db = OpenWrapper(dir_, RangeLimited());
  for (int k = 0; k < 1000; k++) {
    const int i = k % 100;
    const std::string want =
        i >= 10 && i < 20 ? "<NotFound: >" : "v" + std::to_string(k / 100);
    EXPECT_EQ(Get(db, Key(k)), want) << k;
  }
  delete db;
}

}  // namespace
}  // namespace flintkv

// What RocksDB operators do across a database's life, with the plain
// factory and flintkv::OpenDB: several DBs per pool, a DB moved or copied,
// a tool without the plugin touching the DB between a crash and recovery,
// a failed flush at Close, options changed at run time, a pool too small.
// Each either keeps every acknowledged write in the right DB or is refused
// with a message that says what happened and what to run
// (docs/rocksdb_recovery.md, "Operations"; pool_session.h S1-S4).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "flintkv/inspect.h"
#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "memtable/rocksdb/pool_session.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/sst_file_writer.h"
#include "rocksdb/utilities/checkpoint.h"
#include "tests/recovery/rocksdb_scenario.h"

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

// Options with 1 MiB write buffers on a flintkv pool of pool_size bytes.
rocksdb::Options SmallPoolOptions(const std::string& pool_dir,
                                  uint64_t pool_size) {
  MemTableOptions mo;
  mo.pool_dir = pool_dir;
  mo.pool_size = pool_size;
  rocksdb::Options o = BaseOptions();
  Check(NewMemTableRepFactory(mo, &o.memtable_factory), "factory");
  o.write_buffer_size = 1 << 20;
  return o;
}

// 300 WAL-less puts k000000..k000299 = "a<key>", then SIGKILL.
void CrashWithPuts(const std::string& dir, const std::string& prefix) {
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(PlainOptions(dir), DbDir(dir), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  for (int i = 0; i < 300; i++) {
    Check(db->Put(wo, Key(i), prefix + Key(i)), "put");
  }
  Die();
}

// Two DBs that share one pool_dir (DB dirs <dir>/db and <dir>/other/db).
Register r1("crash_a", [](const std::string& d) { CrashWithPuts(d, "a"); });
Register r2("crash_k_old", [](const std::string& d) {
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  Check(db->Put(wo, "base", "flushed"), "put");
  Check(db->Flush(rocksdb::FlushOptions()), "flush");
  Check(db->Put(wo, "k", "old"), "put");
  Die();
});

// Checkpoint after "a"; with `flush_after`, "b" is flushed after the
// checkpoint; then "c" stays unflushed and the process dies.
void CheckpointThenCrash(const std::string& d, bool flush_after) {
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  Check(db->Put(wo, "a", "1"), "put a");
  rocksdb::Checkpoint* cp = nullptr;
  Check(rocksdb::Checkpoint::Create(db, &cp), "checkpoint");
  Check(cp->CreateCheckpoint(d + "/ckpt"), "create checkpoint");
  delete cp;
  if (flush_after) {
    Check(db->Put(wo, "b", "2"), "put b");
    Check(db->Flush(rocksdb::FlushOptions()), "flush");
  }
  Check(db->Put(wo, "c", "3"), "put c");
  Die();
}
Register r3("checkpoint_flush_crash",
            [](const std::string& d) { CheckpointThenCrash(d, true); });
Register r4("checkpoint_crash",
            [](const std::string& d) { CheckpointThenCrash(d, false); });

// Two DB::Opens on one pool that race past the S1 check: each waits, in
// its LockFile (after the factory's ValidateOptions, before any memtable),
// until the other got there too. Then each writes its own keys, WAL off.
class BarrierEnv : public rocksdb::EnvWrapper {
 public:
  explicit BarrierEnv(std::atomic<int>* arrived)
      : EnvWrapper(rocksdb::Env::Default()), arrived_(arrived) {}
  const char* Name() const override { return "BarrierEnv"; }
  rocksdb::Status LockFile(const std::string& f,
                           rocksdb::FileLock** l) override {
    if (f.size() >= 4 && f.compare(f.size() - 4, 4, "LOCK") == 0) {
      arrived_->fetch_add(1);
      while (arrived_->load() < 2) std::this_thread::yield();
    }
    return EnvWrapper::LockFile(f, l);
  }

 private:
  std::atomic<int>* arrived_;
};
// shared: one factory object for both (one Options, as a program opening
// several DBs alike would): the second open must be refused, since a DB's
// OPTIONS file records the life of the factory that serialized it.
void RacingOpens(const std::string& d, bool shared) {
  std::system(("mkdir -p " + d + "/other").c_str());
  std::atomic<int> arrived{0};
  BarrierEnv env_a(&arrived), env_b(&arrived);
  auto factory = test::Factory(d);
  auto run = [&](rocksdb::Env* env, const std::string& db_dir,
                 const std::string& prefix) -> rocksdb::DB* {
    rocksdb::Options o = PlainOptions(d);  // own factory, same pool_dir
    if (shared) o.memtable_factory = factory;
    o.env = env;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, db_dir, &db);
    if (!s.ok()) {
      arrived.fetch_add(1);  // let the other open go on
      Check(s.IsBusy() && shared ? rocksdb::Status::OK() : s, "racing open");
      return nullptr;
    }
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    for (int i = 0; i < 100; i++) Check(db->Put(wo, Key(i), prefix), "put");
    return db;
  };
  rocksdb::DB* a = nullptr;
  std::thread t([&] { a = run(&env_a, DbDir(d), "a"); });
  rocksdb::DB* b = run(&env_b, DbDir(d + "/other"), "b");
  t.join();
  const int opened = (a != nullptr) + (b != nullptr);
  Check(opened == (shared ? 1 : 2) ? rocksdb::Status::OK()
                                   : rocksdb::Status::Aborted("opened"),
        "racing opens");
  Die();
}
Register r5("racing_opens",
            [](const std::string& d) { RacingOpens(d, false); });
Register r7("racing_opens_shared_factory",
            [](const std::string& d) { RacingOpens(d, true); });

// The foreign-writer campaign's child: WAL-less puts and deletes on 40
// keys, chosen by FLINTKV_CAMPAIGN_SEED, some flushed, then SIGKILL. Every
// operation was acknowledged; ChildModel() replays the same choices.
constexpr int kCampaignKeys = 40;
std::map<std::string, std::string> ChildModel(uint64_t seed,
                                              rocksdb::DB* db = nullptr) {
  std::mt19937_64 rng(seed);
  std::map<std::string, std::string> model;
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  const int ops = 50 + static_cast<int>(rng() % 200);
  for (int i = 0; i < ops; i++) {
    std::string k = Key(static_cast<int>(rng() % kCampaignKeys));
    if (rng() % 4 == 0) {
      model.erase(k);
      if (db) Check(db->Delete(wo, k), "delete");
    } else {
      std::string v = "c" + std::to_string(seed) + "." + std::to_string(i);
      model[k] = v;
      if (db) Check(db->Put(wo, k, v), "put");
    }
    const bool flush = rng() % 60 == 0;  // drawn with or without a DB
    if (db && flush) Check(db->Flush(rocksdb::FlushOptions()), "flush");
  }
  return model;
}
Register r6("campaign_child", [](const std::string& d) {
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(PlainOptions(d), DbDir(d), &db), "open");
  ChildModel(std::strtoull(std::getenv("FLINTKV_CAMPAIGN_SEED"), nullptr, 10),
             db);
  Die();
});

// A small pool that passed Open, write_buffer_size raised by SetOptions past
// it (persisted in OPTIONS), 300 WAL-less puts, SIGKILL.
Register r8("crash_small_pool_after_set_options", [](const std::string& d) {
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(SmallPoolOptions(PoolDir(d), 24ull << 20), DbDir(d),
                          &db),
        "open");
  Check(db->SetOptions({{"write_buffer_size", "268435456"}}), "set options");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  for (int i = 0; i < 300; i++) Check(db->Put(wo, Key(i), "s" + Key(i)), "put");
  Die();
});

// A read-only instance sharing the primary's Logger opens while the
// primary is still inside DB::Open: right as the primary writes its OPTIONS
// file, on another thread, and stays open while the primary switches a
// memtable. Its memtable is another instance's (S6), not the primary's
// current one; the primary's successor is confirmed at the switch, and
// its WAL-less write survives the kill.
class RoOpenDuringOptionsFs : public rocksdb::FileSystemWrapper {
 public:
  RoOpenDuringOptionsFs(const std::shared_ptr<rocksdb::FileSystem>& t,
                        std::function<void()> hook)
      : rocksdb::FileSystemWrapper(t), hook_(std::move(hook)) {}
  const char* Name() const override { return "RoOpenDuringOptionsFs"; }
  rocksdb::IOStatus NewWritableFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    if (f.find("/OPTIONS-") != std::string::npos && !fired_.exchange(true)) {
      std::thread(hook_).join();
    }
    return target()->NewWritableFile(f, o, r, dbg);
  }

 private:
  std::function<void()> hook_;
  std::atomic<bool> fired_{false};
};
Register r9("read_only_opens_inside_primary_open", [](const std::string& d) {
  rocksdb::Options o = PlainOptions(d);
  Check(rocksdb::Env::Default()->CreateDirIfMissing(DbDir(d)), "mkdir");
  Check(rocksdb::CreateLoggerFromOptions(DbDir(d), o, &o.info_log), "logger");
  rocksdb::DB* ro = nullptr;
  auto fs = std::make_shared<RoOpenDuringOptionsFs>(
      rocksdb::FileSystem::Default(), [&] {
        rocksdb::Options ro_opts = o;
        ro_opts.env = rocksdb::Env::Default();
        Check(rocksdb::DB::OpenForReadOnly(ro_opts, DbDir(d), &ro), "ro open");
      });
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  o.env = env.get();
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(o, DbDir(d), &db), "open");
  if (!ro) std::abort();  // the hook must have run inside the open
  rocksdb::WriteOptions nowal;
  nowal.disableWAL = true;
  Check(db->Put(nowal, "k", "v1"), "put");
  Check(db->Flush(rocksdb::FlushOptions()), "flush");  // switches
  Check(db->Put(nowal, "k", "v2"), "put");
  Die();
});

const int kChild = test::RunScenarioIfChild();

class OperationsTest : public test::ScenarioTest {
 protected:
  rocksdb::Status Recover(const std::string& db_dir, RecoveryOptions ro) {
    return RecoverDB(BaseOptions(), db_dir, {}, ro, nullptr);
  }
  rocksdb::DB* OpenStock(const std::string& db_dir) {
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(BaseOptions(), db_dir, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return db;
  }
  int Tool(const std::string& args) {
    return test::RunCommand(std::string(FLINTKV_TOOL) + " " + args,
                            dir_ + "/tool_out");
  }
  // Lists in the pool that recovery would replay (-1: no pool summary).
  int Leftovers() {
    PoolSummary ps;
    if (!InspectPool(PoolDir(dir_), &ps).ok()) return -1;
    int n = 0;
    for (const auto& l : ps.lists) n += l.leftover;
    return n;
  }
  static bool Has(const rocksdb::Status& s, const std::string& what) {
    return s.ToString().find(what) != std::string::npos;
  }
};

// (S1) A second DB on a pool that serves an open DB is refused at
// DB::Open, naming pool_dir, with either way of opening.
TEST_F(OperationsTest, SecondDbOnOnePoolRefusedAtOpen) {
  rocksdb::Options o = PlainOptions(dir_);
  rocksdb::DB* a = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &a).ok());
  rocksdb::DB* b = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, dir_ + "/b", &b);  // one factory
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Has(s, "pool_dir")) << s.ToString();
  delete b;
  b = nullptr;
  s = rocksdb::DB::Open(PlainOptions(dir_), dir_ + "/b", &b);  // its own
  EXPECT_FALSE(s.ok()) << "a second factory on the same pool_dir";
  delete b;
  b = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  s = OpenDB(BaseOptions(), dir_ + "/c",
             {{rocksdb::kDefaultColumnFamilyName, BaseOptions()}}, &h, &b,
             Ro(dir_));
  EXPECT_FALSE(s.ok()) << "OpenDB on a pool in use";
  delete b;
  // Once the first DB is closed, the pool serves another.
  delete a;
  ASSERT_TRUE(rocksdb::DB::Open(o, dir_ + "/b", &b).ok());
  delete b;
}

// (S1) Two DB::Opens that race past the refusal (both validated
// before either created a memtable) get two lives, each bound to its own
// DB's info Logger: after a crash each DB recovers exactly its own writes.
// (Otherwise DB A recovers both DBs' keys and DB B none.)
TEST_F(OperationsTest, RacingOpensOnOnePoolKeepTheirOwnData) {
  // With one factory object for both, one of them is refused (Busy); the
  // other then recovers as usual.
  ASSERT_NO_FATAL_FAILURE(RunChild("racing_opens_shared_factory", dir_));
  std::system(("rm -rf " + dir_).c_str());
  ASSERT_NO_FATAL_FAILURE(RunChild("racing_opens", dir_));
  for (const auto& [db_dir, prefix] :
       {std::pair<std::string, std::string>{DbDir(dir_), "a"},
        {DbDir(dir_ + "/other"), "b"}}) {
    SCOPED_TRACE(db_dir);
    rocksdb::Status s = Recover(db_dir, Ro(dir_));
    ASSERT_TRUE(s.ok()) << s.ToString();
    rocksdb::DB* db = OpenStock(db_dir);
    ASSERT_NE(db, nullptr);
    for (int i = 0; i < 100; i++) ASSERT_EQ(Get(db, Key(i)), prefix) << i;
    delete db;
  }
}

// A read-only instance of the DB in the same process (RocksDB allows it)
// fills memtables from the WAL without ever calling the factory's
// ValidateOptions: its lists are unowned and dropped, never kept to be
// replayed later over newer, compacted writes (kept, they would bring k back as
// v1 after a recovery).
TEST_F(OperationsTest, ReadOnlyInstanceLeavesNothingToReplay) {
  // Sharing the primary's info Logger too (a Logger is no identity): its
  // memtables were taken for the primary's, kept at its Close, and the next
  // recovery put "k" back to v1 and applied the Merge twice. They are
  // unconfirmed now (S6); the primary's own, switched after, are not.
  for (bool shared_logger : {false, true}) {
    SCOPED_TRACE(shared_logger ? "shared Logger" : "own Logger");
    std::system(("rm -rf " + dir_ + " && mkdir -p " + dir_).c_str());
    rocksdb::Options o = PlainOptions(dir_);
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "k", "v1").ok());  // WAL on
    ASSERT_TRUE(db->Merge(rocksdb::WriteOptions(), "m", "x").ok());
    rocksdb::Options ro_opts = o;
    if (shared_logger) ro_opts.info_log = db->GetDBOptions().info_log;
    rocksdb::DB* ro = nullptr;
    ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(ro_opts, DbDir(dir_), &ro).ok());
    EXPECT_EQ(Get(ro, "k"), "v1");
    delete ro;
    rocksdb::WriteOptions nowal;
    nowal.disableWAL = true;
    ASSERT_TRUE(db->Put(nowal, "k", "v2").ok());
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    ASSERT_TRUE(db->Put(nowal, "z", "1").ok());
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    rocksdb::CompactRangeOptions cro;
    cro.bottommost_level_compaction =
        rocksdb::BottommostLevelCompaction::kForce;
    ASSERT_TRUE(db->CompactRange(cro, nullptr, nullptr).ok());  // seqs zeroed
    ASSERT_TRUE(db->Put(nowal, "after", "1").ok());  // a switched memtable
    ASSERT_TRUE(
        db->SetDBOptions({{"avoid_flush_during_shutdown", "true"}}).ok());
    delete db;
    EXPECT_EQ(Leftovers(), 1) << "only the primary's last memtable is kept";
    rocksdb::Status s = Recover(DbDir(dir_), Ro(dir_));
    ASSERT_TRUE(s.ok()) << s.ToString();
    db = OpenStock(DbDir(dir_));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(Get(db, "k"), "v2");
    EXPECT_EQ(Get(db, "m"), "x");
    EXPECT_EQ(Get(db, "after"), "1");
    delete db;
  }
}

TEST_F(OperationsTest, ReadOnlyInstanceOpenedInsidePrimaryOpenOwnsNothing) {
  ASSERT_NO_FATAL_FAILURE(
      RunChild("read_only_opens_inside_primary_open", dir_));
  rocksdb::Status s = Recover(DbDir(dir_), Ro(dir_));
  ASSERT_TRUE(s.ok()) << s.ToString();
  rocksdb::DB* db = OpenStock(DbDir(dir_));
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, "k"), "v2") << "the primary's switched memtable lost";
  delete db;
}

// A read-only instance sharing the primary's Logger outlives the primary,
// and another opens after the primary closed: neither instance's memtables
// belong to the closed life (S6), so only the primary's own list is left
// and recovery applies its Merge once.
TEST_F(OperationsTest, ReadOnlyInstancesOutlivingThePrimaryOwnNothing) {
  rocksdb::Options o = PlainOptions(dir_);
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &db).ok());
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "k", "v1").ok());
  ASSERT_TRUE(db->Merge(rocksdb::WriteOptions(), "m", "x").ok());
  rocksdb::Options ro_opts = o;
  ro_opts.info_log = db->GetDBOptions().info_log;
  rocksdb::DB* ro1 = nullptr;
  ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(ro_opts, DbDir(dir_), &ro1).ok());
  delete db;  // WAL-logged writes: Close keeps the primary's list
  rocksdb::DB* ro2 = nullptr;
  ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(ro_opts, DbDir(dir_), &ro2).ok());
  EXPECT_EQ(Get(ro2, "m"), "x");
  delete ro2;
  delete ro1;
  EXPECT_EQ(Leftovers(), 1) << "only the primary's memtable is kept";
  rocksdb::Status s = Recover(DbDir(dir_), Ro(dir_));
  ASSERT_TRUE(s.ok()) << s.ToString();
  db = OpenStock(DbDir(dir_));
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, "k"), "v1");
  EXPECT_EQ(Get(db, "m"), "x");
  delete db;
}

// A reopen whose WAL replay RocksDB flushes (the default after a Close
// with WAL-logged writes) destroys the open's memtable before it makes the
// next: the open's life has no list for a moment. It kept its Logger, so
// the later memtables are still the DB's, and a WAL-less write made after
// the reopen is kept at a Close that does not flush (and after a kill).
TEST_F(OperationsTest, ReopenThatFlushesWalReplayKeepsLaterWalLessWrites) {
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "walon", "1").ok());
  delete db;  // WAL on: not flushed
  ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
  ASSERT_TRUE(db->SetDBOptions({{"avoid_flush_during_shutdown", "true"}}).ok());
  rocksdb::WriteOptions nowal;
  nowal.disableWAL = true;
  ASSERT_TRUE(db->Put(nowal, "nowal", "acked").ok());
  delete db;
  EXPECT_EQ(Leftovers(), 1) << "the WAL-less write's memtable is kept";
  rocksdb::Status s = Recover(DbDir(dir_), Ro(dir_));
  ASSERT_TRUE(s.ok()) << s.ToString();
  db = OpenStock(DbDir(dir_));
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, "nowal"), "acked");
  EXPECT_EQ(Get(db, "walon"), "1");
  delete db;
}

// A read-only instance sharing the primary's Logger opens, with FlintKV,
// a column family the primary keeps on RocksDB's skiplist: a family the
// primary's life has no memtable of. Its memtable is unconfirmed (only a
// CreateColumnFamily, which asks the new memtable IsSnapshotSupported and
// writes the OPTIONS file on the same thread, confirms one; the primary's
// SetOptions on that thread writes an OPTIONS file but asks nothing), so
// nothing of it is kept or replayed over the primary's later, compacted
// writes.
TEST_F(OperationsTest, ReadOnlyInstanceOfAFamilyThePrimaryKeepsElsewhere) {
  rocksdb::Options o = PlainOptions(dir_);
  o.create_missing_column_families = true;
  const std::vector<rocksdb::ColumnFamilyDescriptor> primary = {
      {rocksdb::kDefaultColumnFamilyName, o}, {"plain", BaseOptions()}};
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), primary, &h, &db).ok());
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), h[1], "p", "old").ok());
  ASSERT_TRUE(db->Merge(rocksdb::WriteOptions(), h[1], "m", "x").ok());
  rocksdb::Options ro_opts = o;
  ro_opts.info_log = db->GetDBOptions().info_log;
  std::vector<rocksdb::ColumnFamilyHandle*> rh;
  rocksdb::DB* ro = nullptr;
  ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(
                  ro_opts, DbDir(dir_),
                  {{rocksdb::kDefaultColumnFamilyName, o}, {"plain", o}}, &rh,
                  &ro)
                  .ok());
  ASSERT_TRUE(
      db->SetOptions(h[0], {{"disable_auto_compactions", "true"}}).ok());
  for (auto* x : rh) ro->DestroyColumnFamilyHandle(x);
  delete ro;
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), h[1], "p", "new").ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), h[1]).ok());
  rocksdb::CompactRangeOptions cro;
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  ASSERT_TRUE(db->CompactRange(cro, h[1], nullptr, nullptr).ok());
  for (auto* x : h) db->DestroyColumnFamilyHandle(x);
  delete db;
  EXPECT_EQ(Leftovers(), 0) << "the read-only instance's memtable was kept";
}

// Dropping a family whose memtable does not support snapshots (a skiplist
// family with inplace_update_support) makes RocksDB ask every other
// family's memtable, default included; with a FlintKV family dropped
// before and its handle still held, those queries do not cover the life.
// They are not taken for drops (S7): the live families' lists are not
// marked, and the DB's own recovery is not refused.
TEST_F(OperationsTest, DropOfAFamilyWithoutSnapshotsMarksNoLiveFamily) {
  rocksdb::Options o = PlainOptions(dir_);
  o.allow_concurrent_memtable_write = false;
  rocksdb::Options inplace = BaseOptions();
  inplace.inplace_update_support = true;
  inplace.allow_concurrent_memtable_write = false;
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  o.create_missing_column_families = true;
  ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_),
                                {{rocksdb::kDefaultColumnFamilyName, o},
                                 {"a", o},
                                 {"c", inplace},
                                 {"b", o}},
                                &h, &db)
                  .ok());
  ASSERT_TRUE(db->SetDBOptions({{"avoid_flush_during_shutdown", "true"}}).ok());
  rocksdb::WriteOptions nowal;
  nowal.disableWAL = true;
  ASSERT_TRUE(db->Put(nowal, h[0], "k", "acked").ok());
  ASSERT_TRUE(db->DropColumnFamily(h[1]).ok());  // "a": its handle kept
  ASSERT_TRUE(db->DropColumnFamily(h[2]).ok());  // "c"
  for (auto* x : h) db->DestroyColumnFamilyHandle(x);
  delete db;
  EXPECT_EQ(Leftovers(), 1);
  rocksdb::Status s =
      RecoverDB(BaseOptions(), DbDir(dir_),
                {{rocksdb::kDefaultColumnFamilyName, BaseOptions()},
                 {"b", BaseOptions()}},
                Ro(dir_), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<rocksdb::ColumnFamilyHandle*> rh;
  ASSERT_TRUE(
      rocksdb::DB::Open(BaseOptions(), DbDir(dir_),
                        {{rocksdb::kDefaultColumnFamilyName, BaseOptions()},
                         {"b", BaseOptions()}},
                        &rh, &db)
          .ok());
  EXPECT_EQ(Get(db, rh[0], "k"), "acked");
  for (auto* x : rh) db->DestroyColumnFamilyHandle(x);
  delete db;
}

// (S3) Lists left by DB A are never replayed into DB B that names
// the same pool; A recovers them all.
TEST_F(OperationsTest, ListsOfAnotherDbAreNotReplayed) {
  const std::string other = dir_ + "/other";
  ASSERT_EQ(std::system(("mkdir -p " + other).c_str()), 0);
  // DB B exists and has been used with FlintKV on the same pool.
  {
    rocksdb::Options o = BaseOptions();
    o.memtable_factory = test::Factory(dir_);  // pool <dir>/pool
    rocksdb::DB* b = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(other), &b).ok());
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;  // Close flushes: nothing left in the pool
    ASSERT_TRUE(b->Put(wo, "b-only", "1").ok());
    delete b;
  }
  ASSERT_NO_FATAL_FAILURE(RunChild("crash_a", dir_));  // DB A, same pool
  rocksdb::Status s = Recover(DbDir(other), Ro(dir_));
  ASSERT_FALSE(s.ok()) << "A's memtables replayed into B";
  EXPECT_TRUE(Has(s, "not " + DbDir(other) + "'s")) << s.ToString();
  rocksdb::DB* b = OpenStock(DbDir(other));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(Get(b, Key(7)), "<NotFound: >");
  EXPECT_EQ(Get(b, "b-only"), "1");
  delete b;
  ASSERT_TRUE(Recover(DbDir(dir_), Ro(dir_)).ok());
  rocksdb::DB* a = OpenStock(DbDir(dir_));
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 300; i++) ASSERT_EQ(Get(a, Key(i)), "a" + Key(i)) << i;
  delete a;
}

// A write by a tool without the plugin after the crash is not
// silently undone: recovery refuses, changing nothing, and names the
// override; the override replays the pool as documented.
TEST_F(OperationsTest, ForeignWriteAfterCrashIsNotReverted) {
  ASSERT_NO_FATAL_FAILURE(RunChild("crash_k_old", dir_));
  {
    rocksdb::DB* db = OpenStock(DbDir(dir_));  // stock ldb put k new
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "k", "new").ok());
    delete db;
  }
  rocksdb::Status s = Recover(DbDir(dir_), Ro(dir_));
  ASSERT_FALSE(s.ok()) << "recovery replayed over a foreign write";
  EXPECT_TRUE(Has(s, "without FlintKV")) << s.ToString();
  EXPECT_TRUE(Has(s, "allow_foreign_open")) << s.ToString();
  // The same refusal for a wrong --db: it must not call the lists that DB's.
  EXPECT_TRUE(Has(s, "is not the DB that wrote them (check --db"))
      << s.ToString();
  rocksdb::DB* db = OpenStock(DbDir(dir_));
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, "k"), "new");
  delete db;
  // The pool still holds the list: the plain factory still refuses.
  db = nullptr;
  s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  EXPECT_FALSE(s.ok());
  delete db;
}

// The foreign write as a campaign: per round a child writes and dies; a process
// without the plugin then puts, deletes or ingests random keys; recovery
// must refuse, change nothing in the pool and keep every foreign write;
// the override then brings back every acknowledged write the foreign
// process did not touch. 12 rounds (1000 with FLINTKV_LONG_TESTS=1).
TEST_F(OperationsTest, ForeignWriterCampaign) {
  const int rounds = test::LongMode() ? 1000 : 12;
  const char* seed_env = std::getenv("FLINTKV_SEED");  // fixed unless set
  const uint64_t base =
      seed_env ? std::strtoull(seed_env, nullptr, 10) : 20261126;
  for (int round = 0; round < rounds; round++) {
    const uint64_t seed = base + round;
    SCOPED_TRACE("round " + std::to_string(round) +
                 " FLINTKV_SEED=" + std::to_string(base));
    std::system(("rm -rf " + dir_).c_str());
    setenv("FLINTKV_CAMPAIGN_SEED", std::to_string(seed).c_str(), 1);
    ASSERT_NO_FATAL_FAILURE(RunChild("campaign_child", dir_));
    std::map<std::string, std::string> acked = ChildModel(seed);
    // The foreign process (stock RocksDB, WAL on).
    std::mt19937_64 rng(seed * 7919);
    std::map<std::string, std::string> foreign;  // key -> value ("" deleted)
    {
      rocksdb::DB* db = OpenStock(DbDir(dir_));
      ASSERT_NE(db, nullptr);
      const int n = 1 + static_cast<int>(rng() % 10);
      for (int i = 0; i < n; i++) {
        std::string k = Key(static_cast<int>(rng() % kCampaignKeys));
        if (rng() % 3 == 0) {
          ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), k).ok());
          foreign[k] = "";
        } else {
          foreign[k] = "f" + std::to_string(i);
          ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, foreign[k]).ok());
        }
      }
      if (rng() % 3 == 0) {  // an ingested file
        rocksdb::SstFileWriter w(rocksdb::EnvOptions(), BaseOptions());
        std::string sst = dir_ + "/ext.sst";
        std::string k = Key(kCampaignKeys + 1);
        ASSERT_TRUE(w.Open(sst).ok());
        ASSERT_TRUE(w.Put(k, "ingested").ok());
        ASSERT_TRUE(w.Finish().ok());
        ASSERT_TRUE(
            db->IngestExternalFile({sst}, rocksdb::IngestExternalFileOptions())
                .ok());
        foreign[k] = "ingested";
      }
      delete db;
    }
    PoolSummary before;
    ASSERT_TRUE(InspectPool(PoolDir(dir_), &before).ok());
    bool unflushed = false;  // the child's last op may have been a flush
    for (const auto& l : before.lists) unflushed |= l.entries > 0;
    rocksdb::Status s = Recover(DbDir(dir_), Ro(dir_));
    if (!unflushed) {
      ASSERT_TRUE(s.ok()) << "nothing to recover: " << s.ToString();
      continue;
    }
    ASSERT_FALSE(s.ok()) << "recovery after a foreign open";
    EXPECT_TRUE(Has(s, "allow_foreign_open")) << s.ToString();
    PoolSummary after;
    ASSERT_TRUE(InspectPool(PoolDir(dir_), &after).ok());
    ASSERT_EQ(before.lists.size(), after.lists.size());
    for (size_t i = 0; i < before.lists.size(); i++) {
      EXPECT_EQ(before.lists[i].list_id, after.lists[i].list_id);
      EXPECT_EQ(before.lists[i].entries, after.lists[i].entries);
    }
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(
        rocksdb::DB::OpenForReadOnly(BaseOptions(), DbDir(dir_), &db).ok());
    for (const auto& [k, v] : foreign) {
      EXPECT_EQ(Get(db, k), v.empty() ? "<NotFound: >" : v) << k;
    }
    delete db;
    RecoveryOptions ro = Ro(dir_);
    ro.allow_foreign_open = true;
    ASSERT_TRUE(Recover(DbDir(dir_), ro).ok());
    db = OpenStock(DbDir(dir_));
    ASSERT_NE(db, nullptr);
    for (int i = 0; i < kCampaignKeys; i++) {
      const std::string k = Key(i);
      if (foreign.count(k)) continue;  // ordered by sequence number only
      auto it = acked.find(k);
      ASSERT_EQ(Get(db, k), it == acked.end() ? "<NotFound: >" : it->second)
          << k;
    }
    delete db;
  }
}

// A failed flush at close:
// ListLifecycleTest.FailedCloseFlushKeepsAcknowledgedWrites.

// avoid_flush_during_shutdown set at run time (no factory hook
// sees it) keeps the unflushed memtable in the pool; the next open asks
// for recovery, which brings the write back.
TEST_F(OperationsTest, AvoidFlushSetAtRunTimeKeepsWrites) {
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
    ASSERT_TRUE(
        db->SetDBOptions({{"avoid_flush_during_shutdown", "true"}}).ok());
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    ASSERT_TRUE(db->Put(wo, "k", "acked").ok());
    ASSERT_TRUE(db->Close().ok());
    delete db;
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_FALSE(s.ok()) << "opened over an unrecovered memtable";
  EXPECT_TRUE(Has(s, "flintkv_tool recover")) << s.ToString();
  delete db;
  ASSERT_TRUE(Recover(DbDir(dir_), Ro(dir_)).ok());
  db = OpenStock(DbDir(dir_));
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, "k"), "acked");
  delete db;
}

// A DB and its pool copied elsewhere recover from the pool named
// on the command line; the pool_dir the copied OPTIONS file names is
// neither opened nor created.
TEST_F(OperationsTest, CopiedDbRecoversFromNamedPoolOnly) {
  ASSERT_NO_FATAL_FAILURE(RunChild("crash_a", dir_));
  const std::string copy = dir_ + "/copy";
  ASSERT_EQ(
      std::system(("mkdir -p " + copy + " && cp -a " + DbDir(dir_) + " " +
                   PoolDir(dir_) + " " + copy + "/ && rm -rf " + PoolDir(dir_))
                      .c_str()),
      0);
  // The tool loads the copy's OPTIONS file, which names the old pool_dir.
  ASSERT_EQ(
      Tool("recover --db=" + DbDir(copy) + " --pool_dir=" + PoolDir(copy)), 0);
  EXPECT_NE(access(PoolDir(dir_).c_str(), F_OK), 0)
      << "recovery created the stale pool_dir of the OPTIONS file";
  rocksdb::DB* db = OpenStock(DbDir(copy));
  ASSERT_NE(db, nullptr);
  for (int i = 0; i < 300; i++) ASSERT_EQ(Get(db, Key(i)), "a" + Key(i)) << i;
  delete db;
}

// Recovery from a pool_dir that holds no pool says so and creates
// none (a mistyped or stale path must not get a fresh, empty pool).
TEST_F(OperationsTest, RecoveryNeverCreatesAPool) {
  ASSERT_EQ(std::system(("mkdir -p " + dir_).c_str()), 0);
  {  // The DB's OPTIONS file names <dir>/pool, which then goes away.
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    ASSERT_TRUE(db->Put(wo, "k", "v").ok());
    delete db;
  }
  ASSERT_EQ(std::system(("rm -rf " + PoolDir(dir_)).c_str()), 0);
  const std::string typo = dir_ + "/no_such_pool";
  EXPECT_EQ(Tool("recover --db=" + DbDir(dir_) + " --pool_dir=" + typo), 1);
  EXPECT_NE(access(typo.c_str(), F_OK), 0) << "recovery created a pool";
  EXPECT_NE(access(PoolDir(dir_).c_str(), F_OK), 0)
      << "recovery created the OPTIONS file's stale pool";
  rocksdb::Status s = Recover(DbDir(dir_), Ro(dir_));
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(access(PoolDir(dir_).c_str(), F_OK), 0);
}

// A checkpoint (or backup) taken before the crash and restored over the DB
// has the same OPTIONS file family, so S3 lets the claim through; but if
// the crashed life flushed after the checkpoint, SST files are missing and
// replaying the pool's newer memtable would make a state that never was:
// refused (flushed_floor). With no flush in between, the checkpoint is the
// DB as it was at the crash, and recovery completes it exactly.
TEST_F(OperationsTest, RestoredCheckpointOlderThanPoolRefused) {
  for (bool flushed_after : {true, false}) {
    SCOPED_TRACE(flushed_after ? "flush after the checkpoint" : "no flush");
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(RunChild(
        flushed_after ? "checkpoint_flush_crash" : "checkpoint_crash", dir_));
    ASSERT_EQ(std::system(("rm -rf " + DbDir(dir_) + " && mv " + dir_ +
                           "/ckpt " + DbDir(dir_))
                              .c_str()),
              0);
    rocksdb::Status s = Recover(DbDir(dir_), Ro(dir_));
    if (flushed_after) {
      ASSERT_FALSE(s.ok()) << "replayed over an older checkpoint";
      EXPECT_TRUE(Has(s, "older than the pool")) << s.ToString();
      EXPECT_TRUE(Has(s, "allow_older_db")) << s.ToString();
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    rocksdb::DB* db = OpenStock(DbDir(dir_));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(Get(db, "a"), "1");
    EXPECT_EQ(Get(db, "c"), "3");
    delete db;
  }
}

// The Open-time size check, the reserve and the pressure threshold
// are one rule (SpaceRule): a pool too small is refused at Open with the
// numbers; a configuration that passes Open survives filling the pool many
// times over (RocksDB asserts if a new memtable asks for a flush).
TEST_F(OperationsTest, PoolSpaceIsOneRule) {
  rocksdb::Options o = SmallPoolOptions(PoolDir(dir_), 16ull << 20);
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, DbDir(dir_), &db);
  ASSERT_FALSE(s.ok()) << "16 MiB pool with 1 MiB chunks passed Open";
  EXPECT_TRUE(Has(s, "too small")) << s.ToString();
  EXPECT_TRUE(Has(s, "at least")) << s.ToString();
  delete db;
  o.memtable_factory.reset();
  // The smallest pool the rule allows for the same options.
  std::system(("rm -rf " + PoolDir(dir_)).c_str());
  // 3 x 1 MiB memtables + 2 x 8 MiB reserve
  o = SmallPoolOptions(PoolDir(dir_) + "2", 24ull << 20);
  db = nullptr;
  s = rocksdb::DB::Open(o, DbDir(dir_), &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  const std::string v(1000, 'v');
  for (int i = 0; i < 40000; i++) {  // ~40 MB through a 24 MiB pool
    ASSERT_TRUE(db->Put(wo, Key(i % 5000), v).ok()) << i;
  }
  EXPECT_EQ(Get(db, Key(4999)), v);
  delete db;
}

// SetOptions raising write_buffer_size past the pool (the plain factory is
// not asked; the wrapper refuses it, WrapperRefusesRefusedOptionsAtSetOptions)
// must not stop writes: the pool's pressure still switches memtables. The
// writers waited forever for a switch that never came.
TEST_F(OperationsTest, PlainFactoryWritesGoOnAfterSetOptionsRaisesWriteBuffer) {
  rocksdb::Options o = SmallPoolOptions(PoolDir(dir_), 24ull << 20);
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, DbDir(dir_), &db).ok());
  ASSERT_TRUE(db->SetOptions({{"write_buffer_size", "1073741824"}}).ok());
  // A writer waiting forever leaves no DB to close.
  test::Watchdog watchdog(std::chrono::seconds(120),
                          "writes still wait 120 s after SetOptions raised "
                          "write_buffer_size past the pool");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  const std::string v(1000, 'v');
  for (int i = 0; i < 60000; i++) {  // ~60 MB through a 24 MiB pool
    ASSERT_TRUE(db->Put(wo, Key(i), v).ok()) << i;
  }
  watchdog.Done();
  for (int i = 0; i < 60000; i += 997) EXPECT_EQ(Get(db, Key(i)), v) << i;
  delete db;
}

// flintkv::OpenDB refuses a write that does not fit in the pool even with
// every memtable flushed (one entry larger than the pool, or a batch of
// entries that each fit but together do not, also with a DeleteRange, also
// under the reserve by its data size), writes nothing of it and
// stays writable; a large entry that fits only once the memtables are
// flushed is flushed for and written. In the memtable all of these waited
// for pool space forever: only a flush frees it, the write's own memtable
// is flushed after the write, and RocksDB gives a memtable no way to fail a
// write.
TEST_F(OperationsTest, WrapperRefusesAWriteThePoolCannotHold) {
  RecoveryOptions ro = Ro(dir_);
  ro.memtable.pool_size = 24ull << 20;
  rocksdb::Options o = BaseOptions();
  o.write_buffer_size = 1 << 20;
  o.min_write_buffer_number_to_merge = 2;  // an immutable one stays
  o.max_write_buffer_number = 4;
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  auto open = [&](rocksdb::DB** db) {
    rocksdb::Status s = OpenDB(
        o, DbDir(dir_), {{rocksdb::kDefaultColumnFamilyName, o}}, &h, db, ro);
    ASSERT_TRUE(s.ok()) << s.ToString();
  };
  auto close = [&](rocksdb::DB* db) {
    for (rocksdb::ColumnFamilyHandle* c : h) db->DestroyColumnFamilyHandle(c);
    h.clear();
    delete db;
  };
  rocksdb::DB* db = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(&db));
  test::Watchdog watchdog(std::chrono::seconds(120),
                          "a large write still waits for pool space after "
                          "120 s");
  rocksdb::WriteOptions wo;
  const std::string huge(30 << 20, 'h');  // more than the 24 MiB pool
  rocksdb::WriteBatch batch, many;
  ASSERT_TRUE(batch.Put("a", "1").ok());
  ASSERT_TRUE(batch.Put("huge", huge).ok());
  const std::string part(512 << 10, 'p');  // below the pool's reserve
  for (int i = 0; i < 60; i++) ASSERT_TRUE(many.Put(Key(i), part).ok());
  // Entries just above a quarter chunk: each takes a 512 KiB chunk of its
  // own, 25 MiB together for 15 MB of data.
  rocksdb::WriteBatch big_nodes, small_nodes, with_range;
  const std::string third(300 << 10, 't');
  for (int i = 0; i < 50; i++) ASSERT_TRUE(big_nodes.Put(Key(i), third).ok());
  // 7 MB of batch data, under the reserve, but 26 MB of 64-byte nodes.
  for (int i = 0; i < 400000; i++) {
    ASSERT_TRUE(small_nodes.Delete(Key(i) + "-000000").ok());
  }
  ASSERT_TRUE(with_range.DeleteRange("a", "b").ok());  // runs alone anyway
  ASSERT_TRUE(with_range.Put("huge", huge).ok());
  for (rocksdb::Status s :
       {db->Put(wo, "huge", huge), db->Merge(wo, "huge", huge),
        db->Write(wo, &batch), db->Write(wo, &many), db->Write(wo, &big_nodes),
        db->Write(wo, &small_nodes), db->Write(wo, &with_range)}) {
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_TRUE(Has(s, "does not fit in pool")) << s.ToString();
    EXPECT_TRUE(Has(s, "Nothing was written")) << s.ToString();
  }
  EXPECT_EQ(Get(db, "a"), "<NotFound: >");
  EXPECT_EQ(Get(db, "huge"), "<NotFound: >");
  EXPECT_EQ(Get(db, Key(0)), "<NotFound: >");
  // An immutable and an active memtable hold part of the pool, so 18 MiB
  // has no room until they are flushed (checked, not assumed).
  const std::string v(1000, 'v');
  uint64_t imm = 0;
  int n = 0;
  for (; imm == 0 && n < 100000; n++) {
    ASSERT_TRUE(db->Put(wo, Key(n), v).ok());
    db->GetIntProperty("rocksdb.num-immutable-mem-table", &imm);
  }
  ASSERT_EQ(imm, 1u);
  const std::string big(18 << 20, 'b');
  {
    std::shared_ptr<rocks::PoolSession> session;  // the DB's own
    ASSERT_TRUE(rocks::PoolSession::OpenExisting(PoolDir(dir_), &session).ok());
    ASSERT_LT(session->pool()->UnheldBytes(), big.size() + (1 << 20));
  }
  std::string l0;
  ASSERT_TRUE(db->GetProperty("rocksdb.num-files-at-level0", &l0));
  ASSERT_EQ(l0, "0");
  rocksdb::Status s = db->Put(wo, "big", big);
  watchdog.Done();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(db->GetProperty("rocksdb.num-files-at-level0", &l0));
  EXPECT_NE(l0, "0");  // the wrapper flushed first
  close(db);
  ASSERT_NO_FATAL_FAILURE(open(&db));
  EXPECT_TRUE(Get(db, "big") == big);
  for (int i = 0; i < n; i += 97) EXPECT_EQ(Get(db, Key(i)), v) << i;
  close(db);
}

// Recovery replays the pool it is given under the options the crashed life
// left (here a write_buffer_size SetOptions raised past the pool): the
// space rule, for a DB about to take writes, does not apply to it. It
// refused ("pool too small"), and neither the pool nor the recorded
// options could be changed before the data was out.
TEST_F(OperationsTest, RecoveryIgnoresTheSpaceRuleItCannotChange) {
  ASSERT_NO_FATAL_FAILURE(RunChild("crash_small_pool_after_set_options", dir_));
  rocksdb::Status s = Recover(DbDir(dir_), Ro(dir_));
  ASSERT_TRUE(s.ok()) << s.ToString();
  rocksdb::DB* db = OpenStock(DbDir(dir_));
  ASSERT_NE(db, nullptr);
  for (int i = 0; i < 300; i++) EXPECT_EQ(Get(db, Key(i)), "s" + Key(i)) << i;
  delete db;
  // A DB::Open that will take writes still gets the rule, also under
  // BeginRecovery's claim (its caller may keep the DB and write; the claim
  // must not exempt it).
  rocksdb::Options big = SmallPoolOptions(PoolDir(dir_), 24ull << 20);
  big.write_buffer_size = 64 << 20;
  db = nullptr;
  s = rocksdb::DB::Open(big, DbDir(dir_), &db);
  EXPECT_TRUE(Has(s, "too small")) << s.ToString();
  delete db;
  ASSERT_TRUE(BeginRecovery(DbDir(dir_), Ro(dir_)).ok());
  db = nullptr;
  s = rocksdb::DB::Open(big, DbDir(dir_), &db);
  EXPECT_TRUE(Has(s, "too small")) << s.ToString();
  delete db;
  EndRecovery(PoolDir(dir_));
}

// An older image of the pool put back under the DB (a saved tmpfs pool, a
// template pool file) reuses list ids that the DB's record of recovered
// lists names: its new lists are replayed, not taken for recovered ones.
// Keyed on pool id and list id only, the record dropped the new list and
// its acknowledged write.
TEST_F(OperationsTest, OlderPoolImageReusingListIdsIsReplayed) {
  const std::string pool_file = PoolDir(dir_) + "/flintkv.pool";
  const std::string image = dir_ + "/pool_image";
  auto write = [&](const char* key, bool flush) {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    ASSERT_TRUE(db->Put(wo, key, key).ok());
    if (flush) {
      ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    } else {  // the memtable stays in the pool: recovery brings it back
      ASSERT_TRUE(
          db->SetDBOptions({{"avoid_flush_during_shutdown", "true"}}).ok());
    }
    ASSERT_TRUE(db->Close().ok());
    delete db;
  };
  ASSERT_NO_FATAL_FAILURE(write("a", true));
  ASSERT_EQ(std::system(("cp " + pool_file + " " + image).c_str()), 0);
  ASSERT_NO_FATAL_FAILURE(write("b", false));
  ASSERT_TRUE(Recover(DbDir(dir_), Ro(dir_)).ok());
  ASSERT_EQ(std::system(("cp " + image + " " + pool_file).c_str()), 0);
  ASSERT_NO_FATAL_FAILURE(write("c", false));
  RecoveryReport rep;
  rocksdb::Status s = RecoverDB(BaseOptions(), DbDir(dir_), {}, Ro(dir_), &rep);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(rep.lists_already_recovered, 0u);
  rocksdb::DB* db = OpenStock(DbDir(dir_));
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db, "c"), "c") << "an acknowledged write was dropped";
  EXPECT_EQ(Get(db, "b"), "b");
  delete db;
}

// With the WAL on and wal_logged unset, a Close that does not flush keeps
// the memtables (the pool cannot tell WAL-logged writes from WAL-less
// ones): the next open asks for recovery, which is exact. With wal_logged
// declared, Close and reopen need nothing
// (AcknowledgedWritesTest.WalOnReopens...).
// DestroyDB after a crash, then a new DB at the same path and pool_dir:
// the open is refused (the pool holds the old DB's writes) and the refusal
// names a way forward that does not pour them into the new DB: discard,
// which lists what it would drop, drops only with --confirm, and leaves a
// pool the new DB opens empty.
TEST_F(OperationsTest, DestroyedDbLeftoversAreDiscardedOnRequest) {
  ASSERT_NO_FATAL_FAILURE(RunChild("crash_a", dir_));
  ASSERT_TRUE(rocksdb::DestroyDB(DbDir(dir_), BaseOptions()).ok());
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_FALSE(s.ok());
  delete db;
  EXPECT_TRUE(Has(s, "flintkv_tool discard --pool_dir=" + PoolDir(dir_) +
                         " --incarnation="))
      << s.ToString();
  EXPECT_EQ(Tool("discard --pool_dir=" + PoolDir(dir_)), 2);
  EXPECT_NE(test::ReadFile(dir_ + "/tool_out").find("would drop list"),
            std::string::npos);
  db = nullptr;
  ASSERT_FALSE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok())
      << "discard without --confirm dropped something";
  delete db;
  EXPECT_EQ(Tool("discard --pool_dir=" + PoolDir(dir_) + " --confirm"), 0);
  EXPECT_NE(test::ReadFile(dir_ + "/tool_out").find("dropped list"),
            std::string::npos);
  db = nullptr;
  s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Get(db, Key(0)), "<NotFound: >") << "the old DB's write came back";
  delete db;
}

TEST_F(OperationsTest, WalOnCloseReopensWithoutRecovery) {
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "k", "wal").ok());
    delete db;
  }
  // The pool kept the memtable; the WAL holds it (S5): no recovery needed.
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Get(db, "k"), "wal");
  // Memtables RocksDB fills from the WAL at that open (and flushes there)
  // are not kept: the close after a WAL-less write leaves nothing.
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  ASSERT_TRUE(db->Put(wo, "k2", "x").ok());
  delete db;
  db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(PlainOptions(dir_), DbDir(dir_), &db).ok());
  EXPECT_EQ(Get(db, "k"), "wal");
  EXPECT_EQ(Get(db, "k2"), "x");
  delete db;
}

}  // namespace
}  // namespace flintkv

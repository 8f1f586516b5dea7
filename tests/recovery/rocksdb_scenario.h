// Deterministic crash scenarios for the RocksDB drop-in tests
// (rocksdb_acknowledged_writes_test, rocksdb_list_lifecycle_test): a scenario
// is a function run in a child process (the test binary re-executed with
// FLINTKV_SCENARIO_CHILD naming it) that writes and then SIGKILLs itself,
// or is killed at a FLINTKV_CRASH_POINT, so what was acknowledged before
// the crash is known exactly. No timing decides a result.
//
// A test file registers scenarios with `Register`, and adds
// `const int kChild = test::RunScenarioIfChild();` (the child then runs
// from main(), after every registration and every static initialiser).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/merge_operator.h"
#include "tests/rocksdb/append_operator.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace test {

inline std::string Key(int i) {
  char b[16];
  std::snprintf(b, sizeof(b), "k%06d", i);
  return b;
}
inline std::string DbDir(const std::string& dir) { return dir + "/db"; }
inline std::string PoolDir(const std::string& dir) { return dir + "/pool"; }

inline rocksdb::Options BaseOptions() {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  o.merge_operator = std::make_shared<AppendOperator>();
  o.info_log_level = rocksdb::InfoLogLevel::ERROR_LEVEL;
  return o;
}

// In a child: any failure aborts (the parent then sees no SIGKILL).
inline void Check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::abort();
  }
}

inline std::shared_ptr<rocksdb::MemTableRepFactory> Factory(
    const std::string& dir, bool wal_logged = false) {
  MemTableOptions mo;
  mo.pool_dir = PoolDir(dir);
  mo.pool_size = 256ull << 20;
  mo.wal_logged = wal_logged;
  std::shared_ptr<rocksdb::MemTableRepFactory> f;
  Check(NewMemTableRepFactory(mo, &f), "factory");
  return f;
}

inline rocksdb::Options PlainOptions(const std::string& dir,
                                     bool wal_logged = false) {
  rocksdb::Options o = BaseOptions();
  o.memtable_factory = Factory(dir, wal_logged);
  return o;
}

inline RecoveryOptions Ro(const std::string& dir) {
  RecoveryOptions ro;
  ro.memtable.pool_dir = PoolDir(dir);
  ro.memtable.pool_size = 256ull << 20;
  return ro;
}

// Opens a plain-factory DB whose immutable memtable stays unflushed, puts
// Key(i) = "v<key>" until one memtable switched, then `extra` more and
// "count" = the number of keys; returns the DB (a child then dies).
inline rocksdb::DB* TwoUnflushedMemtables(
    const std::string& d, int extra,
    const std::function<void(rocksdb::DB*)>& before = nullptr) {
  rocksdb::Options o = PlainOptions(d);
  o.write_buffer_size = 1 << 20;
  o.min_write_buffer_number_to_merge = 2;  // the immutable one stays
  o.max_write_buffer_number = 4;
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(o, DbDir(d), &db), "open");
  if (before) before(db);
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  uint64_t n = 0;
  int i = 0;
  for (; n == 0 && i < 1000000; i++) {  // until the memtable switches
    Check(db->Put(wo, Key(i), "v" + Key(i)), "put");
    db->GetIntProperty("rocksdb.num-immutable-mem-table", &n);
  }
  if (n != 1) std::abort();
  for (int end = i + extra; i < end; i++) {
    Check(db->Put(wo, Key(i), "v" + Key(i)), "put");
  }
  Check(db->Put(wo, "count", std::to_string(i)), "put");
  return db;
}

[[noreturn]] inline void Die() {
  raise(SIGKILL);
  std::abort();
}

using Scenario = std::function<void(const std::string& dir)>;
inline std::map<std::string, Scenario>& Scenarios() {
  static std::map<std::string, Scenario> m;
  return m;
}
struct Register {
  Register(const char* name, Scenario f) { Scenarios()[name] = std::move(f); }
};

// In the re-executed child: runs the named scenario from main() (see
// test::RunInMainIf) and exits; the parent's tests do not run there.
inline int RunScenarioIfChild() {
  return RunInMainIf("FLINTKV_SCENARIO_CHILD", [] {
    auto it = Scenarios().find(std::getenv("FLINTKV_SCENARIO_CHILD"));
    if (it == Scenarios().end()) std::abort();
    it->second(std::getenv("FLINTKV_SCENARIO_DIR"));
    std::exit(0);
  });
}

// Runs scenario `name` in a child and expects it to die by SIGKILL.
inline void RunChild(const std::string& name, const std::string& dir,
                     const std::string& crash_point = "") {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("FLINTKV_SCENARIO_CHILD", name.c_str(), 1);
    setenv("FLINTKV_SCENARIO_DIR", dir.c_str(), 1);
    if (!crash_point.empty()) {
      setenv("FLINTKV_CRASH_POINT", crash_point.c_str(), 1);
    }
    execl("/proc/self/exe", "scenario_child", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << name << ": child did not reach its crash (status " << status << ")";
}

// A fresh directory per test (removed before and after), and reads that
// print a status instead of failing.
class ScenarioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FLINTKV_TEST_TSAN)
      GTEST_SKIP() << "librocksdb is not TSAN-instrumented";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = TestDir() + "/flintkv_" + info->test_suite_name() + "_" +
           info->name() + "." + std::to_string(getpid());
    std::system(("rm -rf " + dir_).c_str());
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string Get(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                  const std::string& k) {
    std::string v;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), cf, k, &v);
    return s.ok() ? v : "<" + s.ToString() + ">";
  }
  std::string Get(rocksdb::DB* db, const std::string& k) {
    return Get(db, db->DefaultColumnFamily(), k);
  }

  std::string dir_;
};

}  // namespace test
}  // namespace flintkv

// flintkv_tool inspect / verify / recover on a DB whose column families are
// not bytewise-ordered: the memtable lists are walked with the
// column family's own comparator, never reported corrupt for using it.
// A re-executed child writes with the WAL off into memtables that never
// flush, says so, and is SIGKILLed: its lists are left in the pool.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "flintkv/inspect.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/comparator.h"
#include "rocksdb/db.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

constexpr int kKeys = 300;
const char* const kCfNames[] = {"default", "fwd"};

std::string Key(int i) { return "key" + std::to_string(i); }

// "default" is reverse-ordered, "fwd" bytewise: the comparators differ per
// column family, so --db must map list -> column family id -> comparator.
std::vector<rocksdb::ColumnFamilyDescriptor> Cfs(
    std::shared_ptr<rocksdb::MemTableRepFactory> f) {
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* n : kCfNames) {
    rocksdb::ColumnFamilyOptions co;
    co.comparator = std::string(n) == "default"
                        ? rocksdb::ReverseBytewiseComparator()
                        : rocksdb::BytewiseComparator();
    co.write_buffer_size = 16 << 20;  // nothing flushes before the kill
    if (f) co.memtable_factory = f;   // else RocksDB's skiplist
    cfs.emplace_back(n, co);
  }
  return cfs;
}

rocksdb::DBOptions DbOptions() {
  rocksdb::DBOptions o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  return o;
}

[[noreturn]] void ChildMain() {
  std::string dir = std::getenv("FLINTKV_INSPECT_DIR");
  MemTableOptions mo;
  mo.pool_dir = dir + "/pool";
  mo.pool_size = 128ull << 20;
  std::shared_ptr<rocksdb::MemTableRepFactory> f;
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  if (!NewMemTableRepFactory(mo, &f).ok() ||
      !rocksdb::DB::Open(DbOptions(), dir + "/db", Cfs(f), &h, &db).ok()) {
    _exit(3);
  }
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  for (int i = 0; i < kKeys; i++) {
    for (auto* cf : h) {
      if (!db->Put(wo, cf, Key(i), "v" + std::to_string(i)).ok()) _exit(4);
    }
  }
  // The parent's pipe (not stdout: gtest writes there before the child runs).
  const int fd = std::atoi(std::getenv("FLINTKV_INSPECT_FD"));
  if (write(fd, "H", 1) != 1) _exit(5);
  for (;;) pause();  // until SIGKILLed, with every write unflushed
}

// Re-executed child: runs from main() (test::RunInMainIf).
const int kIsChild =
    test::RunInMainIf("FLINTKV_INSPECT_DIR", [] { ChildMain(); });

class RocksdbInspectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FLINTKV_TEST_TSAN)
      GTEST_SKIP() << "librocksdb is not TSAN-instrumented";
    dir_ = test::TestDir() + "/flintkv_inspect." + std::to_string(getpid());
    std::system(("rm -rf " + dir_).c_str());
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(p[0]);
      setenv("FLINTKV_INSPECT_FD", std::to_string(p[1]).c_str(), 1);
      setenv("FLINTKV_INSPECT_DIR", dir_.c_str(), 1);
      execl("/proc/self/exe", "rocksdb_inspect_test",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(p[1]);
    char c = 0;
    bool held = read(p[0], &c, 1) == 1 && c == 'H';
    close(p[0]);
    child_ = pid;
    if (!keep_child_ || !held) StopChild();
    ASSERT_TRUE(held) << "child did not finish its writes";
  }
  void TearDown() override {
    StopChild();
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  void StopChild() {
    if (child_ <= 0) return;
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
    child_ = 0;
  }
  std::string Pool() const { return dir_ + "/pool"; }
  int Tool(const std::string& args) {
    return test::RunCommand(std::string(FLINTKV_TOOL) + " " + args,
                            dir_ + "/tool.out");
  }

  std::string dir_;
  bool keep_child_ = false;  // the child holds the pool open during the test
  pid_t child_ = 0;
};

// Counts the leftover memtable lists and checks each against `want`.
void ExpectLists(const PoolSummary& ps, const std::string& want_reverse,
                 const std::string& want_fwd) {
  int leftovers = 0;
  std::set<uint64_t> lives;  // the incarnation discard takes
  for (const ListSummary& l : ps.lists) {
    if (!l.leftover) continue;
    leftovers++;
    lives.insert(l.incarnation);
    EXPECT_FALSE(l.family_dropped);
    EXPECT_EQ(l.entries, static_cast<uint64_t>(kKeys));
    EXPECT_TRUE(l.error.empty()) << l.error;
    EXPECT_EQ(l.comparator, l.column_family_id == 0 ? want_reverse : want_fwd)
        << "list " << l.list_id << " cf " << l.column_family_id << ": "
        << l.note;
  }
  EXPECT_EQ(leftovers, 2);
  EXPECT_EQ(lives.size(), 1u);
  EXPECT_EQ(lives.count(0), 0u);
}

TEST_F(RocksdbInspectTest, CustomComparatorIsNotCorruption) {
  const std::string rev = rocksdb::ReverseBytewiseComparator()->Name();
  const std::string fwd = rocksdb::BytewiseComparator()->Name();
  PoolSummary ps;
  // Nothing named: bytewise is assumed; the reverse list is not called
  // corrupt, its order is reported unchecked.
  rocksdb::Status s = InspectPool(Pool(), &ps);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectLists(ps, "", fwd);
  for (const ListSummary& l : ps.lists) {
    if (l.leftover && l.column_family_id == 0) {
      EXPECT_NE(l.note.find("order not checked"), std::string::npos);
    }
  }
  // --db: each column family's own comparator, both orders checked.
  InspectOptions io;
  io.db = dir_ + "/db";
  s = InspectPool(Pool(), &ps, io);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectLists(ps, rev, fwd);
  // A comparator named for all lists is checked, and wrong for "fwd".
  io = InspectOptions();
  io.comparator_name = rev;
  s = InspectPool(Pool(), &ps, io);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  // An unknown comparator: order unchecked, everything else checked.
  io.comparator_name = "no.such.Comparator";
  s = InspectPool(Pool(), &ps, io);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectLists(ps, "", "");
  for (const ListSummary& l : ps.lists) {
    if (l.leftover) {
      EXPECT_NE(l.note.find("comparator no.such.Comparator unknown"),
                std::string::npos)
          << l.note;
    }
  }
}

TEST_F(RocksdbInspectTest, ToolVerifyAndRecover) {
  EXPECT_EQ(Tool("verify --pool_dir=" + Pool()), 0);
  EXPECT_EQ(Tool("verify --pool_dir=" + Pool() + " --db=" + dir_ + "/db"), 0);
  EXPECT_EQ(Tool("inspect --pool_dir=" + Pool() + " --db=" + dir_ + "/db"), 0);
  // flintkv_tool recover loads the DB's OPTIONS file (its comparators; the
  // factory there is named without a pool_dir and replaced by the tool's).
  EXPECT_EQ(
      Tool("recover --quiet --pool_dir=" + Pool() + " --db=" + dir_ + "/db"),
      0);
  // Recovered into SST files: readable without the plugin, in each order.
  rocksdb::DBOptions o = DbOptions();
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, dir_ + "/db", Cfs(nullptr), &h, &db).ok());
  for (size_t cf = 0; cf < h.size(); cf++) {
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(rocksdb::ReadOptions(), h[cf]));
    int n = 0;
    std::string prev;
    for (it->SeekToFirst(); it->Valid(); it->Next(), n++) {
      std::string k = it->key().ToString();
      if (n > 0) {
        EXPECT_EQ(k < prev, cf == 0) << prev << " then " << k;
      }
      prev = k;
    }
    EXPECT_EQ(n, kKeys) << "column family " << kCfNames[cf];
  }
  for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
  delete db;
}

// A pool another process has open is in use, not
// corrupt (before: Busy became Corruption, and the tool said FAILED with
// exit 1). InspectPool says Busy and names the holder; inspect and verify
// exit 3; nothing is read. Once the holder is gone, verify passes.
class RocksdbInspectInUseTest : public RocksdbInspectTest {
 protected:
  RocksdbInspectInUseTest() { keep_child_ = true; }
};

TEST_F(RocksdbInspectInUseTest, PoolOpenElsewhereIsInUseNotCorrupt) {
  PoolSummary ps;
  rocksdb::Status s = InspectPool(Pool(), &ps);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_FALSE(s.IsCorruption()) << s.ToString();
  const std::string holder = "in use by process " + std::to_string(child_);
  EXPECT_NE(s.ToString().find(holder), std::string::npos) << s.ToString();
  for (const char* cmd : {"verify", "inspect"}) {
    EXPECT_EQ(Tool(std::string(cmd) + " --pool_dir=" + Pool()), 3) << cmd;
    std::string out = test::ReadFile(dir_ + "/tool.out");
    EXPECT_NE(out.find(holder), std::string::npos) << out;
    EXPECT_EQ(out.find("Corruption"), std::string::npos) << out;
  }
  StopChild();
  EXPECT_EQ(Tool("verify --pool_dir=" + Pool()), 0);
}

}  // namespace
}  // namespace flintkv

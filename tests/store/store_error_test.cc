// flintkv::Store error handling: oversized keys and values, a full pool,
// missing, foreign, truncated and corrupted pool files, a second open in the
// same process, and operations after Close. Every case must return a clear
// Status and leave the pool (or the foreign file) as it was.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "flintkv/store.h"
#include "tests/store/store_model_check.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

using test::CheckScans;
using test::Model;

TEST(StoreErrorTest, OversizedKeyOrValueWritesNothing) {
  test::TempPool pool;
  StoreOptions o = test::QuietStoreOptions(pool.path());
  o.max_key_size = 100;
  o.max_value_size = 1000;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  const std::string big_key(101, 'k'), max_key(100, 'k');
  const std::string big_val(1001, 'v'), max_val(1000, 'v');

  EXPECT_TRUE(store->Put(big_key, "v").IsInvalidArgument());
  EXPECT_TRUE(store->Put("k", big_val).IsInvalidArgument());
  EXPECT_TRUE(store->Delete(big_key).IsInvalidArgument());
  WriteBatch b;
  b.Put("ok1", "v");
  b.Put("bad", big_val);
  b.Put("ok2", "v");
  EXPECT_TRUE(store->Write(b).IsInvalidArgument());
  WriteBatch b2;
  b2.Put("ok3", "v");
  b2.Delete(big_key);
  EXPECT_TRUE(store->Write(b2).IsInvalidArgument());

  StoreStats st = store->GetStats();
  EXPECT_EQ(st.visible_version, 0u);
  EXPECT_EQ(st.nodes, 0u);
  std::string v;
  for (const char* k : {"k", "ok1", "bad", "ok2", "ok3"}) {
    EXPECT_TRUE(store->Get(k, &v).IsNotFound()) << k;
  }
  EXPECT_TRUE(store->Get(big_key, &v).IsNotFound());
  std::unique_ptr<Iterator> it = store->NewIterator();
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());

  // Exactly at the limits is fine.
  ASSERT_TRUE(store->Put(max_key, max_val).ok());
  ASSERT_TRUE(store->Get(max_key, &v).ok());
  EXPECT_EQ(v, max_val);
  store.reset();
  ASSERT_TRUE(Store::Open(o, &store).ok());
  ASSERT_TRUE(store->Get(max_key, &v).ok());
  EXPECT_EQ(v, max_val);
  EXPECT_EQ(store->GetStats().recovered_nodes, 1u);

  StoreOptions absurd = o;
  absurd.max_value_size = size_t{2} << 30;
  std::unique_ptr<Store> s2;
  store.reset();
  EXPECT_TRUE(Store::Open(absurd, &s2).IsInvalidArgument());
}

TEST(StoreErrorTest, PoolFullReturnsNoSpaceAndStaysReadable) {
  test::TempPool pool;
  // A small pool (libpmemobj's minimum is 8 MiB), small chunks.
  StoreOptions o = test::QuietStoreOptions(pool.path(), 16ull << 20, 64 << 10);
  std::unique_ptr<Store> store;
  Status s = Store::Open(o, &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Model m;
  const std::string value(1000, 'x');
  Status last;
  int i = 0;
  for (; i < 100000; i++) {
    std::string k = "key" + std::to_string(i);
    if (i % 10 == 9) {
      WriteBatch b;
      for (int j = 0; j < 5; j++) b.Put(k + "/" + std::to_string(j), value);
      last = store->Write(b);
      if (!last.ok()) break;
      for (int j = 0; j < 5; j++) m[k + "/" + std::to_string(j)] = value;
    } else {
      last = store->Put(k, value);
      if (!last.ok()) break;
      m[k] = value;
    }
  }
  ASSERT_TRUE(last.IsNoSpace()) << "after " << i << " ops: " << last.ToString();
  EXPECT_NE(last.message().find(pool.path()), std::string::npos)
      << last.ToString();
  EXPECT_GT(m.size(), 1000u);
  // Everything acknowledged is still there; nothing of a failed op is.
  CheckScans(store.get(), nullptr, m, "full");
  // More writes of all sizes: each fails cleanly with NoSpace or succeeds
  // (a thread's arena may still hold a small node); a failed batch leaves
  // nothing behind.
  int nospace = 0;
  for (int j = 0; j < 50; j++) {
    WriteBatch b;
    Model after = m;
    for (int k = 0; k < j % 7 + 1; k++) {
      std::string key = "more" + std::to_string(j) + "/" + std::to_string(k);
      std::string v(static_cast<size_t>((j * 7919 + k * 31) % 3000), 'm');
      b.Put(key, v);
      after[key] = v;
    }
    Status w = store->Write(b);
    ASSERT_TRUE(w.ok() || w.IsNoSpace()) << w.ToString();
    if (w.ok()) m.swap(after);
    nospace += w.IsNoSpace();
  }
  EXPECT_GT(nospace, 0);
  Status big = store->Put("huge", std::string(4 << 20, 'y'));
  EXPECT_TRUE(big.IsNoSpace()) << big.ToString();
  CheckScans(store.get(), nullptr, m, "full after more");
  store.reset();
  s = Store::Open(o, &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  CheckScans(store.get(), nullptr, m, "full after reopen");
  Status w = store->Put("after-reopen", "v");
  EXPECT_TRUE(w.ok() || w.IsNoSpace()) << w.ToString();
  if (w.ok()) m["after-reopen"] = "v";
  CheckScans(store.get(), nullptr, m, "full after reopen and put");
}

TEST(StoreErrorTest, MissingPoolWithoutCreate) {
  test::TempPool pool;
  StoreOptions o = test::QuietStoreOptions(pool.path());
  o.pool.create_if_missing = false;
  std::unique_ptr<Store> store;
  Status s = Store::Open(o, &store);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(store, nullptr);
  EXPECT_NE(s.message().find(pool.path()), std::string::npos) << s.ToString();
  EXPECT_NE(access(pool.path().c_str(), F_OK), 0) << "file was created";

  // error_if_exists on an existing pool.
  o.pool.create_if_missing = true;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  store.reset();
  o.pool.error_if_exists = true;
  s = Store::Open(o, &store);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(store, nullptr);
}

// Opens a non-pool or damaged file: non-OK, message names the file.
void CheckFailedOpen(const Status& s, const std::string& path,
                     const std::string& what) {
  EXPECT_FALSE(s.ok()) << what << ": opened";
  EXPECT_FALSE(s.message().empty()) << what;
  EXPECT_NE(s.message().find(path), std::string::npos)
      << what << ": message does not name the file: " << s.ToString();
  EXPECT_TRUE(s.IsCorruption() || s.IsInvalidArgument() || s.IsIOError())
      << what << ": " << s.ToString();
}

void ExpectOpenFails(const std::string& path, const std::string& what) {
  StoreOptions o = test::QuietStoreOptions(path);
  o.pool.create_if_missing = false;
  std::unique_ptr<Store> store;
  Status s = Store::Open(o, &store);
  EXPECT_EQ(store, nullptr) << what;
  CheckFailedOpen(s, path, what);
}

// Store::Open in a forked child; the parent gets the code and message (or a
// failure if the child crashed). For libpmemobj 1.12's pmemobj_check, which
// leaks its check state (~8 MB) when it rejects a truncated pool: the leak
// dies with the child instead of failing the ASAN build's leak check.
void ExpectOpenFailsInChild(const std::string& path, const std::string& what) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    StoreOptions o = test::QuietStoreOptions(path);
    o.pool.create_if_missing = false;
    std::unique_ptr<Store> store;
    Status s = Store::Open(o, &store);
    std::string out =
        std::to_string(static_cast<int>(s.code())) + "\n" + s.message();
    ssize_t n = write(fds[1], out.data(), out.size());
    _exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string in;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) in.append(buf, n);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << what << ": Store::Open crashed or failed in the child (status "
      << status << ")";
  size_t nl = in.find('\n');
  ASSERT_NE(nl, std::string::npos);
  auto code = static_cast<Status::Code>(std::stoi(in.substr(0, nl)));
  std::string msg = in.substr(nl + 1);
  Status s;
  switch (code) {
    case Status::Code::kOk:
      s = Status::OK();
      break;
    case Status::Code::kCorruption:
      s = Status::Corruption(msg);
      break;
    case Status::Code::kInvalidArgument:
      s = Status::InvalidArgument(msg);
      break;
    case Status::Code::kIOError:
      s = Status::IOError(msg);
      break;
    default:
      s = Status::NotSupported("unexpected code: " + msg);
      break;
  }
  CheckFailedOpen(s, path, what);
}

TEST(StoreErrorTest, ForeignFiles) {
  test::TempPool pool;
  const std::string& p = pool.path();
  ASSERT_TRUE(test::WriteFile(p, ""));
  ExpectOpenFails(p, "empty file");
  ASSERT_TRUE(test::WriteFile(p, "hello, I am a text file\nnot a pool\n"));
  ExpectOpenFails(p, "text file");
  std::mt19937_64 rng(7);
  ASSERT_TRUE(test::WriteFile(p, test::RandomBytes(&rng, 16 << 20, false)));
  ExpectOpenFails(p, "16 MiB of random bytes");
  ASSERT_TRUE(test::WriteFile(p, std::string(16 << 20, '\0')));
  ExpectOpenFails(p, "16 MiB of zeros");
  // A foreign file must not be modified by the failed open.
  std::string text(9 << 20, 't');
  ASSERT_TRUE(test::WriteFile(p, text));
  ExpectOpenFails(p, "9 MiB text");
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), text.size());
  // create_if_missing must not overwrite a foreign file either.
  StoreOptions o = test::QuietStoreOptions(p);
  std::unique_ptr<Store> store;
  EXPECT_FALSE(Store::Open(o, &store).ok());
}

// Creates a pool with some data in it, closed.
void MakePoolWithData(const std::string& path, uint64_t size) {
  StoreOptions o = test::QuietStoreOptions(path, size, 64 << 10);
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(o, &store).ok());
  for (int i = 0; i < 2000; i++) {
    ASSERT_TRUE(
        store->Put("key" + std::to_string(i), std::string(100, 'v')).ok());
  }
}

TEST(StoreErrorTest, TruncatedPool) {
  test::TempPool pool;
  const uint64_t size = 16 << 20;
  for (uint64_t keep : {size / 2, size - 4096, uint64_t{8} << 20,
                        uint64_t{4096}, uint64_t{100}}) {
    unlink(pool.path().c_str());
    MakePoolWithData(pool.path(), size);
    if (HasFatalFailure()) return;
    ASSERT_EQ(truncate(pool.path().c_str(), static_cast<off_t>(keep)), 0);
    ExpectOpenFailsInChild(pool.path(), "truncated to " + std::to_string(keep));
  }
}

// Offsets of every occurrence of `needle` in the file.
std::vector<size_t> FindAll(const std::string& data,
                            const std::string& needle) {
  std::vector<size_t> out;
  for (size_t pos = data.find(needle); pos != std::string::npos;
       pos = data.find(needle, pos + 1)) {
    out.push_back(pos);
  }
  return out;
}

void FlipByte(const std::string& path, size_t off) {
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char c;
  ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(off)), 1);
  c ^= 0x5a;
  ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(off)), 1);
  close(fd);
}

TEST(StoreErrorTest, FlippedByteInNodeHeaderIsCorruption) {
  // A node header covered by its check: the store must refuse the pool
  // (the node's key "key1000" is preceded by its varint length byte and the
  // 32-byte NvmNode header; flip the data_size field).
  test::TempPool pool;
  MakePoolWithData(pool.path(), 16 << 20);
  if (HasFatalFailure()) return;
  std::string data = test::ReadFile(pool.path());
  std::string needle = std::string(1, '\x07') + "key1000";
  std::vector<size_t> hits = FindAll(data, needle);
  ASSERT_EQ(hits.size(), 1u);
  ASSERT_GE(hits[0], 32u);
  FlipByte(pool.path(), hits[0] - 32 + 16);  // NvmNode::data_size
  ExpectOpenFails(pool.path(), "flipped data_size of a node");
}

TEST(StoreErrorTest, FlippedByteInPoolHeaderIsCorruption) {
  test::TempPool pool;
  MakePoolWithData(pool.path(), 16 << 20);
  if (HasFatalFailure()) return;
  // libpmemobj's pool header (first 4 KiB) carries a checksum.
  for (size_t off : {size_t{0}, size_t{8}, size_t{100}}) {
    FlipByte(pool.path(), off);
    ExpectOpenFails(pool.path(),
                    "flipped pool header byte " + std::to_string(off));
    FlipByte(pool.path(), off);  // restore
    StoreOptions o = test::QuietStoreOptions(pool.path());
    std::unique_ptr<Store> store;
    Status s = Store::Open(o, &store);
    ASSERT_TRUE(s.ok()) << "restored pool: " << s.ToString();
  }
}

TEST(StoreErrorTest, FlippedByteAnywhereNeverCrashes) {
  // A flip in value bytes cannot be detected (values carry no checksum), so
  // any one flip may open OK or fail; it must never crash, and an open store
  // must be fully scannable. Flips cover the middle of the file and the
  // region that holds the data.
  test::TempPool pool;
  const uint64_t size = 16 << 20;
  MakePoolWithData(pool.path(), size);
  if (HasFatalFailure()) return;
  const std::string pristine = test::ReadFile(pool.path());
  std::vector<size_t> hits = FindAll(pristine, "key1");
  ASSERT_FALSE(hits.empty());
  std::mt19937_64 rng(11);
  std::vector<size_t> offsets = {pristine.size() / 2, pristine.size() / 2 + 1};
  const int kFlips = test::LongMode() ? 400 : test::Scaled(40, 2, 2);
  for (int i = 0; i < kFlips; i++) {
    size_t base = hits[rng() % hits.size()];
    // Around a node: header, key, value, or the pool metadata pages.
    offsets.push_back(i % 4 == 3 ? rng() % 65536 : base - 40 + rng() % 160);
  }
  int failed = 0;
  for (size_t off : offsets) {
    ASSERT_TRUE(test::WriteFile(pool.path(), pristine));
    FlipByte(pool.path(), off);
    StoreOptions o = test::QuietStoreOptions(pool.path());
    o.pool.create_if_missing = false;
    std::unique_ptr<Store> store;
    Status s = Store::Open(o, &store);
    if (!s.ok()) {
      failed++;
      EXPECT_NE(s.message().find(pool.path()), std::string::npos)
          << "flip at " << off << ": " << s.ToString();
      continue;
    }
    // Opened: reads must not crash (content may differ in a value byte).
    std::unique_ptr<Iterator> it = store->NewIterator();
    size_t n = 0;
    for (it->SeekToFirst(); it->Valid() && n < 10000; it->Next()) n++;
    for (it->SeekToLast(); it->Valid() && n < 20000; it->Prev()) n++;
    std::string v;
    store->Get("key1500", &v);
  }
  RecordProperty("flips_rejected", failed);
}

TEST(StoreErrorTest, SecondOpenInSameProcessFails) {
  test::TempPool pool;
  StoreOptions o = test::QuietStoreOptions(pool.path());
  std::unique_ptr<Store> first;
  ASSERT_TRUE(Store::Open(o, &first).ok());
  ASSERT_TRUE(first->Put("k", "v").ok());
  std::unique_ptr<Store> second;
  Status s = Store::Open(o, &second);
  EXPECT_FALSE(s.ok()) << "the same pool was opened twice";
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(second, nullptr);
  // The first handle is unaffected.
  std::string v;
  ASSERT_TRUE(first->Get("k", &v).ok());
  EXPECT_EQ(v, "v");
  first.reset();
  ASSERT_TRUE(Store::Open(o, &second).ok());
  ASSERT_TRUE(second->Get("k", &v).ok());
}

TEST(StoreErrorTest, OperationsAfterClose) {
  test::TempPool pool;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(test::QuietStoreOptions(pool.path()), &store).ok());
  ASSERT_TRUE(store->Put("k", "v").ok());
  ASSERT_TRUE(store->Close().ok());
  std::string v;
  EXPECT_FALSE(store->Put("k", "v2").ok());
  EXPECT_FALSE(store->Delete("k").ok());
  WriteBatch b;
  b.Put("a", "b");
  EXPECT_FALSE(store->Write(b).ok());
  EXPECT_FALSE(store->Get("k", &v).ok());
  // An iterator of a closed store (it used to dereference the freed list):
  // never valid, its status says why.
  std::unique_ptr<Iterator> it = store->NewIterator();
  ASSERT_NE(it, nullptr);
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().IsInvalidArgument()) << it->status().ToString();
  EXPECT_TRUE(store->Close().ok());  // idempotent
}

// Only the store makes snapshots: one from a bare version would pin
// nothing for the GC.
static_assert(!std::is_constructible<Snapshot, uint64_t>::value,
              "Snapshot must not be constructible from a version");

}  // namespace
}  // namespace flintkv

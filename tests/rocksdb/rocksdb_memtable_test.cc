// The "flintkv" memtable inside RocksDB, next to RocksDB's default skiplist
// memtable: memory accounting and flush behaviour, range estimates, many
// writer threads.
//
// Pools and DBs live in $FLINTKV_TEST_DIR (ctest: /dev/shm).
#include "flintkv/rocksdb_memtable.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "memtable/key_comparator.h"
#include "memtable/rocksdb/flintkv_rep.h"
#include "memtable/rocksdb/pool_session.h"
#include "memtable/rocksdb/space_wait.h"
#include "recovery/internal_key_cmp.h"
#include "rocksdb/comparator.h"
#include "rocksdb/db.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

class FlushCount : public rocksdb::EventListener {
 public:
  void OnFlushCompleted(rocksdb::DB*, const rocksdb::FlushJobInfo&) override {
    n++;
  }
  std::atomic<int> n{0};
};

// One DB, with the flintkv memtable or RocksDB's default skiplist.
struct TestDb {
  TestDb(const std::string& tag, bool flint, size_t write_buffer_size,
         uint64_t chunk_size = 1 << 20,
         const rocksdb::Comparator* comparator = nullptr)
      : dir("rmem_" + tag) {
    rocksdb::Options o;
    if (comparator) o.comparator = comparator;
    o.create_if_missing = true;
    o.write_buffer_size = write_buffer_size;
    o.max_write_buffer_number = 2;
    o.allow_concurrent_memtable_write = true;
    o.listeners.push_back(flushes);
    if (flint) {
      MemTableOptions mo;
      mo.pool_dir = dir.path() + "/pool";
      mo.pool_size = 128ull << 20;
      mo.chunk_size = chunk_size;
      rocksdb::Status s = NewMemTableRepFactory(mo, &o.memtable_factory);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    rocksdb::Status s = rocksdb::DB::Open(o, dir.path() + "/db", &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~TestDb() {
    if (db) {
      EXPECT_TRUE(db->Close().ok());
    }
    delete db;
  }
  void Put(const std::string& k, const std::string& v) {
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    rocksdb::Status s = db->Put(wo, k, v);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  uint64_t Property(const std::string& name) {
    std::string v;
    EXPECT_TRUE(db->GetProperty(name, &v)) << name;
    return std::stoull(v);
  }

  test::TempDir dir;
  std::shared_ptr<FlushCount> flushes = std::make_shared<FlushCount>();
  rocksdb::DB* db = nullptr;
};

// An in-memory info log (the DB's LOG file stand-in): every line logged.
class CapturingLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    std::lock_guard<std::mutex> g(mu_);
    lines_.push_back(buf);
  }
  std::string All() const {
    std::lock_guard<std::mutex> g(mu_);
    std::string out;
    for (const std::string& l : lines_) out += l + "\n";
    return out;
  }
  // Lines containing `what`.
  int Count(const std::string& what) const {
    std::lock_guard<std::mutex> g(mu_);
    return static_cast<int>(
        std::count_if(lines_.begin(), lines_.end(), [&](const std::string& l) {
          return l.find(what) != std::string::npos;
        }));
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// Memtable-key order for reps made without a DB; the tests below only
// allocate, so it is never asked.
class UnusedKeyComparator : public rocksdb::MemTableRep::KeyComparator {
 public:
  int operator()(const char*, const char*) const override { return 0; }
  int operator()(const char*, const DecodedType&) const override { return 0; }
};

std::shared_ptr<rocksdb::MemTableRepFactory> SmallPoolFactory(
    const test::TempDir& dir, uint64_t pool_size) {
  MemTableOptions mo;
  mo.pool_dir = dir.path() + "/pool";
  mo.pool_size = pool_size;
  mo.chunk_size = 64 << 10;
  std::shared_ptr<rocksdb::MemTableRepFactory> f;
  rocksdb::Status s = NewMemTableRepFactory(mo, &f);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return f;
}

// A memtable rep as a DB with info log `log` makes one (without its arena).
std::unique_ptr<rocksdb::MemTableRep> NewRep(
    rocksdb::MemTableRepFactory* f,
    const rocksdb::MemTableRep::KeyComparator& cmp, rocksdb::Logger* log) {
  return std::unique_ptr<rocksdb::MemTableRep>(
      f->CreateMemTableRep(cmp, nullptr, nullptr, log));
}

// The pool's notices (emulated PMEM) reach the DB's info log, once per
// Logger, and never stderr (before: stderr only).
TEST(RocksMemtableTest, PoolNoticesGoToInfoLogNotStderr) {
  test::TempDir dir("rmem_notice");
  UnusedKeyComparator cmp;
  CapturingLogger log, other_log;
  ::testing::internal::CaptureStderr();
  auto f = SmallPoolFactory(dir, 16 << 20);
  ASSERT_NE(f, nullptr);
  auto a = NewRep(f.get(), cmp, &log);
  auto b = NewRep(f.get(), cmp, &log);
  auto c = NewRep(f.get(), cmp, &other_log);
  a.reset();
  b.reset();
  c.reset();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("flintkv"), std::string::npos) << err;
  EXPECT_EQ(log.Count("emulated PMEM"), 1);
  EXPECT_EQ(other_log.Count("emulated PMEM"), 1);
}

// A full pool's wait for flushes is reported to the DB's info log (once
// per 10 s per pool, by the one helper both waits use) and not to stderr
// (before: stderr from both waits). Deterministic: memtable `a` holds part
// of a small pool, a writer fills `b` until it waits (the log line shows
// it), then `a` is flushed and dropped, which frees the space it waits for.
TEST(RocksMemtableTest, FullPoolWaitGoesToInfoLogNotStderr) {
  test::TempDir dir("rmem_full");
  UnusedKeyComparator cmp;
  CapturingLogger log;
  const std::string kWait = "write waits for flushes";
  ::testing::internal::CaptureStderr();
  auto f = SmallPoolFactory(dir, 16 << 20);
  ASSERT_NE(f, nullptr);
  auto a = NewRep(f.get(), cmp, &log);
  auto b = NewRep(f.get(), cmp, &log);
  // The first memtable is written on this thread, the second by another
  // one, and this thread flushes the first: the writer must get the space
  // back. (It waited forever before the pool used one libpmemobj arena:
  // the freed chunks stayed in this thread's arena.)
  char* first = nullptr;
  for (int i = 0; i < 256; i++) a->Allocate(4000, &first);  // ~1 MiB
  std::atomic<int> allocated{0};
  std::atomic<bool> done{false};
  std::thread writer([&] {
    char* p = nullptr;
    // Until an allocation has waited (and so logged) and then returned.
    while (log.Count(kWait) == 0) {
      b->Allocate(4000, &p);
      allocated++;
    }
    done.store(true);
  });
  for (int i = 0; i < 30000 && log.Count(kWait) == 0; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(log.Count(kWait), 1);
  a->MarkReadOnly();
  a->MarkFlushed();
  a.reset();  // flushed: its space returns to the pool
  // A writer that waits forever leaves no way to join it or free `b`.
  test::ExitUnlessDoneWithin(done, std::chrono::seconds(60),
                             "the writer still waits 60 s after the flush "
                             "freed the space it needs");
  writer.join();
  EXPECT_GT(allocated.load(), 0);
  b->MarkReadOnly();
  b->MarkFlushed();
  b.reset();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("flintkv"), std::string::npos) << err;
  EXPECT_EQ(log.Count(kWait), 1) << log.All();  // one line for the wait
}

// The wait's report goes where someone will see it: the info log when
// RocksDB gave the rep one, else stderr (RocksDB passes nullptr when it could
// not create its info log); once per interval per pool, however many retries.
TEST(RocksMemtableTest, FullPoolWaitReportsToStderrOnlyWithoutInfoLog) {
  for (bool with_log : {true, false}) {
    SCOPED_TRACE(with_log ? "with an info log" : "without an info log");
    test::TempDir dir("rmem_wait_sink");
    std::shared_ptr<rocks::PoolSession> session;
    ASSERT_TRUE(
        rocks::PoolSession::Open(dir.path(), 16 << 20, 1 << 20, &session).ok());
    CapturingLogger log;
    int calls = 0;
    ::testing::internal::CaptureStderr();
    Status s = rocks::WaitForPoolSpace(
        session.get(), with_log ? &log : nullptr,
        Status::NoSpace("pool is full"),
        [&] {
          return ++calls < 3 ? Status::NoSpace("pool is full") : Status::OK();
        },
        [] { return rocks::WaitsForFlushes("write"); });
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(s.ok());
    EXPECT_EQ(calls, 3);
    const std::string kWait = "write waits for flushes";
    size_t on_stderr = 0;
    for (size_t at = err.find(kWait); at != std::string::npos;
         at = err.find(kWait, at + 1)) {
      on_stderr++;
    }
    EXPECT_EQ(log.Count(kWait), with_log ? 1 : 0) << log.All();
    EXPECT_EQ(on_stderr, with_log ? 0u : 1u) << err;
  }
}

// The wait's log line says what it waits for: flushes while another
// memtable holds pool space; once none does, that the wait cannot end (the
// entry does not fit beside its own memtable) and what to do. It blamed
// write buffers and flushes in both cases, and a write of an entry larger
// than the pool waited for them forever.
TEST(RocksMemtableTest, WriteWaitSaysWhenNoFlushCanFreeSpace) {
  test::TempDir dir("rmem_explain");
  std::shared_ptr<rocks::PoolSession> session;
  ASSERT_TRUE(
      rocks::PoolSession::Open(dir.path(), 16 << 20, 64 << 10, &session).ok());
  pmem::Pool* pool = session->pool();
  pmem::ListRoot *a, *b;
  ASSERT_TRUE(pool->CreateList(pmem::kListMemtable, &a).ok());
  ASSERT_TRUE(pool->CreateList(pmem::kListMemtable, &b).ok());
  for (pmem::ListRoot* l : {a, b}) {
    char* begin;
    size_t len;
    ASSERT_TRUE(pool->NewChunk(l->list_id, 1, pmem::ChunkFit::kAtLeast, false,
                               &begin, &len)
                    .ok());
  }
  const size_t kEntry = 20 << 20;
  std::string why = rocks::ExplainWriteWait(*pool, a->list_id, kEntry);
  EXPECT_NE(why.find("write waits for flushes"), std::string::npos) << why;
  pool->DropList(b);  // flushed: a's own memtable is all that is left
  why = rocks::ExplainWriteWait(*pool, a->list_id, kEntry);
  EXPECT_NE(why.find("20971520-byte entry waits for pool space that cannot "
                     "come"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("flintkv_tool recover"), std::string::npos) << why;
  EXPECT_EQ(why.find("write_buffer_size"), std::string::npos) << why;
}

// Held iterators keep flushed memtables, and their pool space, alive: the
// pool runs short, memtables switch early, and writes slow down and then
// wait until the iterators go. The DB's info log says why (at most every
// 10 s): how many flushed memtables are held and how much space they keep.
// The writer runs on its own thread; the test releases the iterators once
// the line is there and the writer must then finish.
TEST(RocksMemtableTest, PinnedFlushedMemtablesAreNamedInTheLog) {
  test::TempDir dir("rmem_pinned");
  auto log = std::make_shared<CapturingLogger>();
  log->SetInfoLogLevel(rocksdb::InfoLogLevel::WARN_LEVEL);
  rocksdb::Options o;
  o.create_if_missing = true;
  o.info_log = log;
  o.write_buffer_size = 1 << 20;
  o.max_write_buffer_number = 2;
  o.level0_slowdown_writes_trigger = 1000;  // only the pool may slow it
  o.level0_stop_writes_trigger = 1000;
  MemTableOptions mo;
  mo.pool_dir = dir.path() + "/pool";
  mo.pool_size = 64ull << 20;
  mo.chunk_size = 64 << 10;
  ASSERT_TRUE(NewMemTableRepFactory(mo, &o.memtable_factory).ok());
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, dir.path() + "/db", &db).ok());
  const std::string line = "still kept alive by RocksDB";
  std::mutex mu;
  std::vector<std::unique_ptr<rocksdb::Iterator>> held;
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    const std::string value(1000, 'v');
    for (int key = 0; !stop.load() && key < 500000; key++) {
      ASSERT_TRUE(db->Put(wo, "k" + std::to_string(key), value).ok());
      written.store(key + 1);
      if (key % 1000 == 999) {  // pins the memtables of this moment
        std::lock_guard<std::mutex> g(mu);
        held.emplace_back(db->NewIterator(rocksdb::ReadOptions()));
      }
    }
  });
  // 64 MiB of pool, an iterator per MiB written: the line comes within the
  // first hundred MiB; the deadline only turns a missing line into a
  // failure instead of a hang.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (log->Count(line) == 0 && written.load() < 500000 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop.store(true);
  const int lines = log->Count(line);
  {
    std::lock_guard<std::mutex> g(mu);
    held.clear();  // the pinned memtables go, and their space
  }
  writer.join();
  EXPECT_GE(lines, 1) << log->All();
  EXPECT_NE(log->All().find("flushed memtable(s) holding"), std::string::npos);
  EXPECT_TRUE(db->Close().ok());
  delete db;
}

// End to end: a write of an entry larger than the pool, in a memtable of
// its own, says in the DB's info log that it cannot complete (the writer
// stays blocked: RocksDB gives a memtable no way to fail a write, so the
// check runs in a child process that exits once the line is there).
TEST(RocksMemtableDeathTest, EntryLargerThanThePoolSaysItCannotBeWritten) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  test::TempDir dir("rmem_huge");
  EXPECT_EXIT(
      {
        UnusedKeyComparator cmp;
        CapturingLogger log;
        auto f = SmallPoolFactory(dir, 16 << 20);
        auto rep = NewRep(f.get(), cmp, &log);
        std::thread([&] {
          char* p = nullptr;
          rep->Allocate(20 << 20, &p);
        }).detach();
        const std::string kLine = "cannot come";
        for (int i = 0; i < 30000 && log.Count(kLine) == 0; i++) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::fprintf(stderr, "%s", log.All().c_str());
        const int code = log.Count(kLine) == 1 ? 0 : 1;
        std::error_code ec;  // the child's TempDir: no destructor runs
        std::filesystem::remove_all(dir.path(), ec);
        std::_Exit(code);
      },
      ::testing::ExitedWithCode(0),
      "20971520-byte entry waits for pool space that cannot come");
}

std::string Key(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "key%06d", i);
  return buf;
}

// A small write buffer holds many tiny writes, as with the
// default memtable (before: one L0 file per write or two).
TEST(RocksMemtableTest, SmallWriteBufferHoldsTinyWrites) {
  for (bool flint : {false, true}) {
    TestDb t(flint ? "smallwb_flint" : "smallwb_ref", flint, 64 << 10,
             64 << 10);
    for (int i = 0; i < 100; i++) t.Put(Key(i), "v");
    EXPECT_EQ(0, t.flushes->n.load()) << (flint ? "flintkv" : "skiplist");
    EXPECT_EQ(0u, t.Property("rocksdb.num-files-at-level0"));
  }
}

// An empty or nearly empty memtable reports about what the
// default memtable does, not a chunk plus a 512-thread slot array.
TEST(RocksMemtableTest, NearlyEmptyMemtableUsageMatchesSkipList) {
  TestDb ref("usage_ref", false, 64 << 10);
  TestDb flint("usage_flint", true, 64 << 10, 64 << 10);
  const char* kProp = "rocksdb.cur-size-active-mem-table";
  uint64_t ref_empty = ref.Property(kProp);
  uint64_t flint_empty = flint.Property(kProp);
  EXPECT_LE(flint_empty, ref_empty + 256);
  for (int i = 0; i < 10; i++) {
    ref.Put(Key(i), "value");
    flint.Put(Key(i), "value");
  }
  uint64_t ref_ten = ref.Property(kProp);
  uint64_t flint_ten = flint.Property(kProp);
  // RocksDB trims flushed-memtable history (max_write_buffer_size_to_maintain)
  // by this figure: RocksDB's memtable_list_test keeps two 3-entry memtables
  // within 4 KB, and the memtable's own 2 KB arena block is already counted.
  EXPECT_LE(flint_ten, ref_ten + 2048);
  EXPECT_GT(flint_ten, flint_empty);  // usage follows the entries
  std::printf(
      "memtable usage empty/10 puts: skiplist %llu/%llu, flintkv "
      "%llu/%llu\n",
      static_cast<unsigned long long>(ref_empty),
      static_cast<unsigned long long>(ref_ten),
      static_cast<unsigned long long>(flint_empty),
      static_cast<unsigned long long>(flint_ten));
}

// 96 writer threads do not make the memtable look full (before:
// a 1 MiB chunk per thread, dozens of flushes for 3 MB of writes).
TEST(RocksMemtableTest, ManyWriterThreadsDoNotForceFlushes) {
  for (bool flint : {false, true}) {
    TestDb db(flint ? "threads_flint" : "threads_ref", flint, 16 << 20);
    const int kThreads = 96, kPerThread = 30;
    const std::string value(1000, 'v');
    test::RunLiveThreads(kThreads, [&](int t) {
      for (int i = 0; i < kPerThread; i++)
        db.Put(Key(t * kPerThread + i), value);
    });
    EXPECT_EQ(0, db.flushes->n.load()) << (flint ? "flintkv" : "skiplist");
  }
}

// More concurrently live writer threads than thread ids (before:
// the 513th retried forever in FlintRep and stalled the write group).
TEST(RocksMemtableTest, MoreLiveWriterThreadsThanIds) {
  TestDb db("600threads", true, 16 << 20);
  const int kThreads = 600;
  test::RunLiveThreads(kThreads, [&](int t) { db.Put(Key(t), "v"); });
  std::string v;
  for (int t = 0; t < kThreads; t += 7) {
    ASSERT_TRUE(db.db->Get(rocksdb::ReadOptions(), Key(t), &v).ok()) << t;
  }
}

// The same 1,000 entries written in different orders by
// different threads give one estimate, exact for a 10-key range.
TEST(RocksMemtableTest, ApproximateNumEntriesIsExact) {
  for (int build = 0; build < 4; build++) {
    TestDb db("estimate", true, 16 << 20);
    std::vector<int> order(1000);
    for (int i = 0; i < 1000; i++) order[i] = i;
    std::mt19937_64 rng(build);
    std::shuffle(order.begin(), order.end(), rng);
    const int threads = 1 + build;
    test::RunLiveThreads(threads, [&](int t) {
      for (size_t i = t; i < order.size(); i += threads) {
        db.Put(Key(order[i]), "v");
      }
    });
    ASSERT_EQ(0, db.flushes->n.load());
    auto count = [&](int a, int b) {
      std::string ka = Key(a), kb = Key(b);
      rocksdb::Range r(ka, kb);
      uint64_t n = 0, size = 0;
      db.db->GetApproximateMemTableStats(db.db->DefaultColumnFamily(), r, &n,
                                         &size);
      return n;
    };
    EXPECT_EQ(10u, count(100, 110)) << "build " << build;
    EXPECT_EQ(500u, count(250, 750)) << "build " << build;
  }
}

// Memtable key: varint32 length, then the key (and an 8-byte trailer).
std::string MemKey(const std::string& key, bool trailer, uint64_t seq = 0) {
  std::string k = key;
  if (trailer) {
    const uint64_t packed = seq << 8 | 1;
    k.append(reinterpret_cast<const char*>(&packed), 8);
  }
  std::string out(5, '\0');
  out.resize(memtable::EncodeVarint32(&out[0], k.size()) - &out[0]);
  return out + k;
}

int Sign(int c) { return (c > 0) - (c < 0); }

// The index's prefix fast path (memtable/key_comparator.h) must never
// contradict the comparator: whenever two prefixes differ, they order the
// keys as Compare does. Keys: short and long, zero and 0xff bytes, shared
// prefixes, one key a prefix of another. (A little-endian prefix, or one
// not padded with zeros, fails here.)
TEST(RocksMemtableTest, KeyPrefixOrderAgreesWithTheComparator) {
  std::mt19937 rng(7);
  std::vector<std::string> keys = {"",
                                   "a",
                                   std::string(1, '\0'),
                                   std::string("a\0", 2),
                                   "ab",
                                   "abcdefg",
                                   "abcdefgh",
                                   "abcdefgh\x01",
                                   "abcdefgi",
                                   std::string(9, '\xff'),
                                   "b"};
  const char alphabet[] = {'\0', '\x01', 'a', 'b', '\x7f', '\x80', '\xff'};
  for (int i = 0; i < 300; i++) {
    std::string k(rng() % 12, ' ');
    for (char& c : k) c = alphabet[rng() % sizeof(alphabet)];
    keys.push_back(k);
  }
  memtable::BytewiseKeyComparator plain;
  InternalKeyCmp internal(rocksdb::BytewiseComparator());
  ASSERT_TRUE(plain.prefix_ordered());
  ASSERT_TRUE(internal.prefix_ordered());
  for (bool trailer : {false, true}) {
    const memtable::KeyComparator& cmp =
        trailer ? static_cast<const memtable::KeyComparator&>(internal) : plain;
    size_t decided = 0;
    for (size_t i = 0; i < keys.size(); i++) {
      for (size_t j = 0; j < keys.size(); j++) {
        const std::string a = MemKey(keys[i], trailer, i);
        const std::string b = MemKey(keys[j], trailer, j);
        const uint64_t pa = cmp.OrderPrefix(a.data());
        const uint64_t pb = cmp.OrderPrefix(b.data());
        if (pa == pb) continue;
        decided++;
        ASSERT_EQ(pa < pb ? -1 : 1, Sign(cmp.Compare(a.data(), b.data())))
            << "keys " << i << ", " << j << " trailer " << trailer;
      }
    }
    EXPECT_GT(decided, keys.size() * keys.size() / 2);  // it does decide
  }
  // Any other user order gets no prefix.
  EXPECT_FALSE(
      InternalKeyCmp(rocksdb::ReverseBytewiseComparator()).prefix_ordered());
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The flintkv memtable compares index prefixes only under RocksDB's
// BytewiseComparator (it recognises RocksDB's memtable comparator and its
// user comparator, memtable/rocksdb/memtable_comparator_layout.h); under
// any other comparator it does not, and both orders come out right.
TEST(RocksMemtableTest, IndexPrefixesOnlyUnderBytewiseComparator) {
  std::vector<std::string> keys;
  for (int i = 0; i < 500; i++) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s%03d", i % 2 ? "samepref" : "s", i);
    keys.push_back(buf);
    keys.push_back(std::string(buf) + std::string(1, '\0'));
  }
  for (const rocksdb::Comparator* c :
       {rocksdb::BytewiseComparator(), rocksdb::ReverseBytewiseComparator()}) {
    const bool bytewise = c == rocksdb::BytewiseComparator();
    TestDb t(bytewise ? "prefix_bytewise" : "prefix_reverse", true, 16 << 20,
             1 << 20, c);
    for (const std::string& k : keys) t.Put(k, "v" + k);
    std::vector<std::string> want = keys;
    std::sort(want.begin(), want.end(),
              [c](const std::string& a, const std::string& b) {
                return c->Compare(a, b) < 0;
              });
    std::vector<std::string> got;
    std::unique_ptr<rocksdb::Iterator> it(
        t.db->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      got.push_back(it->key().ToString());
    }
    EXPECT_EQ(want, got) << c->Name();
    for (const std::string& k : keys) {
      std::string v;
      ASSERT_TRUE(t.db->Get(rocksdb::ReadOptions(), k, &v).ok()) << k;
      EXPECT_EQ("v" + k, v);
    }
    EXPECT_EQ(0u, t.Property("rocksdb.num-files-at-level0"));  // memtable
    const std::string log = ReadFile(t.dir.path() + "/db/LOG");
    EXPECT_NE(std::string::npos, log.find(bytewise ? "index key prefixes on"
                                                   : "index key prefixes off"))
        << c->Name();
  }
}

}  // namespace
}  // namespace flintkv

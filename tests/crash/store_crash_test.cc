// Crash recovery by SIGKILL of a child process (P2, P3, P4).
//
// The parent forks a child (before any thread exists in the child) that
// opens the store and runs T writer threads. Thread t works on its own key
// space "t<t>/..." and runs a deterministic op sequence (Put, Delete, a
// batch rewriting a whole group with one generation, a batch deleting a
// group, a mixed batch with duplicate keys), reporting op i through a pipe
// only after the call returned OK. The parent kills the child at a random
// moment, reopens the pool and regenerates every thread's sequence: with n_t
// ops acknowledged, thread t's keys must equal exactly the state after ops
// [0, n_t) (state A) or after [0, n_t] (state B: op n_t was in flight and
// completed). That covers: every acknowledged op is present, an in-flight
// batch is all-or-nothing, and nothing appears that was never written.
// The verified state is the base for the next kill on the same pool, so
// recoveries of recovered pools (and kills during recovery, delay 0) are
// exercised too. The child's version GC runs every millisecond, so kills
// also interrupt its unlinks and the reuse of freed nodes. Per-put and
// group commit (P15) each get a campaign.
// FLINTKV_LONG_TESTS=1: 500 kills instead of 20.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/store.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

using Model = std::map<std::string, std::string>;

constexpr int kMaxThreads = 4;
constexpr int kKeysPerThread = 32;
constexpr int kGroupsPerThread = 4;
constexpr int kGroupSize = 6;
constexpr uint64_t kMaxOpsPerThread = 200000;  // then the child idles
constexpr uint64_t kChunkSize = 64 << 10;

struct Record {
  uint32_t thread;  // kOpenedRecord: the store is open, threads start
  uint32_t index;
};
constexpr uint32_t kOpenedRecord = UINT32_MAX;
static_assert(sizeof(Record) <= PIPE_BUF, "pipe writes must be atomic");

struct CrashOp {
  enum Kind { kPut, kDelete, kBatch } kind;
  std::vector<WriteBatch::Op> ops;  // one op for kPut/kDelete
};

std::string ThreadPrefix(int t) { return "t" + std::to_string(t) + "/"; }

std::string SingleKey(int t, int k) {
  // Every 8th key is long (two-byte varint length prefix).
  std::string key = ThreadPrefix(t) + "k" + std::to_string(k);
  if (k % 8 == 7) key += std::string(130, 'L');
  return key;
}

std::string BigBatchKey(int t, int i) {
  return ThreadPrefix(t) + "b" + std::to_string(i);
}

std::string GroupKey(int t, int g, int i) {
  return ThreadPrefix(t) + "g" + std::to_string(g) + "/" + std::to_string(i);
}

// Unique per (thread, op, position): a value that shows up but was never
// written cannot match any expectation.
std::string OpValue(int t, uint64_t idx, int pos, std::mt19937_64* rng) {
  std::string v = "t" + std::to_string(t) + "#" + std::to_string(idx) + "#" +
                  std::to_string(pos) + "|";
  uint64_t r = (*rng)() % 100;
  size_t filler = r < 90   ? (*rng)() % 64
                  : r < 99 ? 200 + (*rng)() % 800
                           : kChunkSize / 4 + 100;
  v.append(filler, static_cast<char>('a' + idx % 26));
  return v;
}

// Thread t's op sequence, regenerated identically by child and parent.
class OpStream {
 public:
  OpStream(uint64_t seed, int t, bool batch_only)
      : rng_(seed * 7919 + t), t_(t), batch_only_(batch_only) {}

  CrashOp Next() {
    uint64_t idx = next_idx_++;
    CrashOp op;
    uint64_t r = batch_only_ ? 45 + rng_() % 55 : rng_() % 100;
    if (r >= 95 || (batch_only_ && r >= 70)) {
      // Big batch: 20-64 distinct keys, one generation. Keeps the combiner
      // inside its batch_mode window long enough for kills to land there.
      op.kind = CrashOp::kBatch;
      int n = 20 + static_cast<int>(rng_() % 45);
      int first = static_cast<int>(rng_() % 64);
      for (int i = 0; i < n; i++) {
        op.ops.push_back({false, BigBatchKey(t_, (first + i) % 64),
                          OpValue(t_, idx, i, &rng_)});
      }
    } else if (r < 35) {
      op.kind = CrashOp::kPut;
      std::string k = SingleKey(t_, static_cast<int>(rng_() % kKeysPerThread));
      op.ops.push_back({false, k, OpValue(t_, idx, 0, &rng_)});
    } else if (r < 45) {
      op.kind = CrashOp::kDelete;
      std::string k = SingleKey(t_, static_cast<int>(rng_() % kKeysPerThread));
      op.ops.push_back({true, k, ""});
    } else if (r < 85) {
      // Whole group, one generation (or a whole-group delete).
      op.kind = CrashOp::kBatch;
      int g = static_cast<int>(rng_() % kGroupsPerThread);
      bool del = rng_() % 6 == 0;
      for (int i = 0; i < kGroupSize; i++) {
        std::string k = GroupKey(t_, g, i);
        if (del) {
          op.ops.push_back({true, k, ""});
        } else {
          op.ops.push_back({false, k, OpValue(t_, idx, i, &rng_)});
        }
      }
    } else {
      // Mixed batch over single keys, with duplicates (last wins).
      op.kind = CrashOp::kBatch;
      int n = 1 + static_cast<int>(rng_() % 8);
      for (int i = 0; i < n; i++) {
        std::string k =
            SingleKey(t_, static_cast<int>(rng_() % (kKeysPerThread / 4)));
        if (rng_() % 4 == 0) {
          op.ops.push_back({true, k, ""});
        } else {
          op.ops.push_back({false, k, OpValue(t_, idx, i, &rng_)});
        }
      }
    }
    return op;
  }

 private:
  std::mt19937_64 rng_;
  int t_;
  bool batch_only_;
  uint64_t next_idx_ = 0;
};

void Apply(const CrashOp& op, Model* m) {
  for (const WriteBatch::Op& o : op.ops) {
    if (o.is_delete) {
      m->erase(o.key);
    } else {
      (*m)[o.key] = o.value;
    }
  }
}

Status Execute(Store* store, const CrashOp& op) {
  switch (op.kind) {
    case CrashOp::kPut:
      return store->Put(op.ops[0].key, op.ops[0].value);
    case CrashOp::kDelete:
      return store->Delete(op.ops[0].key);
    case CrashOp::kBatch: {
      WriteBatch b;
      for (const WriteBatch::Op& o : op.ops) {
        if (o.is_delete) {
          b.Delete(o.key);
        } else {
          b.Put(o.key, o.value);
        }
      }
      return store->Write(b);
    }
  }
  return Status::InvalidArgument("bad op");
}

// Child exit codes (the parent expects death by SIGKILL).
constexpr int kChildOpenFailed = 3;
constexpr int kChildOpFailed = 4;
constexpr int kChildPipeFailed = 5;

[[noreturn]] void RunChild(const StoreOptions& options, uint64_t seed,
                           int threads, bool batch_only, int fd) {
  std::unique_ptr<Store> store;
  if (!Store::Open(options, &store).ok()) _exit(kChildOpenFailed);
  Record opened{kOpenedRecord, 0};
  if (write(fd, &opened, sizeof(opened)) != sizeof(opened)) {
    _exit(kChildPipeFailed);
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; t++) {
    workers.emplace_back([&, t] {
      OpStream stream(seed, t, batch_only);
      for (uint64_t i = 0; i < kMaxOpsPerThread; i++) {
        CrashOp op = stream.Next();
        if (!Execute(store.get(), op).ok()) _exit(kChildOpFailed);
        // Acknowledged: report only now.
        Record rec{static_cast<uint32_t>(t), static_cast<uint32_t>(i)};
        ssize_t n;
        do {
          n = write(fd, &rec, sizeof(rec));
        } while (n < 0 && errno == EINTR);
        if (n != static_cast<ssize_t>(sizeof(rec))) _exit(kChildPipeFailed);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  // Done before the kill: wait for it without touching the store again.
  while (true) pause();
}

// Reads available records (blocking until EOF if wait_eof).
bool Drain(int fd, std::vector<uint64_t>* acked, bool* opened, bool wait_eof,
           std::string* err) {
  Record buf[512];
  while (true) {
    if (!wait_eof) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) return true;
    }
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = "read from pipe failed";
      return false;
    }
    if (n == 0) return true;  // EOF
    if (n % sizeof(Record) != 0) {
      // Records are written atomically; a pipe read may still split them.
      size_t whole = n / sizeof(Record) * sizeof(Record);
      char rest[sizeof(Record)];
      size_t need = sizeof(Record) - (n - whole);
      std::memcpy(rest, reinterpret_cast<char*>(buf) + whole, n - whole);
      ssize_t m = read(fd, rest + (n - whole), need);
      if (m != static_cast<ssize_t>(need)) {
        *err = "torn record in pipe";
        return false;
      }
      std::memcpy(reinterpret_cast<char*>(buf) + whole, rest, sizeof(Record));
      n = whole + sizeof(Record);
    }
    for (size_t i = 0; i < n / sizeof(Record); i++) {
      const Record& r = buf[i];
      if (r.thread == kOpenedRecord) {
        *opened = true;
        continue;
      }
      if (r.thread >= acked->size()) {
        *err = "record for unknown thread";
        return false;
      }
      // Each thread reports its ops in order, one at a time.
      if (r.index != (*acked)[r.thread]) {
        *err = "thread " + std::to_string(r.thread) + " reported op " +
               std::to_string(r.index) + ", expected " +
               std::to_string((*acked)[r.thread]);
        return false;
      }
      (*acked)[r.thread] = r.index + 1;
    }
  }
}

Model Restrict(const Model& m, const std::string& prefix) {
  Model out;
  for (auto it = m.lower_bound(prefix);
       it != m.end() && it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    out.insert(*it);
  }
  return out;
}

std::string DescribeDiff(const Model& got, const Model& want) {
  for (const auto& kv : want) {
    auto it = got.find(kv.first);
    if (it == got.end()) return "missing " + test::Printable(kv.first, 40);
    if (it->second != kv.second) {
      return "key " + test::Printable(kv.first, 40) + " has " +
             test::Printable(it->second, 40) + " expected " +
             test::Printable(kv.second, 40);
    }
  }
  for (const auto& kv : got) {
    if (!want.count(kv.first)) {
      return "unexpected " + test::Printable(kv.first, 40) + " = " +
             test::Printable(kv.second, 40);
    }
  }
  return "equal";
}

Model ScanAll(Store* store) {
  Model m;
  std::unique_ptr<Iterator> it = store->NewIterator();
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    m.emplace(std::string(it->key()), std::string(it->value()));
  }
  return m;
}

class CrashTest : public ::testing::Test {
 protected:
  struct Mode {
    int kills;
    int kills_per_pool;  // then a fresh pool
    uint64_t base_seed;
    int max_threads;  // 1..kMaxThreads writer threads per child
    bool batch_only;
    bool group_commit = false;  // one fence per combining pass (P15)
  };
  void RunKills(const Mode& mode);
};

void CrashTest::RunKills(const Mode& mode) {
  const int kills = mode.kills;
  const uint64_t base_seed = mode.base_seed;
  std::mt19937_64 rng(base_seed);
  std::unique_ptr<test::TempPool> pool;
  StoreOptions options;
  Model base;
  uint64_t total_acked = 0, total_dropped = 0, total_rolled_back = 0;
  int in_flight_completed = 0, kills_during_open = 0;

  for (int kill_no = 0; kill_no < kills; kill_no++) {
    if (kill_no % mode.kills_per_pool == 0) {
      pool = std::make_unique<test::TempPool>(std::to_string(kill_no));
      options = test::QuietStoreOptions(pool->path(), 256ull << 20, kChunkSize);
      // The child's version GC runs as often as it can: kills also land in
      // its passes (unlinks, reuse of freed nodes), docs/gc.md.
      options.gc_interval_ms = 1;
      options.durability.group_commit = mode.group_commit;
      std::unique_ptr<Store> s;
      // Created here: a kill during pool creation is not what we test.
      ASSERT_TRUE(Store::Open(options, &s).ok());
      base.clear();
    }
    const uint64_t seed = base_seed * 1000 + kill_no;
    const int threads = 1 + static_cast<int>(rng() % mode.max_threads);
    // The random delay counts from one of three moments, so that kills
    // land in every phase whatever the speed of the build (sanitizers):
    // the fork (kills during open and recovery), the end of the child's
    // Store::Open (thread start, first chunk), or the first acknowledged op
    // (kills during writes, most of them).
    enum Anchor { kFork, kOpen, kFirstAck };
    uint64_t r = rng() % 10;
    const Anchor anchor = r < 2 ? kFork : r < 3 ? kOpen : kFirstAck;
    const uint64_t delay_us = r == 0  ? 0
                              : r < 3 ? rng() % 20000
                              : r < 5 ? rng() % 1000
                                      : 1000 + rng() % 20000;
    static const char* const kAnchorName[] = {"fork", "open", "first ack"};
    std::string where = "kill " + std::to_string(kill_no) + " (seed " +
                        std::to_string(seed) + ", " + std::to_string(threads) +
                        " threads, " + std::to_string(delay_us) + " us from " +
                        kAnchorName[anchor] + ")";

    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      close(fds[0]);
      RunChild(options, seed, threads, mode.batch_only, fds[1]);
    }
    close(fds[1]);
    std::vector<uint64_t> acked(threads, 0);
    std::string err;
    bool opened = false, ok = true, reaped = false;
    int status = 0;
    auto start = std::chrono::steady_clock::now();
    const auto open_limit = start + std::chrono::seconds(30);
    auto anchor_reached = [&] {
      switch (anchor) {
        case kFork:
          return true;
        case kOpen:
          return opened;
        case kFirstAck:
          return std::any_of(acked.begin(), acked.end(),
                             [](uint64_t n) { return n > 0; });
      }
      return true;
    };
    while (ok && !anchor_reached() &&
           std::chrono::steady_clock::now() < open_limit) {
      pollfd p{fds[0], POLLIN, 0};
      poll(&p, 1, 10);
      ok = Drain(fds[0], &acked, &opened, false, &err);
      if (waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;  // died early; reported below
        break;
      }
    }
    if (anchor != kFork) start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::microseconds(delay_us);
    while (ok && std::chrono::steady_clock::now() < deadline) {
      ok = Drain(fds[0], &acked, &opened, false, &err);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!reaped) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (ok) ok = Drain(fds[0], &acked, &opened, true, &err);
    close(fds[0]);
    ASSERT_TRUE(ok) << where << ": " << err;
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << where << ": child did not die by our SIGKILL: "
        << (WIFEXITED(status)
                ? "exit code " + std::to_string(WEXITSTATUS(status))
                : "signal " + std::to_string(WTERMSIG(status)));

    // Expected states: A = base + acknowledged ops; per thread, B_t = A_t +
    // the one op that may have been in flight.
    Model a = base;
    std::vector<CrashOp> in_flight;
    for (int t = 0; t < threads; t++) {
      OpStream stream(seed, t, mode.batch_only);
      for (uint64_t i = 0; i < acked[t]; i++) Apply(stream.Next(), &a);
      in_flight.push_back(stream.Next());
      total_acked += acked[t];
    }
    bool any_acked = false;
    for (uint64_t n : acked) any_acked |= n > 0;
    if (!any_acked) kills_during_open++;
    if (std::getenv("FLINTKV_CRASH_TEST_VERBOSE"))
      std::printf("%s opened=%d acked0=%llu\n", where.c_str(), opened,
                  (unsigned long long)acked[0]);

    std::unique_ptr<Store> store;
    Status s = Store::Open(options, &store);
    ASSERT_TRUE(s.ok()) << where << ": reopen after kill: " << s.ToString();
    StoreStats st = store->GetStats();
    // A process crash keeps every store in program order. The combiner
    // stores a node's PMEM link just before its version, inside one fence
    // window (memtable/durable_skiplist_commit_inl.h, ProcessPut): a kill
    // between the two leaves the one node it was linking with version MAX,
    // unacknowledged, which recovery drops (R1, P4). Only one combiner runs
    // at a time, so at most one such node.
    EXPECT_LE(st.dropped_uncommitted, 1u) << where;
    // At most one batch is torn at a time.
    EXPECT_LE(st.rolled_back_batch, 64u) << where;
    total_dropped += st.dropped_uncommitted;
    total_rolled_back += st.rolled_back_batch;

    Model got = ScanAll(store.get());
    for (int t = 0; t < kMaxThreads; t++) {
      std::string prefix = ThreadPrefix(t);
      Model got_t = Restrict(got, prefix);
      Model a_t = Restrict(a, prefix);
      if (got_t == a_t) continue;
      if (t < threads) {
        Model b_t = a_t;
        Apply(in_flight[t], &b_t);
        if (got_t == b_t) {
          in_flight_completed++;
          continue;
        }
        ADD_FAILURE() << where << ": thread " << t << " with " << acked[t]
                      << " acknowledged ops recovered to neither state. vs "
                      << "acknowledged: " << DescribeDiff(got_t, a_t)
                      << "; vs in-flight op done: " << DescribeDiff(got_t, b_t);
      } else {
        ADD_FAILURE() << where << ": idle key space " << prefix
                      << " changed: " << DescribeDiff(got_t, a_t);
      }
    }
    // Nothing outside the threads' key spaces.
    size_t counted = 0;
    for (int t = 0; t < kMaxThreads; t++) {
      counted += Restrict(got, ThreadPrefix(t)).size();
    }
    EXPECT_EQ(counted, got.size()) << where << ": keys outside every thread";
    // Point reads agree with the scan (index rebuilt consistently).
    std::string v;
    for (const auto& kv : got) {
      Status g = store->Get(kv.first, &v);
      ASSERT_TRUE(g.ok()) << where << " Get " << test::Printable(kv.first);
      ASSERT_EQ(v, kv.second) << where;
    }
    if (HasFailure()) return;
    base = std::move(got);
  }
  RecordProperty("acked_ops", static_cast<int>(total_acked));
  RecordProperty("in_flight_completed", in_flight_completed);
  RecordProperty("kills_before_first_ack", kills_during_open);
  RecordProperty("dropped_uncommitted", static_cast<int>(total_dropped));
  RecordProperty("rolled_back_batch_nodes",
                 static_cast<int>(total_rolled_back));
  std::printf(
      "[ stats    ] %d kills, %llu acknowledged ops, %d in-flight ops found "
      "completed, %d kills before the first ack, recovery dropped %llu "
      "uncommitted and rolled back %llu batch nodes\n",
      kills, static_cast<unsigned long long>(total_acked), in_flight_completed,
      kills_during_open, static_cast<unsigned long long>(total_dropped),
      static_cast<unsigned long long>(total_rolled_back));
  EXPECT_GT(total_acked, 0u) << "no child ever acknowledged an op";
}

TEST_F(CrashTest, SigkillDuringConcurrentWrites) {
  RunKills({test::LongMode() ? 500 : 20, 10, 1, kMaxThreads, false});
}

// The same with group commit: kills land between a pass's links and its
// single fence (P15), where several unacknowledged puts are linked.
TEST_F(CrashTest, SigkillDuringConcurrentWritesGroupCommit) {
  RunKills({test::LongMode() ? 500 : 20, 10, 3, kMaxThreads, false, true});
}

// One or two writers doing only batches: kills land inside batches (and
// inside the combiner's batch_mode window) more often.
TEST_F(CrashTest, SigkillDuringBatchesRecoveryIsAtomic) {
  RunKills({test::LongMode() ? 200 : 10, 5, 2, 2, true});
}

}  // namespace
}  // namespace flintkv

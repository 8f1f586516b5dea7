// Process-kill campaign for RocksDB + the flintkv memtable with the WAL off.
// A child process (this binary re-executed) runs three writer
// threads doing puts, deletes, merges and multi-key batches across three
// column families with tiny write buffers (many memtable switches and
// flushes) and reports every acknowledged operation through a pipe. The
// parent SIGKILLs it at a random moment, recovers (flintkv::OpenDB), and
// checks, per writer thread (each owns its keys):
//  - every acknowledged operation is present and nothing older resurfaces:
//    the state is the model after the last reported operation n, or after
//    the one op n+1 that may have been in flight;
//  - wrapper mode (OpenDB): a batch is all-or-nothing — the whole state is
//    exactly M(n) or exactly M(n+1);
//  - plain mode (factory + DB::Open + RecoverInto): per key M(n) or M(n+1),
//    a batch in flight may be torn (the documented plain guarantee).
// Quick: ~25 kills per mode; FLINTKV_LONG_TESTS=1: 1500 per mode.
//
// Below: the campaign's building blocks (namespace crash_campaign): the
// configuration matrix rows (docs/rocksdb_config_matrix.md), the
// deterministic per-thread workload and its model, and how each row opens
// and closes the DB (plain factory or flintkv::OpenDB).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/inspect.h"
#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/utilities/optimistic_transaction_db.h"
#include "rocksdb/utilities/stackable_db.h"
#include "rocksdb/utilities/transaction_db.h"
#include "tests/recovery/rocksdb_scenario.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace crash_campaign {

using test::AppendOperator;

constexpr int kThreads = 3;
constexpr int kKeysPerThread = 64;
constexpr int kCfs = 3;
inline const char* const kCfNames[kCfs] = {"default", "cf1", "cf2"};
// Campaigns: tiny write buffers, many switches and flushes. Hold mode: so
// large that nothing the child writes is ever flushed.
constexpr size_t kSmallWriteBuffer = 128 << 10;
constexpr size_t kNoFlushWriteBuffer = 32 << 20;

// One row of the configuration matrix (docs/rocksdb_config_matrix.md): the
// RocksDB options a campaign runs with. "default" is the WAL-less setup of
// the two main campaigns.
enum class Txn { kNone, kPessimistic, kOptimistic };
struct Config {
  const char* name;
  bool plain;    // run with the plain factory
  bool wrapper;  // run with flintkv::OpenDB
  bool wal = false;
  bool sync = false;
  bool manual_wal_flush = false;
  bool pipelined = false;
  bool two_write_queues = false;
  bool concurrent_memtable = true;
  bool atomic_flush = false;
  bool avoid_flush_during_recovery = false;
  int max_write_buffer_number = 4;
  int min_to_merge = 1;
  int64_t maintain = 0;  // max_write_buffer_size_to_maintain
  bool prefix_bloom = false;
  Txn txn = Txn::kNone;
  // > 0: avoid_flush_during_shutdown, and the child closes the DB (its
  // memtables stay unflushed in the pool) and reopens it (OpenDB recovers
  // them) after about this many acknowledged operations, again and again.
  int close_every = 0;
};
inline const Config kConfigs[] = {
    {"default", true, true},
    {"wal", true, false, /*wal=*/true},
    {"wal_sync", true, false, true, /*sync=*/true},
    {"manual_wal_flush", true, false, true, false, /*manual=*/true},
    {"pipelined_write", true, true, false, false, false, /*pipelined=*/true},
    {"two_write_queues", true, false, false, false, false, false,
     /*two_write_queues=*/true},
    {"no_concurrent_memtable_write", true, true, false, false, false, false,
     false, /*concurrent=*/false},
    {"atomic_flush", true, true, false, false, false, false, false, true,
     /*atomic_flush=*/true},
    {"wal_avoid_flush_during_recovery", true, false, /*wal=*/true, false, false,
     false, false, true, false, /*avoid_flush_during_recovery=*/true},
    {"write_buffers_2_merge_2", true, true, false, false, false, false, false,
     true, false, false, /*max_write_buffer_number=*/2, /*min_to_merge=*/2},
    {"max_write_buffer_size_to_maintain", true, true, false, false, false,
     false, false, true, false, false, 4, 1, /*maintain=*/1 << 20},
    {"memtable_prefix_bloom", true, true, false, false, false, false, false,
     true, false, false, 4, 1, 0, /*prefix_bloom=*/true},
    {"transaction_db", true, false, false, false, false, false, false, true,
     false, false, 4, 1, 0, false, Txn::kPessimistic},
    {"optimistic_transaction_db", true, false, false, false, false, false,
     false, true, false, false, 4, 1, 0, false, Txn::kOptimistic},
    {"avoid_flush_during_shutdown", false, true, false, false, false, false,
     false, true, false, false, 4, 1, 0, false, Txn::kNone,
     /*close_every=*/400},
};
inline const Config& ConfigNamed(const std::string& name) {
  for (const Config& c : kConfigs) {
    if (name == c.name) return c;
  }
  std::fprintf(stderr, "unknown config %s\n", name.c_str());
  std::abort();
}

// ---- The deterministic workload ----

enum class Kind { kPut, kDelete, kMerge };
struct Mut {
  Kind kind;
  int cf;
  std::string key;
  std::string value;
};
using Op = std::vector<Mut>;  // size 1: single write; >1: a WriteBatch

inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline std::string KeyOf(int t, int k) {
  char b[32];
  std::snprintf(b, sizeof(b), "t%d-k%04d", t, k);
  return b;
}

inline Op GenOp(uint64_t seed, int t, uint64_t n) {
  std::mt19937_64 rng(Mix(seed ^ Mix(t * 1000003ull + n)));
  auto mut = [&](int i) {
    Mut m;
    uint64_t r = rng() % 100;
    m.kind = r < 65 ? Kind::kPut : (r < 85 ? Kind::kDelete : Kind::kMerge);
    m.cf = static_cast<int>(rng() % kCfs);
    m.key = KeyOf(t, static_cast<int>(rng() % kKeysPerThread));
    m.value =
        std::to_string(t) + ":" + std::to_string(n) + ":" + std::to_string(i);
    if (m.kind == Kind::kPut) m.value.append(40 + rng() % 200, 'v');
    return m;
  };
  Op op;
  if (rng() % 100 < 30) {  // a multi-key batch across column families
    int len = 2 + static_cast<int>(rng() % 6);
    std::vector<std::pair<int, std::string>> used;
    for (int i = 0; i < len; i++) {
      Mut m = mut(i);
      bool dup = false;
      for (auto& u : used) dup |= (u.first == m.cf && u.second == m.key);
      if (dup) continue;  // distinct (cf, key) keeps the model simple
      used.emplace_back(m.cf, m.key);
      op.push_back(std::move(m));
    }
  } else {
    op.push_back(mut(0));
  }
  return op;
}

// State of one thread's keys: (cf, key) -> value (absent = deleted).
using State = std::map<std::pair<int, std::string>, std::string>;

inline void Apply(const Op& op, State* s) {
  for (const Mut& m : op) {
    auto k = std::make_pair(m.cf, m.key);
    switch (m.kind) {
      case Kind::kPut:
        (*s)[k] = m.value;
        break;
      case Kind::kDelete:
        s->erase(k);
        break;
      case Kind::kMerge: {
        auto it = s->find(k);
        if (it == s->end()) {
          (*s)[k] = m.value;
        } else {
          it->second += "," + m.value;
        }
        break;
      }
    }
  }
}

// ---- Opening the DB ----

inline rocksdb::DBOptions DbOptions(const Config& c = kConfigs[0]) {
  rocksdb::DBOptions o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  o.max_background_jobs = 2;
  o.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  o.manual_wal_flush = c.manual_wal_flush;
  o.enable_pipelined_write = c.pipelined;
  o.two_write_queues = c.two_write_queues;
  o.allow_concurrent_memtable_write = c.concurrent_memtable;
  o.atomic_flush = c.atomic_flush;
  o.avoid_flush_during_recovery = c.avoid_flush_during_recovery;
  o.avoid_flush_during_shutdown = c.close_every > 0;
  return o;
}

inline std::vector<rocksdb::ColumnFamilyDescriptor> Cfs(
    std::shared_ptr<rocksdb::MemTableRepFactory> factory = nullptr,
    size_t write_buffer_size = kSmallWriteBuffer,
    const Config& c = kConfigs[0]) {
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* n : kCfNames) {
    rocksdb::ColumnFamilyOptions co;
    co.write_buffer_size = write_buffer_size;
    co.max_write_buffer_number = c.max_write_buffer_number;
    co.min_write_buffer_number_to_merge = c.min_to_merge;
    co.max_write_buffer_size_to_maintain = c.maintain;
    if (c.prefix_bloom) {
      co.prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(4));
      co.memtable_prefix_bloom_size_ratio = 0.1;
    }
    co.merge_operator = std::make_shared<AppendOperator>();
    co.memtable_factory = factory;
    cfs.emplace_back(n, co);
  }
  return cfs;
}

// DB::Open, or the transaction DB the config names.
inline rocksdb::Status OpenRocks(
    const Config& c, const std::string& path,
    const std::vector<rocksdb::ColumnFamilyDescriptor>& cfs,
    std::vector<rocksdb::ColumnFamilyHandle*>* handles, rocksdb::DB** db) {
  if (c.txn == Txn::kPessimistic) {
    rocksdb::TransactionDB* t = nullptr;
    rocksdb::Status s = rocksdb::TransactionDB::Open(
        DbOptions(c), rocksdb::TransactionDBOptions(), path, cfs, handles, &t);
    *db = t;
    return s;
  }
  if (c.txn == Txn::kOptimistic) {
    rocksdb::OptimisticTransactionDB* t = nullptr;
    rocksdb::Status s = rocksdb::OptimisticTransactionDB::Open(
        DbOptions(c), path, cfs, handles, &t);
    *db = t;
    return s;
  }
  return rocksdb::DB::Open(DbOptions(c), path, cfs, handles, db);
}

inline RecoveryOptions Ropts(const std::string& dir) {
  RecoveryOptions ro;
  ro.memtable.pool_dir = dir + "/pool";
  ro.memtable.pool_size = 256ull << 20;
  return ro;
}

// wrapper: flintkv::OpenDB. plain: the factory + DB::Open + RecoverInto.
inline rocksdb::Status Open(const std::string& dir, bool wrapper,
                            std::vector<rocksdb::ColumnFamilyHandle*>* handles,
                            rocksdb::DB** db, RecoveryReport* report,
                            size_t write_buffer_size = kSmallWriteBuffer,
                            const Config& c = kConfigs[0]) {
  RecoveryOptions ro = Ropts(dir);
  if (wrapper) {
    return OpenDB(DbOptions(c), dir + "/db", Cfs(nullptr, write_buffer_size, c),
                  handles, db, ro, report);
  }
  bool existed =
      access((ro.memtable.pool_dir + "/flintkv.pool").c_str(), F_OK) == 0;
  if (existed) {
    rocksdb::Status s = BeginRecovery(dir + "/db", ro);
    if (!s.ok()) return s;
  }
  MemTableOptions mo;
  mo.pool_dir = ro.memtable.pool_dir;
  mo.pool_size = ro.memtable.pool_size;
  std::shared_ptr<rocksdb::MemTableRepFactory> f;
  rocksdb::Status s = NewMemTableRepFactory(mo, &f);
  if (!s.ok()) return s;
  auto cfs = Cfs(f, write_buffer_size, c);
  for (auto& cf : cfs) cf.options.disable_auto_compactions = existed;
  s = OpenRocks(c, dir + "/db", cfs, handles, db);
  if (s.ok() && existed) s = RecoverInto(*db, *handles, ro, report);
  for (size_t i = 0; s.ok() && existed && i < handles->size(); i++) {
    s = (*db)->SetOptions((*handles)[i],
                          {{"disable_auto_compactions", "false"}});
  }
  if (!s.ok() && existed) EndRecovery(ro.memtable.pool_dir);
  return s;
}

// Returns DB::Close()'s Status; the DB is deleted either way.
inline rocksdb::Status CloseDb(rocksdb::DB* db,
                               std::vector<rocksdb::ColumnFamilyHandle*>* h) {
  for (auto* cf : *h) db->DestroyColumnFamilyHandle(cf);
  h->clear();
  rocksdb::Status s = db->Close();
  delete db;
  return s;
}

}  // namespace crash_campaign

namespace {

using crash_campaign::Apply;
using crash_campaign::Cfs;
using crash_campaign::CloseDb;
using crash_campaign::Config;
using crash_campaign::ConfigNamed;
using crash_campaign::DbOptions;
using crash_campaign::GenOp;
using crash_campaign::kCfs;
using crash_campaign::kConfigs;
using crash_campaign::KeyOf;
using crash_campaign::Kind;
using crash_campaign::kKeysPerThread;
using crash_campaign::kNoFlushWriteBuffer;
using crash_campaign::kSmallWriteBuffer;
using crash_campaign::kThreads;
using crash_campaign::Mix;
using crash_campaign::Mut;
using crash_campaign::Op;
using crash_campaign::Open;
using crash_campaign::State;
using crash_campaign::Txn;

// ---- Child ----

rocksdb::Status CommitOnce(rocksdb::DB* db, Txn txn,
                           const rocksdb::WriteOptions& wo,
                           const std::vector<rocksdb::ColumnFamilyHandle*>& h,
                           const Op& op) {
  std::unique_ptr<rocksdb::Transaction> t(
      txn == Txn::kPessimistic
          ? static_cast<rocksdb::TransactionDB*>(db)->BeginTransaction(wo)
          : static_cast<rocksdb::OptimisticTransactionDB*>(db)
                ->BeginTransaction(wo));
  for (const Mut& m : op) {
    rocksdb::Status s;
    if (m.kind == Kind::kPut) {
      s = t->Put(h[m.cf], m.key, m.value);
    } else if (m.kind == Kind::kDelete) {
      s = t->Delete(h[m.cf], m.key);
    } else {
      s = t->Merge(h[m.cf], m.key, m.value);
    }
    if (!s.ok()) return s;
  }
  return t->Commit();
}

// One operation as a transaction commit. An optimistic commit that cannot
// validate against the memtable history returns TryAgain (RocksDB's
// contract, with any memtable): the same transaction is retried.
rocksdb::Status Commit(rocksdb::DB* db, Txn txn,
                       const rocksdb::WriteOptions& wo,
                       const std::vector<rocksdb::ColumnFamilyHandle*>& h,
                       const Op& op) {
  rocksdb::Status s;
  do {
    s = CommitOnce(db, txn, wo, h, op);
  } while (s.IsTryAgain() || s.IsBusy());
  return s;
}

[[noreturn]] void ChildMain() {
  std::string dir = std::getenv("FLINTKV_RDB_CRASH_DIR");
  bool wrapper =
      std::strcmp(std::getenv("FLINTKV_RDB_CRASH_MODE"), "wrapper") == 0;
  uint64_t seed =
      std::strtoull(std::getenv("FLINTKV_RDB_CRASH_SEED"), nullptr, 10);
  int fd = std::atoi(std::getenv("FLINTKV_RDB_CRASH_FD"));
  uint64_t start[kThreads];
  {
    std::string s = std::getenv("FLINTKV_RDB_CRASH_START");
    size_t pos = 0;
    for (int t = 0; t < kThreads; t++) {
      start[t] = std::strtoull(s.c_str() + pos, nullptr, 10);
      pos = s.find(',', pos) + 1;
    }
  }
  // Hold mode: each thread does `hold` operations, then the child reports
  // "H" and waits to be killed, with every acknowledged write unflushed.
  const char* hold_env = std::getenv("FLINTKV_RDB_CRASH_HOLD");
  uint64_t hold = hold_env ? std::strtoull(hold_env, nullptr, 10) : 0;
  const char* config_env = std::getenv("FLINTKV_RDB_CRASH_CONFIG");
  const Config& config = ConfigNamed(config_env ? config_env : "default");
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  RecoveryReport rep;
  rocksdb::Status s =
      Open(dir, wrapper, &h, &db, &rep,
           hold ? kNoFlushWriteBuffer : kSmallWriteBuffer, config);
  if (!s.ok()) {
    std::fprintf(stderr, "child: open: %s\n", s.ToString().c_str());
    _exit(3);
  }
  if (write(fd, "R\n", 2) != 2) _exit(4);
  rocksdb::WriteOptions wo;
  wo.disableWAL = !config.wal;
  wo.sync = config.sync;
  // close_every: writers pass the gate for each operation; the closer
  // shuts it, waits for the operations inside, closes and reopens the DB.
  // It reads every key before the close and after the reopen: a write lost
  // by any cycle is caught at once, before later writes can overwrite it.
  if (config.close_every > 0 && hold) {
    std::fprintf(stderr, "child: close_every and hold do not combine\n");
    _exit(11);
  }
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  int inside = 0;
  bool closing = false;
  std::atomic<uint64_t> acked{0};
  std::vector<std::thread> threads;
  auto read_all = [&] {
    std::map<std::pair<int, std::string>, std::string> all;
    for (int cf = 0; cf < kCfs; cf++) {
      for (int t = 0; t < kThreads; t++) {
        for (int k = 0; k < kKeysPerThread; k++) {
          std::string v;
          rocksdb::Status rs =
              db->Get(rocksdb::ReadOptions(), h[cf], KeyOf(t, k), &v);
          if (!rs.ok() && !rs.IsNotFound()) {
            std::fprintf(stderr, "child: read: %s\n", rs.ToString().c_str());
            _exit(12);
          }
          if (rs.ok()) all[{cf, KeyOf(t, k)}] = v;
        }
      }
    }
    return all;
  };
  if (config.close_every > 0) {
    threads.emplace_back([&] {
      for (uint64_t next = config.close_every;; next += config.close_every) {
        while (acked.load(std::memory_order_acquire) < next) usleep(1000);
        std::unique_lock<std::mutex> l(gate_mu);
        closing = true;
        gate_cv.wait(l, [&] { return inside == 0; });
        auto before = read_all();
        if (write(fd, "c\n", 2) != 2) _exit(9);  // a close begins
        rocksdb::Status cs = CloseDb(db, &h);    // nothing flushed
        if (!cs.ok()) {
          std::fprintf(stderr, "child: close: %s\n", cs.ToString().c_str());
          _exit(10);
        }
        rocksdb::Status os =
            Open(dir, wrapper, &h, &db, &rep, kSmallWriteBuffer, config);
        if (!os.ok()) {
          std::fprintf(stderr, "child: reopen: %s\n", os.ToString().c_str());
          _exit(8);
        }
        if (read_all() != before) {
          std::fprintf(stderr, "child: close + reopen changed the data\n");
          _exit(13);
        }
        closing = false;
        gate_cv.notify_all();
        if (write(fd, "C\n", 2) != 2) _exit(9);
      }
    });
  }
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (uint64_t n = start[t]; !hold || n < start[t] + hold; n++) {
        Op op = GenOp(seed, t, n);
        if (config.close_every > 0) {
          std::unique_lock<std::mutex> l(gate_mu);
          gate_cv.wait(l, [&] { return !closing; });
          inside++;
        }
        rocksdb::Status st;
        if (config.txn != Txn::kNone) {
          st = Commit(db, config.txn, wo, h, op);
        } else if (op.size() == 1) {
          const Mut& m = op[0];
          if (m.kind == Kind::kPut) {
            st = db->Put(wo, h[m.cf], m.key, m.value);
          } else if (m.kind == Kind::kDelete) {
            st = db->Delete(wo, h[m.cf], m.key);
          } else {
            st = db->Merge(wo, h[m.cf], m.key, m.value);
          }
        } else {
          rocksdb::WriteBatch b;
          for (const Mut& m : op) {
            if (m.kind == Kind::kPut) {
              b.Put(h[m.cf], m.key, m.value);
            } else if (m.kind == Kind::kDelete) {
              b.Delete(h[m.cf], m.key);
            } else {
              b.Merge(h[m.cf], m.key, m.value);
            }
          }
          st = db->Write(wo, &b);
        }
        if (config.close_every > 0) {
          std::lock_guard<std::mutex> l(gate_mu);
          if (--inside == 0) gate_cv.notify_all();
        }
        if (!st.ok()) {
          std::fprintf(stderr, "child: write: %s\n", st.ToString().c_str());
          _exit(5);
        }
        acked.fetch_add(1, std::memory_order_release);
        char msg[64];
        int len = std::snprintf(msg, sizeof(msg), "%d %llu\n", t,
                                static_cast<unsigned long long>(n));
        if (write(fd, msg, len) != len) _exit(6);  // atomic (< PIPE_BUF)
      }
    });
  }
  for (auto& th : threads) th.join();
  if (!hold || write(fd, "H\n", 2) != 2) _exit(7);
  for (;;) pause();  // until SIGKILLed
}

// Re-executed child: runs from main() (test::RunInMainIf).
const int kIsChild =
    test::RunInMainIf("FLINTKV_RDB_CRASH_CHILD", [] { ChildMain(); });

// ---- Parent ----

struct Campaign {
  std::string dir;
  bool wrapper;
  const Config* config = &kConfigs[0];
  uint64_t seed;
  uint64_t next[kThreads] = {0, 0, 0};  // next op number per thread
  State state[kThreads];                // verified state per thread
  uint64_t acked_total = 0;
  uint64_t reopens = 0;         // close_every: completed close + reopens
  uint64_t kills_in_cycle = 0;  // kills between a close's start and reopen
};

// Runs one child until it has acknowledged about `acks` operations (then a
// random extra delay), kills it. Returns the last acked op per thread
// (next - 1: none in this run) via last[]. hold > 0: the child does exactly
// `hold` operations per thread without flushing and is killed only after it
// said so (no timing involved). close_every configs: min_reopens: also
// wait for that many completed close + reopen cycles; at_close: kill the
// child as soon as it says a close begins (acks ignored).
void RunChild(Campaign* c, int acks, int64_t last[kThreads], int hold = 0,
              int min_reopens = 0, bool at_close = false) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::string start;
  for (int t = 0; t < kThreads; t++) {
    start += std::to_string(c->next[t]) + (t + 1 < kThreads ? "," : "");
    // Nothing acknowledged in this run yet: op next[t] may be in flight
    // (-1 here made the check expect op 0 and fail a correct recovery).
    last[t] = static_cast<int64_t>(c->next[t]) - 1;
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(p[0]);
    setenv("FLINTKV_RDB_CRASH_CHILD", "1", 1);
    setenv("FLINTKV_RDB_CRASH_DIR", c->dir.c_str(), 1);
    setenv("FLINTKV_RDB_CRASH_MODE", c->wrapper ? "wrapper" : "plain", 1);
    setenv("FLINTKV_RDB_CRASH_SEED", std::to_string(c->seed).c_str(), 1);
    setenv("FLINTKV_RDB_CRASH_FD", std::to_string(p[1]).c_str(), 1);
    setenv("FLINTKV_RDB_CRASH_START", start.c_str(), 1);
    if (hold) setenv("FLINTKV_RDB_CRASH_HOLD", std::to_string(hold).c_str(), 1);
    setenv("FLINTKV_RDB_CRASH_CONFIG", c->config->name, 1);
    execl("/proc/self/exe", "rocksdb_crash_test", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[1]);
  FILE* in = fdopen(p[0], "r");
  char line[128];
  int got = 0, reopens = 0;
  bool ready = false, held = false, in_cycle = false;
  std::mt19937_64 rng(c->seed ^ Mix(c->acked_total));
  int extra_us = hold || at_close ? 0 : static_cast<int>(rng() % 3000);
  auto want_more = [&] {
    if (hold) return !held;
    if (at_close) return !in_cycle;
    return got < acks || reopens < min_reopens;
  };
  // One child line: R (open), c / C (a close begins / the reopen is done),
  // H (hold mode: done), or "t n" (thread t acknowledged op n).
  auto take = [&] {
    switch (line[0]) {
      case 'R':
        ready = true;
        return;
      case 'c':
        in_cycle = true;
        return;
      case 'C':
        in_cycle = false;
        reopens++;
        return;
      case 'H':
        held = true;
        return;
    }
    int t;
    unsigned long long n;
    if (std::sscanf(line, "%d %llu", &t, &n) == 2) {
      last[t] = static_cast<int64_t>(n);
      got++;
    }
  };
  while (want_more() && fgets(line, sizeof(line), in)) take();
  if (extra_us) usleep(extra_us);
  kill(pid, SIGKILL);
  // Drain what the child reported before it died (acks written before the
  // kill are acknowledged operations too).
  while (fgets(line, sizeof(line), in)) take();
  fclose(in);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(ready) << "child failed to open the DB";
  ASSERT_TRUE(!hold || held) << "child did not finish its writes";
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child exited on its own, status " << status;
  ASSERT_GE(reopens, min_reopens) << "child died before it reopened the DB";
  c->acked_total += got;
  c->reopens += reopens;
  c->kills_in_cycle += in_cycle;
}

std::string Show(const std::optional<std::string>& v) {
  if (!v) return "<absent>";
  // Values are "t:n:i" plus padding; show the padding's length only.
  std::string out;
  size_t pad = 0;
  for (char ch : *v) {
    if (ch == 'v') {
      pad++;
      continue;
    }
    if (pad) out += "<" + std::to_string(pad) + "v>";
    pad = 0;
    out += ch;
  }
  if (pad) out += "<" + std::to_string(pad) + "v>";
  return out;
}

// Recovers, checks every thread's keys, adopts the observed state.
void RecoverAndCheck(Campaign* c, const int64_t last[kThreads], int round) {
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  RecoveryReport rep;
  // The parent recovers through the same path as the child's mode.
  rocksdb::Status s =
      Open(c->dir, c->wrapper, &h, &db, &rep, kSmallWriteBuffer, *c->config);
  ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
  for (int t = 0; t < kThreads; t++) {
    // Operations next..last are acknowledged; last+1 may be in flight.
    State acked = c->state[t];
    for (int64_t n = c->next[t]; n <= last[t]; n++) {
      Apply(GenOp(c->seed, t, n), &acked);
    }
    uint64_t inflight_n = static_cast<uint64_t>(last[t] + 1);
    Op inflight = GenOp(c->seed, t, inflight_n);
    State with = acked;
    Apply(inflight, &with);
    State observed;
    bool all_old = true, all_new = true;
    for (int cf = 0; cf < kCfs; cf++) {
      for (int k = 0; k < kKeysPerThread; k++) {
        std::string key = KeyOf(t, k);
        std::string v;
        rocksdb::Status g = db->Get(rocksdb::ReadOptions(), h[cf], key, &v);
        ASSERT_TRUE(g.ok() || g.IsNotFound()) << g.ToString();
        std::optional<std::string> got;
        if (g.ok()) got = v;
        auto kk = std::make_pair(cf, key);
        std::optional<std::string> want_old, want_new;
        if (acked.count(kk)) want_old = acked[kk];
        if (with.count(kk)) want_new = with[kk];
        bool is_old = got == want_old, is_new = got == want_new;
        all_old &= is_old;
        all_new &= is_new;
        ASSERT_TRUE(is_old || is_new)
            << "round " << round << " thread " << t << " cf " << cf << " key "
            << key << ": got " << Show(got) << ", acknowledged "
            << Show(want_old) << ", with in-flight op " << inflight_n << " "
            << Show(want_new) << " (lost write or older value resurfaced)";
        if (got) observed[kk] = *got;
      }
    }
    if (c->wrapper) {
      ASSERT_TRUE(all_old || all_new)
          << "round " << round << " thread " << t << ": batch op " << inflight_n
          << " (" << inflight.size() << " keys) is torn after recovery";
    }
    c->state[t] = observed;
    c->next[t] = inflight_n + 1;  // skip the possibly half-applied op
  }
  CloseDb(db, &h);
}

void RunCampaign(bool wrapper, const Config& config = kConfigs[0],
                 int quick_kills = 25, int long_kills = 1500) {
  if (FLINTKV_TEST_TSAN) {
    GTEST_SKIP() << "librocksdb is not TSAN-instrumented";
  }
  Campaign c;
  c.dir = test::TestDir() + "/flintkv_rdb_crash." + std::to_string(getpid()) +
          "." + config.name + (wrapper ? ".w" : ".p");
  c.wrapper = wrapper;
  c.config = &config;
  // A fixed seed per row and mode (FLINTKV_SEED overrides), so a failure
  // replays with the same operations and kill targets; only where between
  // two reported acknowledgments the kill lands is left to the scheduler.
  const char* seed_env = std::getenv("FLINTKV_SEED");
  c.seed = seed_env ? std::strtoull(seed_env, nullptr, 10)
                    : Mix(std::hash<std::string>()(config.name) ^ wrapper);
  int kills = test::LongMode() ? long_kills : test::Scaled(quick_kills, 4, 3);
  std::system(("rm -rf " + c.dir).c_str());
  std::mt19937_64 rng(c.seed);
  SCOPED_TRACE("FLINTKV_SEED=" + std::to_string(c.seed));
  for (int round = 0; round < kills; round++) {
    int acks = 1 + static_cast<int>(rng() % 4000);
    // close_every: of three children, one is killed only after a completed
    // close + reopen, one at a random point, one as a close begins (the
    // kill lands in Close, OpenDB's recovery or just after: counted).
    bool cycles = config.close_every > 0;
    int min_reopens = cycles && round % 3 == 0 ? 1 : 0;
    bool at_close = cycles && round % 3 == 2;
    int64_t last[kThreads];
    ASSERT_NO_FATAL_FAILURE(RunChild(&c, acks, last, 0, min_reopens, at_close));
    ASSERT_NO_FATAL_FAILURE(RecoverAndCheck(&c, last, round));
  }
  std::printf(
      "%s %s: %d kills, %llu acknowledged operations checked, %llu close + "
      "reopen cycles, %llu kills inside one\n",
      config.name, wrapper ? "wrapper" : "plain", kills,
      static_cast<unsigned long long>(c.acked_total),
      static_cast<unsigned long long>(c.reopens),
      static_cast<unsigned long long>(c.kills_in_cycle));
  std::system(("rm -rf " + c.dir).c_str());
}

TEST(RocksdbCrashTest, WrapperKillCampaignBatchesAtomic) { RunCampaign(true); }

TEST(RocksdbCrashTest, PlainFactoryKillCampaignNoLostWrites) {
  RunCampaign(false);
}

// The configuration matrix (docs/rocksdb_config_matrix.md): every accepted
// option the matrix lists gets a kill campaign in each mode it is offered.
class ConfigCampaign
    : public ::testing::TestWithParam<std::tuple<const Config*, bool>> {};

TEST_P(ConfigCampaign, KillAndRecover) {
  const Config& c = *std::get<0>(GetParam());
  // close_every rows kill at three kinds of points (RunCampaign): 9 quick
  // kills leave 3 under ASAN, one of each kind.
  RunCampaign(std::get<1>(GetParam()), c, c.close_every > 0 ? 9 : 4, 200);
}

std::vector<std::tuple<const Config*, bool>> MatrixRows() {
  std::vector<std::tuple<const Config*, bool>> rows;
  for (const Config& c : kConfigs) {
    if (std::string(c.name) == "default") continue;  // the two tests above
    if (c.plain) rows.emplace_back(&c, false);
    if (c.wrapper) rows.emplace_back(&c, true);
  }
  return rows;
}

#ifdef FLINTKV_SOURCE_DIR
// The matrix in the docs names every campaign row this file runs.
TEST(RocksdbCrashTest, ConfigMatrixDocumented) {
  std::string doc = test::ReadFile(std::string(FLINTKV_SOURCE_DIR) +
                                   "/docs/rocksdb_config_matrix.md");
  ASSERT_FALSE(doc.empty());
  for (const Config& c : kConfigs) {
    EXPECT_NE(doc.find(std::string("`") + c.name + "`"), std::string::npos)
        << c.name << " is not in docs/rocksdb_config_matrix.md";
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(
    Matrix, ConfigCampaign, ::testing::ValuesIn(MatrixRows()),
    [](const ::testing::TestParamInfo<std::tuple<const Config*, bool>>& i) {
      return std::string(std::get<0>(i.param)->name) +
             (std::get<1>(i.param) ? "_wrapper" : "_plain");
    });

// A DB::Open with the plain factory over unrecovered memtables must fail
// (new writes would reuse their sequence numbers, P6), and recovery then
// brings the data back. The child holds all its writes unflushed when it is
// killed: a kill right after a flush would leave nothing to refuse (this
// test failed 2 of 13 runs that way).
TEST(RocksdbCrashTest, OpenOverLeftoversRefusedUntilRecovered) {
  if (FLINTKV_TEST_TSAN) GTEST_SKIP() << "librocksdb is not TSAN-instrumented";
  std::string dir =
      test::TestDir() + "/flintkv_rdb_left." + std::to_string(getpid());
  std::system(("rm -rf " + dir).c_str());
  Campaign c;
  c.dir = dir;
  c.wrapper = false;
  c.seed = 7;
  int64_t last[kThreads];
  constexpr int kOpsPerThread = 200;
  ASSERT_NO_FATAL_FAILURE(RunChild(&c, 0, last, kOpsPerThread));
  for (int t = 0; t < kThreads; t++) ASSERT_EQ(last[t], kOpsPerThread - 1);
  {
    PoolSummary ps;  // the precondition, checked rather than assumed
    ASSERT_TRUE(InspectPool(dir + "/pool", &ps).ok());
    uint64_t unflushed = 0;
    for (const ListSummary& l : ps.lists)
      unflushed += l.leftover ? l.entries : 0;
    ASSERT_GT(unflushed, 0u) << "the child's writes were flushed";
  }
  {
    MemTableOptions mo;
    mo.pool_dir = dir + "/pool";
    std::shared_ptr<rocksdb::MemTableRepFactory> f;
    ASSERT_TRUE(NewMemTableRepFactory(mo, &f).ok());
    std::vector<rocksdb::ColumnFamilyHandle*> h;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s =
        rocksdb::DB::Open(DbOptions(), dir + "/db", Cfs(f), &h, &db);
    ASSERT_FALSE(s.ok());
    // The message says exactly what to run.
    EXPECT_NE(s.ToString().find("flintkv_tool recover --db="),
              std::string::npos)
        << s.ToString();
    EXPECT_NE(s.ToString().find("--pool_dir=" + dir + "/pool"),
              std::string::npos)
        << s.ToString();
  }
  ASSERT_NO_FATAL_FAILURE(RecoverAndCheck(&c, last, 0));
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace flintkv

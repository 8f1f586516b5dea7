// The kill-and-recover campaign's building blocks (rocksdb_crash_test.cc):
// the configuration matrix rows (docs/rocksdb_config_matrix.md), the
// deterministic per-thread workload and its model, and how each row opens
// and closes the DB (plain factory or flintkv::OpenDB).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/utilities/optimistic_transaction_db.h"
#include "rocksdb/utilities/stackable_db.h"
#include "rocksdb/utilities/transaction_db.h"
#include "tests/rocksdb_scenario.h"
#include "tests/test_util.h"

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
  ro.pool_dir = dir + "/pool";
  ro.pool_size = 256ull << 20;
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
  bool existed = access((ro.pool_dir + "/flintkv.pool").c_str(), F_OK) == 0;
  if (existed) {
    rocksdb::Status s = BeginRecovery(dir + "/db", ro);
    if (!s.ok()) return s;
  }
  MemTableOptions mo;
  mo.pool_dir = ro.pool_dir;
  mo.pool_size = ro.pool_size;
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
  if (!s.ok() && existed) EndRecovery(ro.pool_dir);
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
}  // namespace flintkv

// The "flintkv" MemTableRepFactory: options, pool opening, registration.
#include "memtable/rocksdb/flintkv_factory.h"

#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "flintkv/rocksdb_memtable.h"
#include "memtable/rocksdb/flintkv_rep.h"
#include "memtable/rocksdb/option_checks.h"
#include "memtable/rocksdb/pool_session.h"
#include "memtable/rocksdb/space_wait.h"
#include "rocksdb/comparator.h"
#include "rocksdb/convenience.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"
#include "rocksdb/utilities/object_registry.h"
#include "rocksdb/utilities/options_type.h"
#include "rocksdb_common/memtable_meta.h"
#include "rocksdb_common/status_convert.h"

namespace flintkv {
namespace rocks {
namespace {

using rocksdb::OptionType;
using rocksdb::OptionTypeFlags;
using rocksdb::OptionTypeInfo;
using rocksdb::OptionVerificationType;

// Function-local statics: a factory made during static initialization (a
// test's re-executed child, another library's initializer) must not
// register a map that is not constructed yet (it would serialize nothing).
const std::unordered_map<std::string, OptionTypeInfo>& OptionsTypeInfo() {
  static const auto* m = new std::unordered_map<std::string, OptionTypeInfo>{
      {"pool_dir",
       {offsetof(MemTableOptions, pool_dir), OptionType::kString,
        OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
      {"pool_size",
       {offsetof(MemTableOptions, pool_size), OptionType::kUInt64T,
        OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
      {"chunk_size",
       {offsetof(MemTableOptions, chunk_size), OptionType::kUInt64T,
        OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
      {"latency_model",
       {offsetof(MemTableOptions, latency_model), OptionType::kString,
        OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
      {"wal_logged",
       {offsetof(MemTableOptions, wal_logged), OptionType::kBoolean,
        OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
  };
  return *m;
}

// One pool per DB. RocksDB validates every column family's options of a
// DB::Open on the opening thread, one after another with the same
// DBOptions, before it creates any memtable; the pool_dirs seen in that
// run must be one: a DB whose families sit on two pools is refused at Open
// (recovery reads one pool per DB, and a pool's lists would be claimed
// by the other's DB as "another database's"). A run ends at the thread's
// next memtable, at another DBOptions object, or when this factory refuses
// the open (two pools included). (A DB::Open that fails otherwise before
// its first memtable leaves its run open: a retry on the same thread, with
// the same DBOptions object and another pool_dir, is refused too; RocksDB
// 7.8 validates a copy of each family's options, so no address tells a
// retry from the next family. CreateColumnFamily is not checked: no call
// tells its DB.)
struct OpenScan {
  const void* db = nullptr;
  std::string pool_dir, pool_real;
};
thread_local OpenScan open_scan;

std::string RealDir(const std::string& dir) {
  char buf[PATH_MAX];
  return ::realpath(dir.c_str(), buf) ? std::string(buf) : dir;
}

rocksdb::Status CheckOnePool(const rocksdb::DBOptions& db,
                             const std::string& pool_dir) {
  OpenScan& s = open_scan;
  if (s.db != &db) s = OpenScan{&db, "", ""};
  const std::string real = RealDir(pool_dir);
  if (s.pool_dir.empty()) {
    s.pool_dir = pool_dir;
    s.pool_real = real;
    return rocksdb::Status::OK();
  }
  if (real == s.pool_real) return rocksdb::Status::OK();
  return rocksdb::Status::InvalidArgument(
      "flintkv: the column families of this DB::Open name two pools, "
      "pool_dir=" +
      s.pool_dir + " and pool_dir=" + pool_dir +
      " (memtable_factory): a DB keeps all its column families in one pool "
      "(recovery replays one pool into one DB). Give every column family "
      "the same memtable factory, or factories with the same pool_dir");
}

// The DB life the factory's memtables belong to (pool_session.h, S3),
// written to the DB's OPTIONS file with the factory's options so that
// recovery can tell which lists are this DB's. Set by FlintKV, not by
// users; never compared (each open has its own).
struct LifeOptions {
  uint64_t incarnation = 0;
  uint64_t family = 0;
  // Creation time (micros) of the newest list the family's recoveries
  // replayed into the DB (pool_session.h S8): carried with the DB's
  // copies, unlike the record file beside it.
  uint64_t recovered_upto = 0;
};
const std::unordered_map<std::string, OptionTypeInfo>& LifeTypeInfo() {
  static const auto* m = new std::unordered_map<std::string, OptionTypeInfo>{
      {"incarnation",
       {offsetof(LifeOptions, incarnation), OptionType::kUInt64T,
        OptionVerificationType::kNormal, OptionTypeFlags::kCompareNever}},
      {"family",
       {offsetof(LifeOptions, family), OptionType::kUInt64T,
        OptionVerificationType::kNormal, OptionTypeFlags::kCompareNever}},
      {"recovered_upto",
       {offsetof(LifeOptions, recovered_upto), OptionType::kUInt64T,
        OptionVerificationType::kNormal, OptionTypeFlags::kCompareNever}},
  };
  return *m;
}

class FlintKVFactory : public rocksdb::MemTableRepFactory {
 public:
  explicit FlintKVFactory(const MemTableOptions& o = MemTableOptions())
      : options_(o) {
    RegisterOptions("FlintKVOptions", &options_, &OptionsTypeInfo());
    RegisterOptions("FlintKVLife", &life_, &LifeTypeInfo());
  }
  static const char* kClassName() { return "FlintKVFactory"; }
  static const char* kNickName() { return "flintkv"; }
  const char* Name() const override { return kClassName(); }
  const char* NickName() const override { return kNickName(); }

  // Runs after the options string is applied: checks the values and opens
  // the pool, so that a bad or busy pool fails option parsing (stock tools
  // report it) and not a memtable creation, which has no error channel.
  // Not when the caller asked for no preparation: RocksDB 7.8 prepares the
  // factory an OPTIONS file names even while a tool merely reads the file
  // (LoadOptionsFromFile), passing invoke_prepare_options = false, and a
  // moved or restored DB's file names a stale pool_dir that must be neither
  // opened nor created. DB::Open then opens it (ValidateOptions).
  // An OPTIONS file may also name the factory without a pool_dir (written
  // by a host that made it before its options were registered); DB::Open
  // refuses that unless the loader puts its own factory in.
  rocksdb::Status PrepareOptions(const rocksdb::ConfigOptions& co) override {
    rocksdb::Status s = CheckValues(/*need_pool_dir=*/false);
    // An existing pool is opened (and so checked) now; a new one is created
    // only at DB::Open (ValidateOptions). When an options string fails,
    // RocksDB resets the object to its defaults and prepares that
    // (Configurable::ConfigureOptions), with pool_dir still set: creating
    // here made a default-size (4 GiB) pool for a refused options string.
    if (s.ok() && co.invoke_prepare_options && !options_.pool_dir.empty()) {
      s = PoolSession::PoolExists(options_.pool_dir)
              ? Open()
              : ToRocks(PoolSession::PreparePoolDir(options_.pool_dir));
    }
    if (!s.ok()) return s;
    return rocksdb::MemTableRepFactory::PrepareOptions(co);
  }

  rocksdb::Status ValidateOptions(
      const rocksdb::DBOptions& db,
      const rocksdb::ColumnFamilyOptions& cf) const override {
    rocksdb::Status s = CheckOnePool(db, options_.pool_dir);
    if (s.ok()) s = ValidateForOpen(db, cf);
    // This open fails: a retry on this thread starts a new run.
    if (!s.ok()) open_scan = OpenScan{};
    return s;
  }

  rocksdb::Status ValidateForOpen(
      const rocksdb::DBOptions& db,
      const rocksdb::ColumnFamilyOptions& cf) const {
    if (!IsOpen() && !options_.pool_dir.empty() &&
        !PoolSession::PoolExists(options_.pool_dir)) {
      // Options refused for the pool this open would create leave no pool
      // (it would fix the size, and a retry with a larger pool_size would
      // then be ignored).
      NewPool np{PoolSession::PoolPath(options_.pool_dir), options_.pool_size,
                 options_.chunk_size};
      OptionContext pre;
      pre.new_pool = &np;
      pre.wal_logged = options_.wal_logged;
      rocksdb::Status ps = CheckOptions(db, cf, pre);
      if (!ps.ok()) return ps;
    }
    rocksdb::Status os = Open();
    if (!os.ok()) return os;
    OptionContext ctx;
    ctx.pool = pool_.get();
    ctx.recovers_at_open = pool_->ClaimedFor(OpenKind::kRecoverEveryOpen);
    ctx.replay_only = pool_->ClaimedFor(OpenKind::kReplayAndClose);
    ctx.wal_logged = options_.wal_logged;
    rocksdb::Status us = CheckOptions(db, cf, ctx);
    if (!us.ok()) return us;
    // S1, S2; starts the DB's life on the pool.
    OpenWal wal;
    wal.wal_dir = db.wal_dir;
    wal.filtered = db.wal_filter != nullptr;
    wal.best_efforts = db.best_efforts_recovery;
    us = ToRocks(
        pool_->BeginOpen(this, options_.wal_logged, cf.write_buffer_size, wal));
    if (!us.ok()) return us;
    return rocksdb::MemTableRepFactory::ValidateOptions(db, cf);
  }

  rocksdb::MemTableRep* CreateMemTableRep(
      const rocksdb::MemTableRep::KeyComparator& cmp,
      rocksdb::Allocator* allocator, const rocksdb::SliceTransform* st,
      rocksdb::Logger* logger) override {
    return CreateMemTableRep(cmp, allocator, st, logger, 0);
  }

  rocksdb::MemTableRep* CreateMemTableRep(
      const rocksdb::MemTableRep::KeyComparator& cmp,
      rocksdb::Allocator* allocator, const rocksdb::SliceTransform*,
      rocksdb::Logger* logger, uint32_t column_family_id) override {
    // DB::Open validates the factory first (which opens the pool), so only
    // a caller that skips that fails here; there is no error channel left.
    rocksdb::Status os = Open();
    if (!os.ok()) {
      if (logger) {
        rocksdb::Log(rocksdb::InfoLogLevel::FATAL_LEVEL, logger,
                     "flintkv: fatal: %s", os.ToString().c_str());
        logger->Flush();
      }
      // Also on stderr, the one exception: the process is about to abort,
      // and its reason must be visible somewhere even when the LOG file is
      // not (no Logger, or one nobody reads before restarting it).
      std::fprintf(stderr, "flintkv: fatal: %s\n", os.ToString().c_str());
      std::abort();
    }
    if (logger) {
      for (const std::string& n : pool_->NoticesFor(logger)) {
        rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, logger, "%s",
                     n.c_str());
      }
    }
    open_scan = OpenScan{};  // this thread's validation run is over
    MemtableMeta meta = pool_->NewListMeta(column_family_id, logger);
    if (meta.incarnation != kUnownedIncarnation) {
      // Serialized into the OPTIONS file RocksDB writes once the open's
      // memtables exist (SerializeOptions reads it under the same lock).
      std::lock_guard<std::mutex> g(open_mu_);
      life_.incarnation = meta.incarnation;
      life_.family = meta.family;
    }
    pmem::ListRoot* root = nullptr;
    auto create = [&] {
      return pool_->pool()->CreateList(pmem::kListMemtable, &root, &meta,
                                       sizeof(meta));
    };
    WaitForPoolSpace(pool_.get(), logger, create(), create,
                     [] { return WaitsForFlushes("new memtable"); });
    return new FlintRep(cmp, allocator, pool_, root, logger);
  }

  bool IsInsertConcurrentlySupported() const override { return true; }

 protected:
  // RocksDB writes the OPTIONS file (and so serializes this factory) as the
  // last step of a successful DB::Open, after WAL replay: the open's life
  // is then open for writes (pool_session.h, S4).
  std::string SerializeOptions(const rocksdb::ConfigOptions& co,
                               const std::string& prefix) const override {
    std::lock_guard<std::mutex> g(open_mu_);
    if (pool_) life_.recovered_upto = pool_->RecoveredUpto(life_.incarnation);
    std::string out = rocksdb::MemTableRepFactory::SerializeOptions(co, prefix);
    if (pool_) pool_->OnOptionsPersisted(life_.incarnation);
    return out;
  }

 public:
  bool CanHandleDuplicatedKey() const override { return true; }

  void OnRangeTombstonesFlushed(uint64_t seq) const {
    std::lock_guard<std::mutex> g(open_mu_);
    if (pool_ && life_.incarnation != 0) {
      pool_->OnListFlushed(life_.incarnation, seq);
    }
  }

  rocksdb::Status CheckValues(bool need_pool_dir = true) const {
    if (need_pool_dir && options_.pool_dir.empty()) {
      return rocksdb::Status::InvalidArgument(
          "flintkv: pool_dir is required, e.g. "
          "--memtablerep=\"id=flintkv;pool_dir=/dev/shm/db1\"");
    }
    if (options_.latency_model != "optane" && options_.latency_model != "off") {
      return rocksdb::Status::InvalidArgument(
          "flintkv: latency_model must be 'off' or 'optane', not '" +
          options_.latency_model + "'");
    }
    if (options_.pool_size < PMEMOBJ_MIN_POOL) {  // checked before any pool
      return rocksdb::Status::InvalidArgument(
          "flintkv: pool_size must be at least 8M (libpmemobj's smallest "
          "pool), not " +
          std::to_string(options_.pool_size));
    }
    if (options_.chunk_size < (64 << 10) || options_.chunk_size > (64 << 20)) {
      return rocksdb::Status::InvalidArgument(
          "flintkv: chunk_size must be between 64K and 64M");
    }
    return rocksdb::Status::OK();
  }

  bool IsOpen() const {
    std::lock_guard<std::mutex> g(open_mu_);
    return pool_ != nullptr;
  }

  // Opens (or creates) the pool once; later calls return the first result.
  rocksdb::Status Open() const {
    std::lock_guard<std::mutex> g(open_mu_);
    if (pool_) return rocksdb::Status::OK();
    rocksdb::Status s = CheckValues();
    if (!s.ok()) return s;
    if (options_.latency_model == "optane") {
      pmem::SetLatencyModel(LatencyModel::Optane());
    }
    return ToRocks(PoolSession::Open(options_.pool_dir, options_.pool_size,
                                     options_.chunk_size, &pool_));
  }

 private:
  MemTableOptions options_;
  mutable LifeOptions life_;  // SerializeOptions writes recovered_upto
  mutable std::mutex open_mu_;
  mutable std::shared_ptr<PoolSession> pool_;  // set once by Open()
};

}  // namespace

void OnRangeTombstonesFlushed(const rocksdb::MemTableRepFactory& factory,
                              uint64_t seq) {
  const auto* f = factory.CheckedCast<FlintKVFactory>();
  if (f) f->OnRangeTombstonesFlushed(seq);
}

}  // namespace rocks

rocksdb::Status NewMemTableRepFactory(
    const MemTableOptions& options,
    std::shared_ptr<rocksdb::MemTableRepFactory>* factory) {
  auto f = std::make_shared<rocks::FlintKVFactory>(options);
  rocksdb::Status s = f->Open();
  if (s.ok()) *factory = f;
  return s;
}

int RegisterFlintKV(rocksdb::ObjectLibrary& library, const std::string&) {
  library.AddFactory<rocksdb::MemTableRepFactory>(
      // An optional-suffix pattern: a bare name without separators asserts
      // in RocksDB's (assert-enabled) ObjectLibrary.
      rocksdb::ObjectLibrary::PatternEntry(rocks::FlintKVFactory::kNickName())
          .AnotherName(rocks::FlintKVFactory::kClassName()),
      [](const std::string&, std::unique_ptr<rocksdb::MemTableRepFactory>* g,
         std::string*) {
        g->reset(new rocks::FlintKVFactory());
        return g->get();
      });
  return 1;
}

#ifndef FLINTKV_NO_STATIC_REGISTRAR
namespace {
// Loading the shared library (LD_PRELOAD, dlopen) registers the factory.
// In-tree plugin builds (memtable/rocksdb/plugin/) define
// FLINTKV_NO_STATIC_REGISTRAR and are registered via flintkv_register.
const int kRegistered = RegisterFlintKV(*rocksdb::ObjectLibrary::Default(), "");
}  // namespace
#endif

}  // namespace flintkv

// RocksDB's plugin build (ROCKSDB_PLUGINS) calls this by name; exported
// from libflintkv_rocksdb.so for a host that looks the registrar up.
extern "C" FLINTKV_EXPORT int flintkv_register(rocksdb::ObjectLibrary& library,
                                               const std::string& arg) {
  return flintkv::RegisterFlintKV(library, arg);
}

// The "flintkv" MemTableRepFactory: options, pool opening, registration.
#include <chrono>
#include <cstdio>
#include <thread>

#include "flintkv/rocksdb_memtable.h"
#include "memtable/rocksdb/flintkv_rep.h"
#include "memtable/rocksdb/memtable_meta.h"
#include "memtable/rocksdb/pool_handle.h"
#include "memtable/rocksdb/status_convert.h"
#include "rocksdb/comparator.h"
#include "rocksdb/convenience.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"
#include "rocksdb/utilities/object_registry.h"
#include "rocksdb/utilities/options_type.h"

namespace flintkv {
namespace rocks {
namespace {

using rocksdb::OptionType;
using rocksdb::OptionTypeFlags;
using rocksdb::OptionTypeInfo;
using rocksdb::OptionVerificationType;

std::unordered_map<std::string, OptionTypeInfo> kOptionsTypeInfo = {
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
};

uint64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class FlintKVFactory : public rocksdb::MemTableRepFactory {
 public:
  explicit FlintKVFactory(const MemTableOptions& o = MemTableOptions())
      : options_(o) {
    RegisterOptions("FlintKVOptions", &options_, &kOptionsTypeInfo);
  }
  static const char* kClassName() { return "FlintKVFactory"; }
  static const char* kNickName() { return "flintkv"; }
  const char* Name() const override { return kClassName(); }
  const char* NickName() const override { return kNickName(); }

  // Runs after the options string is applied: checks values and opens the
  // pool, so a bad pool fails option parsing / DB::Open, not a later write.
  rocksdb::Status PrepareOptions(const rocksdb::ConfigOptions& co) override {
    // An OPTIONS file records this factory by name only, so a tool loading
    // one (flintkv_tool recover, LoadLatestOptions) gets it without a
    // pool_dir; DB::Open still refuses it (ValidateOptions) unless the
    // loader puts its own factory in.
    if (!options_.pool_dir.empty()) {
      rocksdb::Status s = Open();
      if (!s.ok()) return s;
    }
    return rocksdb::MemTableRepFactory::PrepareOptions(co);
  }

  rocksdb::Status ValidateOptions(
      const rocksdb::DBOptions& db,
      const rocksdb::ColumnFamilyOptions& cf) const override {
    if (!pool_) {
      return rocksdb::Status::InvalidArgument(
          options_.pool_dir.empty()
              ? "flintkv: pool_dir is required, e.g. "
                "--memtablerep=\"id=flintkv;pool_dir=/dev/shm/db1\""
              : "flintkv: factory has no pool (PrepareOptions failed or not "
                "run)");
    }
    if (pool_->leftover_state.load() == PoolHandle::kPending) {
      return rocksdb::Status::InvalidArgument(
          "flintkv: pool " + pool_->pool()->path() + " holds " +
          std::to_string(pool_->leftover_lists().size()) +
          " unflushed memtable(s) of a crashed run; recover them first: "
          "flintkv_tool recover --db=<this DB's path> --pool_dir=" +
          options_.pool_dir +
          " (or open the DB with flintkv::OpenDB, which recovers by "
          "itself)");
    }
    rocksdb::Status us = RejectUnsupported(db, cf);
    if (!us.ok()) return us;
    uint64_t need = cf.write_buffer_size *
                    (static_cast<uint64_t>(cf.max_write_buffer_number) + 1);
    pmem::Pool* pool = pool_->pool();
    if (pool->size() < need + pool->reserve_bytes()) {
      return rocksdb::Status::InvalidArgument(
          "flintkv: pool " + pool->path() + " (" +
          std::to_string(pool->size() >> 20) + " MiB) is too small for " +
          std::to_string(cf.max_write_buffer_number) +
          " memtables of write_buffer_size " +
          std::to_string(cf.write_buffer_size >> 20) +
          " MiB; raise pool_size (of a new pool) or lower write_buffer_size");
    }
    uint64_t prev = pool_->write_buffer_size_hint.load();
    while (cf.write_buffer_size > prev &&
           !pool_->write_buffer_size_hint.compare_exchange_weak(
               prev, cf.write_buffer_size)) {
    }
    return rocksdb::MemTableRepFactory::ValidateOptions(db, cf);
  }

  // RocksDB options under which an acknowledged write would not be durable
  // in the pool, or recovery could not bring it back exactly. Each is
  // refused at DB::Open with a message naming the option
  // (docs/rocksdb_config_matrix.md).
  rocksdb::Status RejectUnsupported(
      const rocksdb::DBOptions& db,
      const rocksdb::ColumnFamilyOptions& cf) const {
    auto refuse = [](const std::string& option, const std::string& why) {
      return rocksdb::Status::NotSupported("flintkv: option " + option +
                                           " is not supported: " + why);
    };
    if (cf.inplace_update_support || cf.inplace_callback) {
      return refuse(cf.inplace_update_support ? "inplace_update_support"
                                              : "inplace_callback",
                    "RocksDB would rewrite value bytes inside a persistent "
                    "memtable node with no flush or fence (a crash can tear "
                    "the value); leave it off");
    }
    if (db.unordered_write) {
      return refuse("unordered_write",
                    "RocksDB then publishes a sequence number before its "
                    "memtable insert is durable, so a reader could return a "
                    "write that a crash takes away");
    }
    if (cf.experimental_mempurge_threshold > 0) {
      return refuse("experimental_mempurge_threshold",
                    "MemPurge retires memtables without writing them to SST "
                    "files and copies entries outside the recovery protocol; "
                    "set it to 0");
    }
    if (db.avoid_flush_during_shutdown && !pool_->wrapper_owned.load()) {
      return refuse("avoid_flush_during_shutdown",
                    "Close would leave memtables unflushed, and with the "
                    "plain factory every later DB::Open would then need "
                    "`flintkv_tool recover` first; use flintkv::OpenDB "
                    "(it recovers on open) or leave it false");
    }
    if (cf.comparator && cf.comparator->timestamp_size() > 0) {
      return refuse("comparator with user-defined timestamps (" +
                        std::string(cf.comparator->Name()) + ")",
                    "entries with timestamps are not recovered");
    }
    return rocksdb::Status::OK();
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
    if (!pool_) {
      // DB::Open validates the factory first, so only a caller that skips
      // PrepareOptions gets here; there is no error channel left.
      rocksdb::Status s = Open();
      if (!s.ok()) {
        std::fprintf(stderr, "flintkv: fatal: %s\n", s.ToString().c_str());
        std::abort();
      }
    }
    MemtableMeta meta{};
    meta.magic = kMemtableMetaMagic;
    meta.column_family_id = column_family_id;
    meta.created_micros = NowMicros();
    pmem::ListRoot* root = nullptr;
    Status s;
    for (int attempt = 0;; attempt++) {
      s = pool_->pool()->CreateList(pmem::kListMemtable, &root, &meta,
                                    sizeof(meta));
      if (s.ok()) break;
      // Full pool: flushes of older memtables free space; wait for them.
      if (attempt % 10000 == 0) {
        std::fprintf(stderr, "flintkv: %s; waiting for flushes\n",
                     s.ToString().c_str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return new FlintRep(cmp, allocator, pool_, root, logger);
  }

  bool IsInsertConcurrentlySupported() const override { return true; }
  bool CanHandleDuplicatedKey() const override { return true; }

  rocksdb::Status Open() {
    if (pool_) return rocksdb::Status::OK();
    if (options_.pool_dir.empty()) {
      return rocksdb::Status::InvalidArgument(
          "flintkv: pool_dir is required, e.g. "
          "--memtablerep=\"id=flintkv;pool_dir=/dev/shm/db1\"");
    }
    if (options_.latency_model == "optane") {
      pmem::SetLatencyModel(LatencyModel::Optane());
    } else if (options_.latency_model != "off") {
      return rocksdb::Status::InvalidArgument(
          "flintkv: latency_model must be 'off' or 'optane', not '" +
          options_.latency_model + "'");
    }
    if (options_.chunk_size < (64 << 10) || options_.chunk_size > (64 << 20)) {
      return rocksdb::Status::InvalidArgument(
          "flintkv: chunk_size must be between 64K and 64M");
    }
    return ToRocks(PoolHandle::Get(options_.pool_dir, options_.pool_size,
                                   options_.chunk_size, &pool_));
  }

 private:
  MemTableOptions options_;
  std::shared_ptr<PoolHandle> pool_;
};

}  // namespace
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

// RocksDB's plugin build (ROCKSDB_PLUGINS) calls this by name.
extern "C" int flintkv_register(rocksdb::ObjectLibrary& library,
                                const std::string& arg) {
  return flintkv::RegisterFlintKV(library, arg);
}

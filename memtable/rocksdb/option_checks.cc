#include "memtable/rocksdb/option_checks.h"

#include <string>

#include "rocksdb/comparator.h"
#include "rocksdb/version.h"

namespace flintkv {
namespace rocks {
namespace {

std::string Mib(uint64_t bytes) {
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
}

rocksdb::Status Refuse(const std::string& option, const std::string& why) {
  return rocksdb::Status::NotSupported("flintkv: option " + option +
                                       " is not supported: " + why);
}

}  // namespace

rocksdb::Status CheckOptions(const rocksdb::DBOptions& db,
                             const rocksdb::ColumnFamilyOptions& cf,
                             const OptionContext& ctx) {
  if (cf.inplace_update_support || cf.inplace_callback) {
    return Refuse(cf.inplace_update_support ? "inplace_update_support"
                                            : "inplace_callback",
                  "RocksDB would rewrite value bytes inside a persistent "
                  "memtable node with no flush or fence (a crash can tear "
                  "the value); leave it off");
  }
  if (db.unordered_write) {
    return Refuse("unordered_write",
                  "RocksDB then publishes a sequence number before its "
                  "memtable insert is durable, so a reader could return a "
                  "write that a crash takes away");
  }
  if (cf.experimental_mempurge_threshold > 0) {
    return Refuse("experimental_mempurge_threshold",
                  "MemPurge retires memtables without writing them to SST "
                  "files and copies entries outside the recovery protocol; "
                  "set it to 0");
  }
#if ROCKSDB_MAJOR >= 9
  if (!db.write_identity_file) {
    return Refuse("write_identity_file=false",
                  "RocksDB then deletes the DB's IDENTITY file, and recovery "
                  "binds the pool's memtables to the DB by that identity (a "
                  "DB without one is refused as unknown); leave it true");
  }
#endif
  if (cf.comparator && cf.comparator->timestamp_size() > 0) {
    return Refuse("comparator with user-defined timestamps (" +
                      std::string(cf.comparator->Name()) + ")",
                  "entries with timestamps are not recovered");
  }
  if (db.avoid_flush_during_shutdown && !ctx.recovers_at_open &&
      !ctx.wal_logged) {
    return Refuse("avoid_flush_during_shutdown",
                  "Close would leave memtables unflushed, and with the "
                  "plain factory every later DB::Open would then need "
                  "`flintkv_tool recover` first; use flintkv::OpenDB (it "
                  "recovers on open), leave it false, or declare every "
                  "write WAL-logged (wal_logged=true)");
  }
  if (ctx.replay_only) return rocksdb::Status::OK();
  std::string path;
  uint64_t size, chunk_size;
  SpaceRule rule;
  if (ctx.pool) {
    const pmem::Pool* pool = ctx.pool->pool();
    path = pool->path();
    size = pool->size();
    chunk_size = pool->chunk_size();
    rule = ctx.pool->space();
  } else if (ctx.new_pool) {
    path = ctx.new_pool->path;
    size = ctx.new_pool->size;
    chunk_size = ctx.new_pool->chunk_size;
    rule = SpaceRule::For(size, chunk_size);
  } else {
    return rocksdb::Status::OK();
  }
  uint64_t need = SpaceRule::MemtableBytes(
      cf.write_buffer_size, cf.max_write_buffer_number, chunk_size);
  if (size < rule.MinPoolSize(need)) {
    return rocksdb::Status::InvalidArgument(
        "flintkv: pool " + path + " (" + Mib(size) +
        ") is too small: " + std::to_string(cf.max_write_buffer_number) +
        " memtables of write_buffer_size " + Mib(cf.write_buffer_size) +
        " plus the one being filled take " + Mib(need) + " in " +
        Mib(chunk_size) + " chunks, and " + Mib(rule.pressure_free) +
        " must stay free (a reserve of " + Mib(rule.reserve) +
        " for writes in flight, the rest so that memtables ask for flushes "
        "in time); a pool of at least " +
        Mib(rule.MinPoolSize(need)) +
        " is needed: raise pool_size (of a new pool), or lower "
        "write_buffer_size or max_write_buffer_number");
  }
  return rocksdb::Status::OK();
}

}  // namespace rocks
}  // namespace flintkv

// flintkv::OpenDB: a RocksDB database on the flintkv memtable factory that
// recovers its pool's leftovers at every open and keeps every WriteBatch
// crash-atomic.
//
//   flintkv::RecoveryOptions ro;  // flintkv/recovery.h
//   ro.memtable.pool_dir = "/mnt/pmem0/db1";
//   rocksdb::DB* db;
//   rocksdb::Status s = flintkv::OpenDB(options, "/data/db1", cfs, &handles,
//                                       &db, ro);
//
// Guarantees beyond the plain factory's (flintkv/recovery.h,
// docs/rocksdb_recovery.md): Write returns only after a persisted watermark
// covers its sequence numbers, and recovery replays only entries at or
// below the watermark, so every WriteBatch is all-or-nothing.
// Thread safety: the DB returned is as thread-safe as RocksDB's.
#pragma once

#include <string>
#include <vector>

#include "flintkv/export.h"
#include "flintkv/recovery.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/status.h"

namespace flintkv {

// Opens the DB with the flintkv factory on options.memtable for every column
// family (overriding memtable_factory; memtable.wal_logged does not apply:
// the wrapper's writes are logged in the pool), creating the pool for a new
// DB, recovers leftovers (RecoverInto), and returns a wrapper whose writes
// are crash-atomic per WriteBatch (a persisted watermark of published
// sequence numbers). DeleteRange is durable (it runs alone and is flushed
// before it returns); PutEntity and Merge are supported. Refuses what
// docs/rocksdb_config_matrix.md lists as refused for OpenDB
// (unordered_write, two_write_queues, ...), also when set later with
// SetOptions/SetDBOptions or on a column family created later, and
// ClipColumnFamily and user-defined timestamps. A write larger than the
// pool's reserve runs alone, and is refused (InvalidArgument, nothing
// written) if the pool has no room for it even with every memtable flushed
// (the wrapper flushes first when that makes room). Every write to this DB
// must go through the wrapper.
FLINTKV_EXPORT rocksdb::Status OpenDB(
    const rocksdb::DBOptions& db_options, const std::string& name,
    const std::vector<rocksdb::ColumnFamilyDescriptor>& cfs,
    std::vector<rocksdb::ColumnFamilyHandle*>* handles, rocksdb::DB** db,
    const RecoveryOptions& options, RecoveryReport* report = nullptr);

}  // namespace flintkv

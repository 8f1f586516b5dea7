// The rules that refuse a recovery before anything is replayed, each
// leaving the pool unchanged and naming the override that replays anyway
// (docs/rocksdb_recovery.md, "Operations"). The DB is opened; the rules
// run before Triage marks anything in the pool.
// Thread safety: none needed; recovery owns the DB and the pool.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "flintkv/recovery.h"
#include "pmem/layout.h"
#include "pmem/pool.h"
#include "rocksdb/db.h"
#include "rocksdb/status.h"

namespace flintkv {
namespace recovery {

// The DB's WAL held a DeleteRange and the pool holds WAL-less writes.
// memtable_entries: RocksDB's WAL replay left entries in the memtables
// (they are flushed first).
rocksdb::Status RefuseWalRangeDeletes(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    bool memtable_entries, const RecoveryOptions& o);

// The DB is older than the lists (S3, S7).
rocksdb::Status RefuseOlderDb(
    rocksdb::DB* db, const std::vector<pmem::ListRoot*>& lists,
    const std::map<uint32_t, rocksdb::ColumnFamilyHandle*>& cf_by_id,
    const RecoveryOptions& o);

// The lists are in the DB already, and its record file is gone (S8).
rocksdb::Status RefuseRecoveredAlready(
    const pmem::Pool* pool, const std::vector<pmem::ListRoot*>& lists,
    uint64_t recovered_upto, const std::set<std::string>& done,
    const RecoveryOptions& o);

}  // namespace recovery
}  // namespace flintkv

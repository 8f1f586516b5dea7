// The RocksDB options a FlintKV memtable cannot honour, and the pool space
// the memtables need: checked at DB::Open (the factory's ValidateOptions)
// and, by flintkv::OpenDB's wrapper, at SetOptions/SetDBOptions (RocksDB
// does not ask the factory then). docs/rocksdb_config_matrix.md lists them.
// Thread safety: stateless.
#pragma once

#include "memtable/rocksdb/pool_session.h"
#include "rocksdb/options.h"
#include "rocksdb/status.h"

namespace flintkv {
namespace rocks {

struct OptionContext {
  const PoolSession* pool = nullptr;
  bool wrapper = false;     // the DB is flintkv::OpenDB's
  bool wal_logged = false;  // MemTableOptions::wal_logged
};

// NotSupported naming the option under which an acknowledged write would
// not be durable in the pool or could not be recovered exactly;
// InvalidArgument with the numbers if the pool is too small (SpaceRule).
rocksdb::Status CheckOptions(const rocksdb::DBOptions& db,
                             const rocksdb::ColumnFamilyOptions& cf,
                             const OptionContext& ctx);

}  // namespace rocks
}  // namespace flintkv

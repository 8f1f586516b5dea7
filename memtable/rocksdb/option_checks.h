// The RocksDB options a FlintKV memtable cannot honour, and the pool space
// the memtables need: checked at DB::Open (the factory's ValidateOptions)
// and, through RecoveryPort::CheckOptions, for options set after the open
// (RocksDB does not ask the factory then). docs/rocksdb_config_matrix.md
// lists them.
// Thread safety: stateless.
#pragma once

#include <cstdint>
#include <string>

#include "memtable/rocksdb/pool_session.h"
#include "rocksdb/options.h"
#include "rocksdb/status.h"

namespace flintkv {
namespace rocks {

// A pool DB::Open would create (none exists yet): checked before it is
// created, so that a refused open leaves no pool behind.
struct NewPool {
  std::string path;
  uint64_t size = 0;
  uint64_t chunk_size = 0;
};

struct OptionContext {
  const PoolSession* pool = nullptr;
  const NewPool* new_pool = nullptr;  // when pool is null
  // Every open of the DB recovers what the pool holds, so a Close may
  // leave memtables unflushed (OpenKind::kRecoverEveryOpen).
  bool recovers_at_open = false;
  bool wal_logged = false;  // MemTableOptions::wal_logged
  // The open replays the leftovers and closes, taking no other write
  // (OpenKind::kReplayAndClose): the space rule is not applied (below).
  bool replay_only = false;
};

// NotSupported naming the option under which an acknowledged write would
// not be durable in the pool or could not be recovered exactly;
// InvalidArgument with the numbers if the pool is too small (SpaceRule),
// except for a replay-only open: the options are the crashed life's
// (its OPTIONS file; SetOptions may have raised write_buffer_size since the
// Open that passed the rule), the pool is the one that holds the data, and
// neither can be changed before the data is out, so refusing there would
// strand acknowledged writes.
rocksdb::Status CheckOptions(const rocksdb::DBOptions& db,
                             const rocksdb::ColumnFamilyOptions& cf,
                             const OptionContext& ctx);

}  // namespace rocks
}  // namespace flintkv

// What a RocksDB database's own files say about the FlintKV lives that
// wrote it (pool_session.h, S3): the incarnation its latest OPTIONS file
// records and a hash of its IDENTITY. Recovery claims a pool's leftovers
// with this, so that lists are replayed only into the DB that wrote them.
// Thread safety: stateless.
#pragma once

#include <string>

#include "flintkv/recovery.h"
#include "memtable/rocksdb/pool_session.h"
#include "rocksdb/status.h"

namespace flintkv {

// Never fails for a missing or unreadable OPTIONS file: that leaves
// options_flintkv false (the claim then refuses leftovers unless
// options.allow_foreign_open). Loads no factory's options for real: a
// moved DB's OPTIONS file may name a pool_dir that is stale or gone.
rocks::DbBinding ReadDbBinding(const std::string& db_path,
                               const RecoveryOptions& options);

}  // namespace flintkv

// What a RocksDB database's own files say about the FlintKV lives that
// wrote it (pool_session.h, S3): the incarnation its latest OPTIONS file
// records, the WAL directory it names and a hash of its IDENTITY. Recovery
// claims a pool's leftovers with this, so that lists are replayed only into
// the DB that wrote them; a plain DB::Open checks with it that a recorded DB
// location (db_location.h) is the DB whose WAL may hold the leftovers (S5).
// Thread safety: stateless.
#pragma once

#include <string>

#include "memtable/rocksdb/pool_session.h"

namespace flintkv {
namespace rocks {

// Never fails for a missing or unreadable OPTIONS file: that leaves
// options_flintkv false (a claim then refuses leftovers unless the caller
// sets allow_foreign_open). Loads no factory's options for real: a moved
// DB's OPTIONS file may name a pool_dir that is stale or gone. The
// overrides (allow_foreign_open, accept_incarnation) are left unset.
DbBinding ReadDbBinding(const std::string& db_path);

}  // namespace rocks
}  // namespace flintkv

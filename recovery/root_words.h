// The first phases of a recovery: the pool root's words, the published
// watermark W and the record of an interrupted recovery R, checked before
// anything else is read, and an interrupted recovery's reset finished
// (docs/rocksdb_recovery.md).
// Thread safety: none needed; recovery owns the pool while it runs.
#pragma once

#include <vector>

#include "flintkv/recovery.h"
#include "pmem/layout.h"
#include "pmem/pool.h"
#include "rocksdb/db.h"
#include "rocksdb/status.h"
#include "rocksdb_common/watermark.h"

namespace flintkv {
namespace recovery {

// Refuses a damaged W or R unless o names the override that ignores it,
// and a watermark o requires that the pool lacks; sets r's watermark.
rocksdb::Status CheckRootWords(pmem::Pool* pool, Watermark* wm,
                               const RecoveryOptions& o, RecoveryReport* r);

// With R set, a previous recovery flushed what it replayed and stopped
// while dropping the lists: drops them all (*lists is emptied). Refuses an
// R above the DB's last sequence unless o.allow_older_db.
rocksdb::Status FinishInterruptedReset(rocksdb::DB* db, pmem::Pool* pool,
                                       Watermark* wm, const RecoveryOptions& o,
                                       std::vector<pmem::ListRoot*>* lists);

}  // namespace recovery
}  // namespace flintkv

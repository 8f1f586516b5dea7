// The replay phase of a recovery: the lists triage planned, walked into
// SST files that are ingested at once, or through DB writes (the memtable
// path), each list's copies inside a span persisted first (P11), and the
// DB's last sequence number raised past them (P18).
// Thread safety: none needed; recovery owns the DB and the pool.
#pragma once

#include <cstdint>
#include <vector>

#include "flintkv/recovery.h"
#include "pmem/layout.h"
#include "pmem/pool.h"
#include "recovery/replay.h"
#include "rocksdb/db.h"
#include "rocksdb/status.h"

namespace flintkv {
namespace recovery {

// One leftover list to replay and how (recovery/triage.h plans it).
struct ListPlan {
  pmem::ListRoot* list = nullptr;
  rocksdb::ColumnFamilyHandle* cf = nullptr;
  bool check = false;  // presence checks
  replay::CopyRange copies;
  replay::OlderCopies older;
};

// Replays plans (oldest list first) into db: into SST files when
// o.ingest_sst and every column family's table is block-based, else
// through DB writes. Nothing is flushed or dropped here.
rocksdb::Status ReplayPlans(
    rocksdb::DB* db, pmem::Pool* pool,
    const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const std::vector<ListPlan>& plans, const RecoveryOptions& o,
    RecoveryReport* r);

}  // namespace recovery
}  // namespace flintkv

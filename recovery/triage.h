// Triage, the recovery phase between the refusals and the replay: which of
// the claimed lists are replayed, and how. Marks the originals and drops
// the copies an interrupted recovery left, drops the lists the DB's record
// names, validates the rest and plans each list's replay (presence checks,
// copy spans), checking every entry before anything is written.
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
#include "recovery/replay_driver.h"
#include "rocksdb/db.h"
#include "rocksdb/status.h"

namespace flintkv {
namespace recovery {

// What the DB holds per column family right after open: the largest
// sequence number in its SST files, and whether RocksDB's WAL replay left
// entries in its memtables.
struct CfState {
  uint64_t file_seq = 0;
  bool memtable_entries = false;
};

CfState StateOf(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf);

// Marks the originals before the first replayed write and drops the lists
// an interrupted recovery created (its copies; they are not marked and
// come after every marked list). Which entries are already in the DB is
// decided per key during replay (recovery/replay.h), never here from
// sequence numbers: those are reused after a WAL-less reopen.
void Triage(pmem::Pool* pool, std::vector<pmem::ListRoot*>* lists,
            const RecoveryOptions& o, RecoveryReport* r);

// After Triage, which drops the copies an interrupted recovery left by
// comparing them with the originals: drops the lists `done` (the lines of
// the DB's record file) names, recovered into this DB already.
void DropRecovered(pmem::Pool* pool, const std::set<std::string>& done,
                   std::vector<pmem::ListRoot*>* lists,
                   const RecoveryOptions& o, RecoveryReport* r);

// Validates lists (oldest first) and plans their replay, before anything
// is written: *plans, and in *to_drop the lists of column families the DB
// no longer has. open_seq: the DB's last sequence at this recovery's open
// (versions above it are this recovery's copies).
rocksdb::Status PlanReplay(
    rocksdb::DB* db, pmem::Pool* pool,
    const std::vector<pmem::ListRoot*>& lists,
    const std::map<uint32_t, rocksdb::ColumnFamilyHandle*>& cf_by_id,
    const std::map<uint32_t, CfState>& cf_state, uint64_t open_seq,
    const RecoveryOptions& o, RecoveryReport* r, std::vector<ListPlan>* plans,
    std::vector<pmem::ListRoot*>* to_drop);

}  // namespace recovery
}  // namespace flintkv

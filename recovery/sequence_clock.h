// The DB's sequence clock across a recovery (invariant P18,
// docs/invariants.md): after recovery the DB's last sequence number is at
// least every sequence number the pool's lists hold, so that later writes
// never reuse the number of a write acknowledged before the crash. Without
// the WAL, RocksDB's own recovery sets the clock back to the last flush;
// replayed entries are then ingested just above that, and the next write
// reused numbers db_stress, snapshots and every sequence-based check had
// already seen.
//
// RocksDB has no call that sets LastSequence. CreateColumnFamilyWithImport
// raises it to the largest_seqno the caller's file metadata names (it
// carries sequence numbers of an exported column family): recovery imports
// one one-key SST file into a column family of its own, named
// kClockColumnFamily, and drops it at once. Two MANIFEST edits, each
// carrying the raised last sequence. A crash between them leaves the
// column family behind: the next recovery (RecoverDB, flintkv_tool,
// OpenDB) opens and drops it before anything else, if it holds exactly the
// clock's key.
// Thread safety: single-threaded (recovery owns the DB).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rocksdb/db.h"

namespace flintkv {

constexpr const char* kClockColumnFamily = "flintkv_sequence_clock";
constexpr const char* kClockKey = "flintkv-sequence-clock";

// The newest sequence number in the DB's live files. The MANIFEST edit
// that added a file records at least its largest_seqno as the DB's last
// sequence, so a reopened DB's last sequence is at least this (RocksDB's
// own LastSequence can be higher: numbers of writes no file holds).
uint64_t NewestFileSeq(rocksdb::DB* db);

// Raises db's last sequence to at least `target` (no-op if it is there);
// uses <dir>/clock.sst. Fails if RocksDB did not raise it.
rocksdb::Status RaiseLastSequence(rocksdb::DB* db, uint64_t target,
                                  const std::string& dir);

// Adds the clock column family, with RocksDB's defaults it was made with,
// to `cfs` when the DB's MANIFEST lists it (`names`, from
// ListColumnFamilies) and `cfs` does not name it: a crash between its
// import and its drop left it, and DB::Open must name every family.
void AddListedClock(const std::vector<std::string>& names,
                    std::vector<rocksdb::ColumnFamilyDescriptor>* cfs);

// Whether cf is a clock column family a crash left: named
// kClockColumnFamily and holding exactly the one key RaiseLastSequence
// imports (a user's family of that name is not).
bool IsLeftoverClock(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf);

}  // namespace flintkv

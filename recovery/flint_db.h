// FlintDB: the crash-atomic wrapper flintkv::OpenDB returns
// (docs/rocksdb_recovery.md, "The commit point for crash-atomic batches").
//
// Writes: the pool is the log, so every write runs with the WAL off (a
// caller's sync=true is met by the pool: the write is durable on return).
// After a write returns OK from RocksDB, the wrapper raises the pool's
// watermark W to RocksDB's LastSequence and persists it before returning
// (P10): recovery replays only entries <= W, so a WriteBatch is
// all-or-nothing.
// Reads: RocksDB publishes LastSequence before the wrapper raises W, so a
// read could observe a write above W that a crash then drops. Every read
// (Get, MultiGet, iterators, snapshots, GetEntity...) raises W to the
// LastSequence read *after* the read, before returning: what the read saw
// is <= W and survives any crash (durable linearizability covers reads).
// Tailing iterators publish after every positioning call.
// DeleteRange: RocksDB keeps range tombstones outside the memtable rep, so
// a write with a DeleteRange runs alone and returns only once a flush has
// put it in SST files (WriteAdmission::RangeDeleteWrite).
// Files: the reads in recovery/publishing_db.h, the writes that run alone
// in recovery/write_admission.h, the rest in recovery/flint_db.cc; OpenDB,
// which makes it, in recovery/open_db.cc.
// Thread safety: as rocksdb::DB.
#pragma once

#include <memory>
#include <vector>

#include "memtable/rocksdb/recovery_port.h"
#include "rocksdb/db.h"

namespace flintkv {

// Takes ownership of db. factory: the flintkv factory every column family
// uses (CreateColumnFamily on the wrapper sets it too); cfs: the handles
// OpenDB returned (DeleteRange in a WriteBatch flushes by handle).
rocksdb::DB* NewFlintDB(rocksdb::DB* db, const rocks::RecoveryPort& port,
                        std::shared_ptr<rocksdb::MemTableRepFactory> factory,
                        const std::vector<rocksdb::ColumnFamilyHandle*>& cfs);

}  // namespace flintkv

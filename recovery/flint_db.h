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
// Thread safety: as rocksdb::DB.
#pragma once

#include <memory>

#include "memtable/rocksdb/pool_handle.h"
#include "rocksdb/db.h"

namespace flintkv {

// Takes ownership of db.
rocksdb::DB* NewFlintDB(rocksdb::DB* db, std::shared_ptr<rocks::PoolHandle> h);

}  // namespace flintkv

// FlintKV as a RocksDB memtable: a MemTableRepFactory whose memtables are
// durable skiplists in a PMEM pool, so the write-ahead log can be disabled.
//
//   std::shared_ptr<rocksdb::MemTableRepFactory> f;
//   flintkv::MemTableOptions mo;
//   mo.pool_dir = "/mnt/pmem0/db1";
//   rocksdb::Status s = flintkv::NewMemTableRepFactory(mo, &f);
//   options.memtable_factory = f;           // and WriteOptions::disableWAL
//
// or by name, once libflintkv_rocksdb.so is loaded (LD_PRELOAD works with
// stock db_bench):  --memtablerep="id=flintkv;pool_dir=/dev/shm/db1"
//
// Durability: an acknowledged write is durable in the pool when Write
// returns, one key at a time. Crash-atomic multi-key batches and bringing
// unflushed memtables back after a crash need flintkv/recovery.h. A
// memtable RocksDB destroys without flushing it (a failed flush, a Close
// with avoid_flush_during_shutdown) stays in the pool; the next DB::Open
// then asks for `flintkv_tool recover` (flintkv::OpenDB recovers by itself).
// One pool_dir serves one DB at a time (its column families share the
// pool): a second DB::Open on a pool in use is refused.
// Thread safety: the factory and its memtables are safe for concurrent use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "flintkv/export.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/status.h"

namespace rocksdb {
class ObjectLibrary;
}

namespace flintkv {

struct MemTableOptions {
  // Directory holding the pool file (flintkv.pool); created if missing.
  std::string pool_dir;
  // Size of a new pool. Must hold all memtables a DB keeps at once
  // (max_write_buffer_number x write_buffer_size x column families, plus
  // headroom); checked against the column family options when possible.
  uint64_t pool_size = 4ull << 30;
  // PMEM handed to one writer thread at a time.
  uint64_t chunk_size = 1ull << 20;
  // "off" or "optane" (see docs/latency_model.md). "optane" sets the
  // process-wide model (flintkv::LatencyModel): every pool of the process,
  // not only this factory's, pays it from then on.
  std::string latency_model = "off";
  // Declares that every write to the DB is logged in RocksDB's WAL (no
  // WriteOptions::disableWAL). Then a memtable RocksDB closes unflushed is
  // in the WAL, and the pool lets it go, so a Close with WAL-logged writes
  // (which RocksDB does not flush) needs no recovery at the next open.
  // false (the default): the pool is the log; nothing unflushed is ever
  // dropped. A disableWAL write under wal_logged=true can be lost at a
  // Close that does not flush it.
  bool wal_logged = false;
};

// Opens (or creates) the pool and returns a factory. Errors: bad options,
// an unusable or corrupt pool file.
FLINTKV_EXPORT rocksdb::Status NewMemTableRepFactory(
    const MemTableOptions& options,
    std::shared_ptr<rocksdb::MemTableRepFactory>* factory);

// Registers "flintkv" with a RocksDB ObjectLibrary. Called automatically for
// ObjectLibrary::Default() when libflintkv_rocksdb.so is loaded.
FLINTKV_EXPORT int RegisterFlintKV(rocksdb::ObjectLibrary& library,
                                   const std::string& arg);

}  // namespace flintkv

// The write admission of the OpenDB wrapper (recovery/flint_db.h): the
// gate that lets ordinary operations in together and a write that must run
// alone in by itself, the room a write needs in the pool, and a write with
// a DeleteRange, which returns only once a flush has put it in SST files.
// Thread safety: Gate, FamilyHandles and WriteAdmission are thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "pmem/pool.h"
#include "rocksdb/db.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/write_batch.h"

namespace flintkv {
namespace recovery {

// The pool is the log: no WAL, and sync is met by the pool (a sync write
// with the WAL off is an error in RocksDB).
inline rocksdb::WriteOptions PoolLogged(const rocksdb::WriteOptions& wo) {
  rocksdb::WriteOptions o = wo;
  o.disableWAL = true;
  o.sync = false;
  return o;
}

// Lets any number of reads and writes in at once, or one DeleteRange alone
// (a big-reader lock: a per-shard count, so ordinary operations do not
// share one contended line). Dekker-style: an operation announces itself
// and then checks `closed_`; a DeleteRange sets `closed_` and then waits
// for the counts to drain; seq_cst on both sides orders the store before
// the load.
class Gate {
 public:
  int Enter() {
    static std::atomic<int> next{0};
    thread_local int shard = next.fetch_add(1) % kShards;
    while (true) {
      shards_[shard].n.fetch_add(1, std::memory_order_seq_cst);
      if (!closed_.load(std::memory_order_seq_cst)) return shard;
      shards_[shard].n.fetch_sub(1, std::memory_order_release);
      while (closed_.load(std::memory_order_acquire)) std::this_thread::yield();
    }
  }
  void Exit(int shard) {
    shards_[shard].n.fetch_sub(1, std::memory_order_release);
  }
  void Close() {
    exclusive_.lock();
    closed_.store(true, std::memory_order_seq_cst);
    for (Shard& s : shards_) {
      while (s.n.load(std::memory_order_seq_cst) != 0)
        std::this_thread::yield();
    }
  }
  void Open() {
    closed_.store(false, std::memory_order_release);
    exclusive_.unlock();
  }

 private:
  static constexpr int kShards = 16;
  struct alignas(64) Shard {
    std::atomic<int> n{0};
  };
  Shard shards_[kShards];
  std::atomic<bool> closed_{false};
  std::mutex exclusive_;
};

// The handles of the wrapper's column families, by id.
class FamilyHandles {
 public:
  void Track(rocksdb::ColumnFamilyHandle* h);
  // Forgets h if it is the handle tracked for its id.
  void Forget(rocksdb::ColumnFamilyHandle* h);
  std::vector<rocksdb::ColumnFamilyHandle*> All() const;
  // The handles of ids (the default column family's is db's own); fails
  // for an id without one.
  rocksdb::Status Of(const std::set<uint32_t>& ids, rocksdb::DB* db,
                     std::vector<rocksdb::ColumnFamilyHandle*>* out) const;

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, rocksdb::ColumnFamilyHandle*> cfs_;
};

// Runs the writes that cannot share the memtable with others: alone, the
// gate closed. db: the wrapped DB; publish: raises W to its LastSequence
// (P10).
class WriteAdmission {
 public:
  WriteAdmission(rocksdb::DB* db, pmem::Pool* pool,
                 const rocksdb::MemTableRepFactory* factory, FamilyHandles* cfs,
                 Gate* gate, std::function<void()> publish);

  // A write of more than the pool's reserve may not fit beside its own
  // memtable: all its entries go into one memtable, which is flushed only
  // after the write, and RocksDB gives a memtable no way to fail a write,
  // so the writer would wait forever for space only a flush frees
  // (ExplainWriteWait). Smaller writes always find room once older
  // memtables are flushed (the space rule at Open keeps two reserves beside
  // the write buffers), and the memtable waits for that itself.
  bool Large(size_t bytes) const;
  // O(1): the batch's bytes, and each entry's node header and alignment.
  bool Large(const rocksdb::WriteBatch& b) const;

  // Runs the write alone, after MakeRoom.
  rocksdb::Status LargeWrite(const rocksdb::WriteOptions& wo,
                             rocksdb::WriteBatch* b);

  // RocksDB keeps range tombstones in its own DRAM table, never in the
  // memtable rep, so the pool cannot hold them. A write with a DeleteRange
  // therefore runs alone (no read or write in between can observe it) and
  // does not return until a flush has put it, and everything before it, in
  // SST files. A crash before that leaves its point entries above W
  // (dropped) and its tombstone nowhere: the write never happened. Across
  // column families only an atomic flush keeps the batch whole. The
  // memtables are flushed first, too: a flush drops the older entries the
  // tombstone covers, so if the process died after the tombstone's flush
  // but before MarkFlushed, recovery would find those entries in the
  // tombstone's list, below W, absent from the DB, and replay them above
  // it.
  rocksdb::Status RangeDeleteWrite(const rocksdb::WriteOptions& wo,
                                   rocksdb::WriteBatch* b);

 private:
  // With the gate closed (no other write shares the memtable): flushes
  // every column family if the pool has no room for the batch now, and
  // refuses it (nothing written) if there is none even then.
  rocksdb::Status MakeRoom(rocksdb::WriteBatch* b);

  rocksdb::DB* const db_;
  pmem::Pool* const pool_;
  const rocksdb::MemTableRepFactory* const factory_;
  FamilyHandles* const cfs_;
  Gate* const gate_;
  const std::function<void()> publish_;
};

}  // namespace recovery
}  // namespace flintkv

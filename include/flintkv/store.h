// flintkv::Store — the standalone durable skiplist (the paper's engine).
//
// Thread safety: all Store methods may be called concurrently from any number
// of threads. An Iterator is used by one thread at a time.
// Durability (docs/durability_modes.md):
//  - sync writes (WriteOptions::sync, the default): when Put, Delete or Write
//    returns OK the update is durable (durable linearizability); after a
//    crash, reopening the pool brings back every acknowledged update and
//    nothing from a torn batch. DurabilityOptions::group_commit chooses one
//    fence per write (default) or one per combining pass.
//  - weak writes (sync = false, AciKV-style weak durability): the call
//    returns once the update is visible. Persist() is a barrier: when it
//    returns, every write that returned before it was called is durable.
//    Without a barrier, a weak write is durable within about
//    DurabilityOptions::persist_interval_us. After a crash the store holds a
//    prefix of the commit order: every update up to some point and none
//    after it, batches whole; every sync write and every write covered by a
//    completed Persist() is inside that prefix.
// Visibility: a WriteBatch becomes visible atomically; a Snapshot (and any
// Iterator) observes one point in time, forward and backward.
// Space (StoreOptions::gc, docs/gc.md): versions that no open Snapshot,
// Iterator or running read can see (hidden by a newer version of their key
// at or below the oldest of those; tombstones with nothing left to hide)
// are unlinked durably and their PMEM and DRAM reused, so a store that
// overwrites a fixed key set stays within a fixed pool. The latest value of
// every key is never collected. An open Snapshot or Iterator keeps the
// versions it sees; an open Iterator also delays the reuse (not the
// unlinking) of nodes unlinked after it was created: release them.
// Errors: every call returns Status; nothing throws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flintkv/export.h"
#include "flintkv/options.h"
#include "flintkv/status.h"

namespace flintkv {

// An ordered list of puts and deletes applied atomically by Store::Write.
// When a key appears more than once, the last operation on it wins.
class FLINTKV_EXPORT WriteBatch {
 public:
  void Put(std::string_view key, std::string_view value);
  void Delete(std::string_view key);
  void Clear() { ops_.clear(); }
  size_t Count() const { return ops_.size(); }

  struct Op {
    bool is_delete;
    std::string key;
    std::string value;
  };
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

// A point in time, made by Store::GetSnapshot. Cheap: a version number,
// registered with the GC while the handle lives (its versions are not
// collected); destroying it releases them. Versions keep increasing across
// a reopen (the GC never collects the newest version), except the versions
// of weak writes that a crash dropped, which are handed out again.
class FLINTKV_EXPORT Snapshot {
 public:
  virtual ~Snapshot() = default;
  uint64_t version() const { return version_; }

 protected:
  // Only the store makes snapshots: one built from a bare version number
  // would protect nothing from the GC.
  explicit Snapshot(uint64_t version) : version_(version) {}

 private:
  uint64_t version_;
};

class FLINTKV_EXPORT Iterator {
 public:
  virtual ~Iterator() = default;
  virtual bool Valid() const = 0;
  virtual void SeekToFirst() = 0;
  virtual void SeekToLast() = 0;
  virtual void Seek(std::string_view target) = 0;         // first key >= target
  virtual void SeekForPrev(std::string_view target) = 0;  // last key <= target
  virtual void Next() = 0;
  virtual void Prev() = 0;
  // Valid only while Valid() and until the next move; points into the pool.
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  // Not OK if the iterator could not be made (a closed store): it is then
  // never Valid(). Check it when Valid() turns false.
  virtual Status status() const = 0;
};

struct StoreStats {
  uint64_t visible_version = 0;
  uint64_t nodes = 0;  // persistent nodes (all versions)
  uint64_t pmem_bytes_reserved = 0;
  uint64_t dram_index_bytes = 0;
  // Filled on open of an existing pool.
  uint64_t recovered_nodes = 0;
  uint64_t dropped_uncommitted = 0;  // version-MAX nodes (P4)
  uint64_t rolled_back_batch = 0;    // nodes of a torn batch (P3)
  uint64_t dropped_unpersisted = 0;  // weak writes past the durable prefix
  // Weak writes may be waiting for Persist (or the background bound).
  bool weak_writes_pending = false;
  bool emulated_pmem = true;
  // Version GC (zero when off).
  uint64_t gc_passes = 0;
  uint64_t gc_unlinked = 0;      // versions unlinked (durably)
  uint64_t gc_freed = 0;         // of which reused or reusable
  uint64_t pmem_bytes_free = 0;  // of pmem_bytes_reserved, free for reuse
};

class FLINTKV_EXPORT Store {
 public:
  // Opens (or creates, per options.pool) the store in the pool file.
  // A foreign, truncated or corrupt file yields a non-OK Status.
  static Status Open(const StoreOptions& options, std::unique_ptr<Store>* out);

  virtual ~Store() = default;

  virtual Status Put(const WriteOptions& options, std::string_view key,
                     std::string_view value) = 0;
  virtual Status Delete(const WriteOptions& options, std::string_view key) = 0;
  virtual Status Write(const WriteOptions& options,
                       const WriteBatch& batch) = 0;
  // Sync writes (WriteOptions defaults).
  Status Put(std::string_view key, std::string_view value) {
    return Put(WriteOptions(), key, value);
  }
  Status Delete(std::string_view key) { return Delete(WriteOptions(), key); }
  Status Write(const WriteBatch& batch) { return Write(WriteOptions(), batch); }
  // Barrier for weak writes: when it returns OK, every write that returned
  // before the call is durable. Cheap when nothing is pending.
  virtual Status Persist() = 0;
  // NotFound if absent or deleted (as of options.snapshot, else latest).
  virtual Status Get(const ReadOptions& options, std::string_view key,
                     std::string* value) = 0;
  Status Get(std::string_view key, std::string* value) {
    return Get(ReadOptions(), key, value);
  }
  virtual std::unique_ptr<Snapshot> GetSnapshot() = 0;
  // Iterates as of options.snapshot, else as of its own snapshot, taken
  // now. Never null; on a closed store status() says so.
  virtual std::unique_ptr<Iterator> NewIterator(const ReadOptions& options) = 0;
  std::unique_ptr<Iterator> NewIterator() { return NewIterator(ReadOptions()); }
  virtual StoreStats GetStats() = 0;
  // Runs one full GC pass now (also while the background thread runs) and
  // frees what no reader holds. InvalidArgument if StoreOptions::gc is off.
  virtual Status GarbageCollect() = 0;
  // Makes pending weak writes durable (Persist), stops the background
  // persistence and GC threads, releases the pool. Also done by the
  // destructor.
  virtual Status Close() = 0;
};

}  // namespace flintkv

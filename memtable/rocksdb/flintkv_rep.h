// FlintRep: rocksdb::MemTableRep on a DurableSkipList in a pool.
//
// Entries are RocksDB's encoded memtable entries, written by RocksDB
// straight into the PMEM node that Allocate hands out (no copy). Keys
// (internal keys) are unique, so the list runs with unique_keys and without
// version collapsing.
// Thread safety: as rocksdb::MemTableRep — concurrent inserts (when
// allow_concurrent_memtable_write) and reads; Mark* from RocksDB's flush.
// Persistence: P1/P2 via the skiplist; the list is dropped from the pool
// only when RocksDB has flushed it (MarkFlushed) and destroys it (P6); a rep
// destroyed unflushed stays in the pool for recovery (S4, pool_session.h).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "memtable/durable_skiplist.h"
#include "memtable/rocksdb/memtable_comparator_layout.h"
#include "memtable/rocksdb/pool_session.h"
#include "pmem/persist.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/version.h"

namespace flintkv {
namespace rocks {

using List = memtable::DurableSkipList<pmem::PmemPersist>;

// Adapts RocksDB's comparator to the skiplist's (same key format).
class RocksKeyComparator : public memtable::KeyComparator {
 public:
  explicit RocksKeyComparator(const rocksdb::MemTableRep::KeyComparator& c)
      : c_(c) {
    // Internal keys end in 8 bytes of sequence and type.
    if (OrdersByBytewiseUserKey(c)) SetBytewisePrefix(8);
  }
  int Compare(const char* a, const char* b) const override { return c_(a, b); }

 private:
  const rocksdb::MemTableRep::KeyComparator& c_;
};

// The log line of a write waiting for pool space: for flushes, or, when no
// other list holds chunks, why the wait cannot end (the entry does not fit
// beside its own memtable, which is flushed only after the write).
std::string ExplainWriteWait(const pmem::Pool& pool, uint64_t list_id,
                             size_t entry_bytes);

class FlintRep : public rocksdb::MemTableRep {
 public:
  // The DRAM index in the memtable's arena (the Allocator RocksDB gives
  // every rep), through the public MemTableRep::Allocate: nodes are freed
  // with the memtable, which destroys this rep before its arena.
  class IndexArenaOfRep : public memtable::IndexArena {
   public:
    explicit IndexArenaOfRep(FlintRep* rep) : rep_(rep) {}
    void* Allocate(size_t size) override;

   private:
    FlintRep* const rep_;
  };

  // root: a fresh list of this pool.
  FlintRep(const rocksdb::MemTableRep::KeyComparator& cmp,
           rocksdb::Allocator* allocator, std::shared_ptr<PoolSession> pool,
           pmem::ListRoot* root, rocksdb::Logger* logger);
  ~FlintRep() override;

  rocksdb::KeyHandle Allocate(const size_t len, char** buf) override;
  void Insert(rocksdb::KeyHandle handle) override { InsertKey(handle); }
  bool InsertKey(rocksdb::KeyHandle handle) override;
  void InsertWithHint(rocksdb::KeyHandle h, void**) override { InsertKey(h); }
  bool InsertKeyWithHint(rocksdb::KeyHandle h, void**) override {
    return InsertKey(h);
  }
  void InsertConcurrently(rocksdb::KeyHandle h) override { InsertKey(h); }
  bool InsertKeyConcurrently(rocksdb::KeyHandle h) override {
    return InsertKey(h);
  }
  void InsertWithHintConcurrently(rocksdb::KeyHandle h, void**) override {
    InsertKey(h);
  }
  bool InsertKeyWithHintConcurrently(rocksdb::KeyHandle h, void**) override {
    return InsertKey(h);
  }
  bool Contains(const char* key) const override;
  void MarkReadOnly() override;
  void MarkFlushed() override;
  // RocksDB asks this of a mutable memtable at DB::Open, right after
  // CreateColumnFamily made it, and first thing in DropColumnFamily
  // (pool_session.h S7).
  bool IsSnapshotSupported() const override;
  void Get(const rocksdb::LookupKey& k, void* callback_args,
           bool (*callback_func)(void* arg, const char* entry)) override;
#if ROCKSDB_MAJOR >= 9
  // paranoid_memory_checks: Get that also checks the visited keys' order.
  rocksdb::Status GetAndValidate(const rocksdb::LookupKey& k,
                                 void* callback_args,
                                 bool (*callback_func)(void* arg,
                                                       const char* entry),
                                 bool allow_data_in_errors) override;
#endif
  uint64_t ApproximateNumEntries(const rocksdb::Slice& start_ikey,
                                 const rocksdb::Slice& end_ikey) override;
  void UniqueRandomSample(const uint64_t num_entries,
                          const uint64_t target_sample_size,
                          std::unordered_set<const char*>* entries) override;
  size_t ApproximateMemoryUsage() override;
  rocksdb::MemTableRep::Iterator* GetIterator(rocksdb::Arena* arena) override;

 private:
  // ApproximateMemoryUsage once writes reach the pool's reserve: above any
  // write_buffer_size a pool could hold (RocksDB clips it to 64 GiB at
  // Open; SetOptions does not clip).
  static constexpr size_t kPastAnyWriteBuffer = size_t{1} << 40;

  Status AllocateNode(size_t len, pmem::NvmNode** node);

  RocksKeyComparator cmp_;
  std::shared_ptr<PoolSession> pool_;
  pmem::ListRoot* root_;
  rocksdb::Logger* logger_;
  IndexArenaOfRep index_arena_{this};
  List list_;
  std::atomic<bool> flushed_{false};
  std::atomic<bool> pressure_{false};      // pool nearly full: ask for a flush
  std::atomic<bool> reserve_used_{false};  // and the ask was not heard
  std::atomic<bool> has_entry_{false};     // an insert has begun
  std::atomic<size_t> sealed_usage_{0};    // usage frozen at MarkReadOnly
  // Largest RocksDB sequence number inserted, per writer thread (no shared
  // cache line on the put path). MarkFlushed reports it (pool_session.h,
  // flushed_floor): the newest entry of its key, it is in the flush's SST
  // file, whose largest sequence the MANIFEST edit records as the DB's
  // last, so a copy of the DB whose last sequence falls short lacks some of
  // the flushed writes. A SingleDelete can make a flush drop entries (a
  // Put/SingleDelete pair vanishes): such a memtable reports nothing. (A
  // compaction filter that drops the newest entry at flush could make the
  // floor exceed the DB's last sequence: a false "older than the pool",
  // overridden by allow_older_db.)
  static constexpr int kSeqSlots = 64;
  struct alignas(64) SeqSlot {
    std::atomic<uint64_t> max{0};
  };
  SeqSlot max_seq_[kSeqSlots];
  std::atomic<bool> single_delete_{false};
};

}  // namespace rocks
}  // namespace flintkv

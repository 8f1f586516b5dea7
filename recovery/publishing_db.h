// PublishingDB: the read side of the OpenDB wrapper (recovery/flint_db.h).
// Every read (Get, MultiGet, iterators, snapshots, GetEntity...) raises the
// pool's watermark W to the LastSequence read after the read, before
// returning, so that what it saw survives any crash (P10 for reads); every
// operation passes the gate that a write running alone closes.
// Thread safety: as rocksdb::DB.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pmem/pool.h"
#include "recovery/write_admission.h"
#include "rocksdb/utilities/stackable_db.h"
#include "rocksdb/version.h"
#include "rocksdb_common/watermark.h"

namespace flintkv {
namespace recovery {

class PublishingDB : public rocksdb::StackableDB {
 public:
  using ColumnFamilyHandle = rocksdb::ColumnFamilyHandle;
  using ReadOptions = rocksdb::ReadOptions;
  using Slice = rocksdb::Slice;

  // Takes ownership of db; pool: the pool whose W it publishes.
  PublishingDB(rocksdb::DB* db, pmem::Pool* pool)
      : rocksdb::StackableDB(db), wm_(pool) {}

  // ---- Reads: publish what was read before returning it ----
  using rocksdb::StackableDB::Get;
#if ROCKSDB_MAJOR >= 9
  // RocksDB 9 funnels every Get into the timestamped form (the others are
  // final).
  rocksdb::Status Get(const ReadOptions& ro, ColumnFamilyHandle* cf,
                      const Slice& k, rocksdb::PinnableSlice* v,
                      std::string* ts) override {
    Pass p(this);
    return Published(db_->Get(ro, cf, k, v, ts), true);
  }
#else
  rocksdb::Status Get(const ReadOptions& ro, ColumnFamilyHandle* cf,
                      const Slice& k, rocksdb::PinnableSlice* v) override {
    Pass p(this);
    return Published(db_->Get(ro, cf, k, v), true);
  }
#endif
  using rocksdb::StackableDB::GetEntity;
  rocksdb::Status GetEntity(const ReadOptions& ro, ColumnFamilyHandle* cf,
                            const Slice& k,
                            rocksdb::PinnableWideColumns* c) override {
    Pass p(this);
    return Published(db_->GetEntity(ro, cf, k, c), true);
  }
  using rocksdb::StackableDB::GetMergeOperands;
  rocksdb::Status GetMergeOperands(const ReadOptions& ro,
                                   ColumnFamilyHandle* cf, const Slice& k,
                                   rocksdb::PinnableSlice* s,
                                   rocksdb::GetMergeOperandsOptions* o,
                                   int* n) override {
    Pass p(this);
    return Published(db_->GetMergeOperands(ro, cf, k, s, o, n), true);
  }
  using rocksdb::StackableDB::MultiGet;
#if ROCKSDB_MAJOR >= 9
  // RocksDB 9 funnels every MultiGet into this one (the others are final).
  void MultiGet(const ReadOptions& ro, size_t n, ColumnFamilyHandle** cfs,
                const Slice* keys, rocksdb::PinnableSlice* values,
                std::string* timestamps, rocksdb::Status* statuses,
                bool sorted) override {
    Pass p(this);
    db_->MultiGet(ro, n, cfs, keys, values, timestamps, statuses, sorted);
    Publish();
  }
  using rocksdb::StackableDB::MultiGetEntity;
  void MultiGetEntity(const ReadOptions& ro, ColumnFamilyHandle* cf, size_t n,
                      const Slice* keys, rocksdb::PinnableWideColumns* results,
                      rocksdb::Status* statuses, bool sorted) override {
    Pass p(this);
    db_->MultiGetEntity(ro, cf, n, keys, results, statuses, sorted);
    Publish();
  }
  void MultiGetEntity(const ReadOptions& ro, size_t n, ColumnFamilyHandle** cfs,
                      const Slice* keys, rocksdb::PinnableWideColumns* results,
                      rocksdb::Status* statuses, bool sorted) override {
    Pass p(this);
    db_->MultiGetEntity(ro, n, cfs, keys, results, statuses, sorted);
    Publish();
  }
  void MultiGetEntity(const ReadOptions& ro, size_t n, const Slice* keys,
                      rocksdb::PinnableAttributeGroups* results) override {
    Pass p(this);
    db_->MultiGetEntity(ro, n, keys, results);
    Publish();
  }
  rocksdb::Status GetEntity(const ReadOptions& ro, const Slice& k,
                            rocksdb::PinnableAttributeGroups* r) override {
    Pass p(this);
    return Published(db_->GetEntity(ro, k, r), true);
  }
  // Multi-column-family iterators: as NewIterator for the non-tailing ones
  // (publish once, at creation); a tailing one would need publishing after
  // every move, which these interfaces cannot be wrapped for.
  std::unique_ptr<rocksdb::Iterator> NewCoalescingIterator(
      const ReadOptions& ro,
      const std::vector<ColumnFamilyHandle*>& cfs) override;
  std::unique_ptr<rocksdb::AttributeGroupIterator> NewAttributeGroupIterator(
      const ReadOptions& ro,
      const std::vector<ColumnFamilyHandle*>& cfs) override;
#else
  std::vector<rocksdb::Status> MultiGet(
      const ReadOptions& ro, const std::vector<ColumnFamilyHandle*>& cfs,
      const std::vector<Slice>& keys,
      std::vector<std::string>* values) override {
    Pass p(this);
    auto s = db_->MultiGet(ro, cfs, keys, values);
    Publish();
    return s;
  }
  void MultiGet(const ReadOptions& ro, ColumnFamilyHandle* cf, size_t n,
                const Slice* keys, rocksdb::PinnableSlice* values,
                rocksdb::Status* statuses, bool sorted) override {
    Pass p(this);
    db_->MultiGet(ro, cf, n, keys, values, statuses, sorted);
    Publish();
  }
  void MultiGet(const ReadOptions& ro, size_t n, ColumnFamilyHandle** cfs,
                const Slice* keys, rocksdb::PinnableSlice* values,
                rocksdb::Status* statuses, bool sorted) override {
    Pass p(this);
    db_->MultiGet(ro, n, cfs, keys, values, statuses, sorted);
    Publish();
  }
#endif
  using rocksdb::StackableDB::KeyMayExist;
  bool KeyMayExist(const ReadOptions& ro, ColumnFamilyHandle* cf,
                   const Slice& k, std::string* v, bool* found) override {
    Pass p(this);
    bool r = db_->KeyMayExist(ro, cf, k, v, found);
    Publish();
    return r;
  }
  using rocksdb::StackableDB::NewIterator;
  rocksdb::Iterator* NewIterator(const ReadOptions& ro,
                                 ColumnFamilyHandle* cf) override {
    Pass p(this);
    return Wrap(db_->NewIterator(ro, cf), ro.tailing);
  }
  rocksdb::Status NewIterators(const ReadOptions& ro,
                               const std::vector<ColumnFamilyHandle*>& cfs,
                               std::vector<rocksdb::Iterator*>* its) override {
    Pass p(this);
    rocksdb::Status s = db_->NewIterators(ro, cfs, its);
    if (s.ok()) {
      for (auto*& it : *its) it = Wrap(it, ro.tailing);
    }
    return s;
  }
  const rocksdb::Snapshot* GetSnapshot() override {
    Pass p(this);
    const rocksdb::Snapshot* snap = db_->GetSnapshot();
    Publish();  // a read at the snapshot sees nothing above W
    return snap;
  }

 protected:
  // An ordinary operation's pass through the gate.
  class Pass {
   public:
    explicit Pass(PublishingDB* db) : db_(db), shard_(db->gate_.Enter()) {}
    ~Pass() { db_->gate_.Exit(shard_); }

   private:
    PublishingDB* db_;
    int shard_;
  };

  // P10. Writes: once Write has returned, every write group up to
  // LastSequence is completely in the memtables (RocksDB publishes
  // LastSequence after the whole group's inserts) and FlintKV made each
  // insert durable; persisting W >= LastSequence makes all of them, and
  // only whole write groups, count for recovery. Reads: LastSequence read
  // after the read bounds what it saw.
  void Publish();
  rocksdb::Status Published(rocksdb::Status s, bool read = false) {
    if (s.ok() || read) Publish();
    return s;
  }
  Watermark* watermark() { return &wm_; }
  Gate* gate() { return &gate_; }

 private:
  rocksdb::Iterator* Wrap(rocksdb::Iterator* it, bool tailing);

  Watermark wm_;
  std::atomic<uint64_t> durable_{0};
  Gate gate_;
};

}  // namespace recovery
}  // namespace flintkv

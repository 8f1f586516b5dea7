#include "recovery/flint_db.h"

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "memtable/rocksdb/watermark.h"
#include "rocksdb/utilities/stackable_db.h"

namespace flintkv {
namespace {

using rocksdb::ColumnFamilyHandle;
using rocksdb::ReadOptions;
using rocksdb::Slice;
using rocksdb::WriteOptions;

// The pool is the log: no WAL, and sync is met by the pool (a sync write
// with the WAL off is an error in RocksDB).
WriteOptions PoolLogged(const WriteOptions& wo) {
  WriteOptions o = wo;
  o.disableWAL = true;
  o.sync = false;
  return o;
}

// Forwards to the DB's iterator. A tailing iterator can move onto data
// newer than its creation, so W is published after every move (P10 for
// reads); any iterator publishes again after Refresh.
class PublishingIterator : public rocksdb::Iterator {
 public:
  PublishingIterator(rocksdb::Iterator* it, bool tailing,
                     std::function<void()> publish)
      : it_(it), tailing_(tailing), publish_(std::move(publish)) {}
  ~PublishingIterator() override { delete it_; }
  bool Valid() const override { return it_->Valid(); }
  void SeekToFirst() override { Moved(&rocksdb::Iterator::SeekToFirst); }
  void SeekToLast() override { Moved(&rocksdb::Iterator::SeekToLast); }
  void Seek(const Slice& t) override {
    it_->Seek(t);
    if (tailing_) publish_();
  }
  void SeekForPrev(const Slice& t) override {
    it_->SeekForPrev(t);
    if (tailing_) publish_();
  }
  void Next() override { Moved(&rocksdb::Iterator::Next); }
  void Prev() override { Moved(&rocksdb::Iterator::Prev); }
  Slice key() const override { return it_->key(); }
  Slice value() const override { return it_->value(); }
  const rocksdb::WideColumns& columns() const override {
    return it_->columns();
  }
  rocksdb::Status status() const override { return it_->status(); }
  rocksdb::Status Refresh() override {
    rocksdb::Status s = it_->Refresh();
    publish_();
    return s;
  }
  rocksdb::Status GetProperty(std::string name, std::string* prop) override {
    return it_->GetProperty(std::move(name), prop);
  }
  Slice timestamp() const override { return it_->timestamp(); }

 private:
  void Moved(void (rocksdb::Iterator::*op)()) {
    (it_->*op)();
    if (tailing_) publish_();
  }
  rocksdb::Iterator* it_;
  bool tailing_;
  std::function<void()> publish_;
};

class FlintDB : public rocksdb::StackableDB {
 public:
  FlintDB(rocksdb::DB* db, std::shared_ptr<rocks::PoolHandle> pool)
      : rocksdb::StackableDB(db), pool_(std::move(pool)), wm_(pool_->pool()) {}
  ~FlintDB() override { Close(); }

  rocksdb::Status Close() override {
    if (closed_) return rocksdb::Status::OK();
    closed_ = true;
    rocksdb::Status s = db_->Close();
    // Nothing is in flight any more: every entry in the pool is published,
    // so plain users of the pool may come next.
    wm_.Disable();
    pool_->wrapper_owned = false;
    return s;
  }

  // ---- Writes ----
  using rocksdb::StackableDB::Put;
  rocksdb::Status Put(const WriteOptions& wo, ColumnFamilyHandle* cf,
                      const Slice& k, const Slice& v) override {
    return Published(db_->Put(PoolLogged(wo), cf, k, v));
  }
  using rocksdb::StackableDB::Delete;
  rocksdb::Status Delete(const WriteOptions& wo, ColumnFamilyHandle* cf,
                         const Slice& k) override {
    return Published(db_->Delete(PoolLogged(wo), cf, k));
  }
  using rocksdb::StackableDB::SingleDelete;
  rocksdb::Status SingleDelete(const WriteOptions& wo, ColumnFamilyHandle* cf,
                               const Slice& k) override {
    return Published(db_->SingleDelete(PoolLogged(wo), cf, k));
  }
  using rocksdb::StackableDB::Merge;
  rocksdb::Status Merge(const WriteOptions& wo, ColumnFamilyHandle* cf,
                        const Slice& k, const Slice& v) override {
    return Published(db_->Merge(PoolLogged(wo), cf, k, v));
  }
  using rocksdb::StackableDB::PutEntity;
  rocksdb::Status PutEntity(const WriteOptions& wo, ColumnFamilyHandle* cf,
                            const Slice& k,
                            const rocksdb::WideColumns& columns) override {
    return Published(db_->PutEntity(PoolLogged(wo), cf, k, columns));
  }
  rocksdb::Status Write(const WriteOptions& wo,
                        rocksdb::WriteBatch* b) override {
    if (b->HasDeleteRange()) return NoRangeDeletes();
    return Published(db_->Write(PoolLogged(wo), b));
  }
  using rocksdb::StackableDB::DeleteRange;
  rocksdb::Status DeleteRange(const WriteOptions&, ColumnFamilyHandle*,
                              const Slice&, const Slice&) override {
    return NoRangeDeletes();
  }

  // ---- Reads: publish what was read before returning it ----
  using rocksdb::StackableDB::Get;
  rocksdb::Status Get(const ReadOptions& ro, ColumnFamilyHandle* cf,
                      const Slice& k, rocksdb::PinnableSlice* v) override {
    return Published(db_->Get(ro, cf, k, v), true);
  }
  using rocksdb::StackableDB::GetEntity;
  rocksdb::Status GetEntity(const ReadOptions& ro, ColumnFamilyHandle* cf,
                            const Slice& k,
                            rocksdb::PinnableWideColumns* c) override {
    return Published(db_->GetEntity(ro, cf, k, c), true);
  }
  using rocksdb::StackableDB::GetMergeOperands;
  rocksdb::Status GetMergeOperands(const ReadOptions& ro,
                                   ColumnFamilyHandle* cf, const Slice& k,
                                   rocksdb::PinnableSlice* s,
                                   rocksdb::GetMergeOperandsOptions* o,
                                   int* n) override {
    return Published(db_->GetMergeOperands(ro, cf, k, s, o, n), true);
  }
  using rocksdb::StackableDB::MultiGet;
  std::vector<rocksdb::Status> MultiGet(
      const ReadOptions& ro, const std::vector<ColumnFamilyHandle*>& cfs,
      const std::vector<Slice>& keys,
      std::vector<std::string>* values) override {
    auto s = db_->MultiGet(ro, cfs, keys, values);
    Publish();
    return s;
  }
  void MultiGet(const ReadOptions& ro, ColumnFamilyHandle* cf, size_t n,
                const Slice* keys, rocksdb::PinnableSlice* values,
                rocksdb::Status* statuses, bool sorted) override {
    db_->MultiGet(ro, cf, n, keys, values, statuses, sorted);
    Publish();
  }
  void MultiGet(const ReadOptions& ro, size_t n, ColumnFamilyHandle** cfs,
                const Slice* keys, rocksdb::PinnableSlice* values,
                rocksdb::Status* statuses, bool sorted) override {
    db_->MultiGet(ro, n, cfs, keys, values, statuses, sorted);
    Publish();
  }
  using rocksdb::StackableDB::KeyMayExist;
  bool KeyMayExist(const ReadOptions& ro, ColumnFamilyHandle* cf,
                   const Slice& k, std::string* v, bool* found) override {
    bool r = db_->KeyMayExist(ro, cf, k, v, found);
    Publish();
    return r;
  }
  using rocksdb::StackableDB::NewIterator;
  rocksdb::Iterator* NewIterator(const ReadOptions& ro,
                                 ColumnFamilyHandle* cf) override {
    return Wrap(db_->NewIterator(ro, cf), ro.tailing);
  }
  rocksdb::Status NewIterators(const ReadOptions& ro,
                               const std::vector<ColumnFamilyHandle*>& cfs,
                               std::vector<rocksdb::Iterator*>* its) override {
    rocksdb::Status s = db_->NewIterators(ro, cfs, its);
    if (s.ok()) {
      for (auto*& it : *its) it = Wrap(it, ro.tailing);
    }
    return s;
  }
  const rocksdb::Snapshot* GetSnapshot() override {
    const rocksdb::Snapshot* snap = db_->GetSnapshot();
    Publish();  // a read at the snapshot sees nothing above W
    return snap;
  }

 private:
  static rocksdb::Status NoRangeDeletes() {
    return rocksdb::Status::NotSupported(
        "flintkv: DeleteRange is not crash-durable with the flintkv memtable "
        "(RocksDB keeps range tombstones in DRAM)");
  }
  // P10. Writes: once Write has returned, every write group up to
  // LastSequence is completely in the memtables (RocksDB publishes
  // LastSequence after the whole group's inserts) and FlintKV made each
  // insert durable; persisting W >= LastSequence makes all of them, and
  // only whole write groups, count for recovery. Reads: LastSequence read
  // after the read bounds what it saw.
  void Publish() {
    uint64_t seq = db_->GetLatestSequenceNumber();
    // durable_ <= the W some thread has already written back: most reads
    // and writes of a busy DB find their sequence covered and skip the
    // CAS and the fence.
    if (durable_.load(std::memory_order_acquire) >= seq) return;
    wm_.Publish(seq);
    uint64_t d = durable_.load(std::memory_order_relaxed);
    while (d < seq &&
           !durable_.compare_exchange_weak(d, seq, std::memory_order_release,
                                           std::memory_order_relaxed)) {
    }
  }
  rocksdb::Status Published(rocksdb::Status s, bool read = false) {
    if (s.ok() || read) Publish();
    return s;
  }
  rocksdb::Iterator* Wrap(rocksdb::Iterator* it, bool tailing) {
    // Creating the iterator fixed the sequence it reads at (a tailing one:
    // its first view): publish now.
    Publish();
    return new PublishingIterator(it, tailing, [this] { Publish(); });
  }

  std::shared_ptr<rocks::PoolHandle> pool_;
  Watermark wm_;
  std::atomic<uint64_t> durable_{0};
  bool closed_ = false;
};

}  // namespace

rocksdb::DB* NewFlintDB(rocksdb::DB* db, std::shared_ptr<rocks::PoolHandle> h) {
  return new FlintDB(db, std::move(h));
}

}  // namespace flintkv

#include "recovery/flint_db.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "memtable/rocksdb/flintkv_factory.h"
#include "memtable/rocksdb/option_checks.h"
#include "memtable/rocksdb/watermark.h"
#include "rocksdb/convenience.h"
#include "rocksdb/utilities/stackable_db.h"
#include "rocksdb/version.h"

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

// Pool bytes of the node of a memtable entry of `bytes` key and value
// bytes, at most: RocksDB's framing (sequence and type, two varint lengths,
// up to 8 bytes of per-key protection) and the node header.
uint64_t EntryNodeBytes(size_t bytes) {
  return pmem::NvmNode::AllocSize(bytes + 8 + 10 + 8);
}

// The column families a WriteBatch writes, its largest memtable entry and
// the pool bytes of all its entries' nodes.
class CfCollector : public rocksdb::WriteBatch::Handler {
 public:
  // With a pool: nodes above a quarter chunk get a chunk of their own
  // (NodeArena), counted at that chunk's size.
  explicit CfCollector(const pmem::Pool* pool = nullptr) : pool_(pool) {}
  std::set<uint32_t> ids;
  size_t largest = 0;        // key + value bytes of the largest entry
  uint64_t small_bytes = 0;  // nodes carved from shared chunks
  uint64_t big_bytes = 0;    // chunks of their own
  rocksdb::Status PutCF(uint32_t cf, const Slice& k, const Slice& v) override {
    return Add(cf, k.size() + v.size());
  }
  rocksdb::Status DeleteCF(uint32_t cf, const Slice& k) override {
    return Add(cf, k.size());
  }
  rocksdb::Status SingleDeleteCF(uint32_t cf, const Slice& k) override {
    return Add(cf, k.size());
  }
  rocksdb::Status DeleteRangeCF(uint32_t cf, const Slice&,
                                const Slice&) override {
    ids.insert(cf);  // kept by RocksDB in its own table, not the pool
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t cf, const Slice& k,
                          const Slice& v) override {
    return Add(cf, k.size() + v.size());
  }
  rocksdb::Status PutEntityCF(uint32_t cf, const Slice& k,
                              const Slice& v) override {
    return Add(cf, k.size() + v.size());
  }
  rocksdb::Status PutBlobIndexCF(uint32_t cf, const Slice& k,
                                 const Slice& v) override {
    return Add(cf, k.size() + v.size());
  }
#if ROCKSDB_MAJOR >= 9
  rocksdb::Status TimedPutCF(uint32_t cf, const Slice& k, const Slice& v,
                             uint64_t) override {
    return Add(cf, k.size() + v.size() + 8);
  }
#endif
  void LogData(const Slice&) override {}

 private:
  rocksdb::Status Add(uint32_t cf, size_t bytes) {
    ids.insert(cf);
    largest = std::max(largest, bytes);
    const uint64_t node = EntryNodeBytes(bytes);
    if (pool_ && node > pool_->chunk_size() / 4) {
      big_bytes += pool_->ExactChunkBytes(node);
    } else {
      small_bytes += node;
    }
    return rocksdb::Status::OK();
  }
  const pmem::Pool* pool_;
};

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
#if ROCKSDB_MAJOR >= 9
  rocksdb::Status Refresh(const rocksdb::Snapshot* snap) override {
    rocksdb::Status s = it_->Refresh(snap);
    publish_();
    return s;
  }
  bool PrepareValue() override { return it_->PrepareValue(); }
#endif
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

#if ROCKSDB_MAJOR >= 9
rocksdb::Status TailingNotSupported(const char* api) {
  return rocksdb::Status::NotSupported(
      std::string("flintkv::OpenDB: ") + api +
      " with ReadOptions::tailing (use NewIterator for a tailing iterator)");
}

// RocksDB 9 has no public error AttributeGroupIterator.
class ErrorAttributeGroupIterator : public rocksdb::AttributeGroupIterator {
 public:
  explicit ErrorAttributeGroupIterator(rocksdb::Status s)
      : status_(std::move(s)) {}
  bool Valid() const override { return false; }
  void SeekToFirst() override {}
  void SeekToLast() override {}
  void Seek(const Slice&) override {}
  void SeekForPrev(const Slice&) override {}
  void Next() override {}
  void Prev() override {}
  Slice key() const override { return Slice(); }
  rocksdb::Status status() const override { return status_; }
  const rocksdb::IteratorAttributeGroups& attribute_groups() const override {
    return groups_;
  }

 private:
  rocksdb::Status status_;
  rocksdb::IteratorAttributeGroups groups_;
};
#endif

class FlintDB : public rocksdb::StackableDB {
 public:
  FlintDB(rocksdb::DB* db, std::shared_ptr<rocks::PoolSession> pool,
          std::shared_ptr<rocksdb::MemTableRepFactory> factory,
          const std::vector<ColumnFamilyHandle*>& handles)
      : rocksdb::StackableDB(db),
        pool_(std::move(pool)),
        factory_(std::move(factory)),
        wm_(pool_->pool()) {
    for (ColumnFamilyHandle* h : handles) cfs_[h->GetID()] = h;
  }
  ~FlintDB() override { Close(); }

  rocksdb::Status Close() override {
    if (closed_) return rocksdb::Status::OK();
    rocksdb::Status s = db_->Close();
    // Aborted (an unreleased snapshot): the DB stays open and in use, so
    // the watermark and the wrapper's ownership of unflushed lists stay.
    if (s.IsAborted()) return s;
    closed_ = true;
    // Nothing is in flight any more: every entry in the pool is published,
    // so plain users of the pool may come next.
    wm_.Disable();
    return s;
  }

  // ---- Column families: every one gets the flintkv memtable ----
  // RocksDB asks the memtable factory to validate options only at DB::Open,
  // not when a column family is created later: the wrapper runs the
  // Open-time checks itself (a family with a timestamp comparator, MemPurge
  // or in-place updates would otherwise be created and its writes lost).
  rocksdb::Status CreateColumnFamily(const rocksdb::ColumnFamilyOptions& o,
                                     const std::string& name,
                                     ColumnFamilyHandle** h) override {
    rocksdb::Status s = Admissible(GetDBOptions(), o);
    if (!s.ok()) return s;
    s = db_->CreateColumnFamily(Durable(o), name, h);
    if (s.ok()) Track(*h);
    return s;
  }
  rocksdb::Status CreateColumnFamilies(
      const rocksdb::ColumnFamilyOptions& o,
      const std::vector<std::string>& names,
      std::vector<ColumnFamilyHandle*>* hs) override {
    rocksdb::Status s = Admissible(GetDBOptions(), o);
    if (!s.ok()) return s;
    s = db_->CreateColumnFamilies(Durable(o), names, hs);
    for (ColumnFamilyHandle* h : *hs) Track(h);
    return s;
  }
  rocksdb::Status CreateColumnFamilies(
      const std::vector<rocksdb::ColumnFamilyDescriptor>& descs,
      std::vector<ColumnFamilyHandle*>* hs) override {
    std::vector<rocksdb::ColumnFamilyDescriptor> d(descs);
    for (auto& cf : d) {
      rocksdb::Status s = Admissible(GetDBOptions(), cf.options);
      if (!s.ok()) return s;
      cf.options = Durable(cf.options);
    }
    rocksdb::Status s = db_->CreateColumnFamilies(d, hs);
    for (ColumnFamilyHandle* h : *hs) Track(h);
    return s;
  }
  // An imported family gets the flintkv memtable too (StackableDB passed the
  // caller's factory through: the family's writes, acknowledged with the
  // WAL off, lived in a DRAM skiplist).
  using rocksdb::StackableDB::CreateColumnFamilyWithImport;
  rocksdb::Status CreateColumnFamilyWithImport(
      const rocksdb::ColumnFamilyOptions& o, const std::string& name,
      const rocksdb::ImportColumnFamilyOptions& io,
      const rocksdb::ExportImportFilesMetaData& meta,
      ColumnFamilyHandle** h) override {
    rocksdb::Status s = Admissible(GetDBOptions(), o);
    if (!s.ok()) return s;
    s = db_->CreateColumnFamilyWithImport(Durable(o), name, io, meta, h);
    if (s.ok()) Track(*h);
    return s;
  }
#if ROCKSDB_MAJOR >= 9
  rocksdb::Status CreateColumnFamilyWithImport(
      const rocksdb::ColumnFamilyOptions& o, const std::string& name,
      const rocksdb::ImportColumnFamilyOptions& io,
      const std::vector<const rocksdb::ExportImportFilesMetaData*>& metas,
      ColumnFamilyHandle** h) override {
    rocksdb::Status s = Admissible(GetDBOptions(), o);
    if (!s.ok()) return s;
    s = db_->CreateColumnFamilyWithImport(Durable(o), name, io, metas, h);
    if (s.ok()) Track(*h);
    return s;
  }
  // ClipColumnFamily writes a DeleteRange with the WAL on straight into the
  // DB, which recovery would then refuse to replay around.
  using rocksdb::StackableDB::ClipColumnFamily;
  rocksdb::Status ClipColumnFamily(ColumnFamilyHandle*, const Slice&,
                                   const Slice&) override {
    return rocksdb::Status::NotSupported(
        "flintkv::OpenDB: ClipColumnFamily (its DeleteRange bypasses the "
        "pool); use DeleteRange and CompactRange");
  }
#endif
  rocksdb::Status DestroyColumnFamilyHandle(ColumnFamilyHandle* h) override {
    {
      std::lock_guard<std::mutex> g(cfs_mu_);
      auto it = cfs_.find(h->GetID());
      if (it != cfs_.end() && it->second == h) cfs_.erase(it);
    }
    return db_->DestroyColumnFamilyHandle(h);
  }

  // ---- Options changed at run time ----
  // RocksDB validates SetOptions/SetDBOptions without asking the memtable
  // factory (ColumnFamilyData::SetOptions), so an option refused at Open
  // (MemPurge) could be switched on later; the wrapper runs the factory's
  // Open-time checks on the options as they would become first.
  using rocksdb::StackableDB::SetOptions;
  rocksdb::Status SetOptions(
      ColumnFamilyHandle* cf,
      const std::unordered_map<std::string, std::string>& m) override {
    std::lock_guard<std::mutex> g(options_mu_);
    rocksdb::ColumnFamilyOptions next;
    // An unparsable map is left to RocksDB, which names the bad option.
    if (rocksdb::GetColumnFamilyOptionsFromMap(rocksdb::ConfigOptions(),
                                               GetOptions(cf), m, &next)
            .ok()) {
      rocksdb::Status s = Admissible(GetDBOptions(), next);
      if (!s.ok()) return s;
    }
    return db_->SetOptions(cf, m);
  }
  rocksdb::Status SetDBOptions(
      const std::unordered_map<std::string, std::string>& m) override {
    std::lock_guard<std::mutex> g(options_mu_);
    rocksdb::DBOptions next;
    if (rocksdb::GetDBOptionsFromMap(rocksdb::ConfigOptions(), GetDBOptions(),
                                     m, &next)
            .ok()) {
      std::vector<ColumnFamilyHandle*> cfs;
      {
        std::lock_guard<std::mutex> c(cfs_mu_);
        for (auto& e : cfs_) cfs.push_back(e.second);
      }
      for (ColumnFamilyHandle* cf : cfs) {
        rocksdb::Status s = Admissible(next, GetOptions(cf));
        if (!s.ok()) return s;
      }
    }
    return db_->SetDBOptions(m);
  }

  // ---- Writes ----
  // Writes with user-defined timestamps: the wrapper refuses timestamp
  // comparators (entries with timestamps are not recovered), so these
  // never apply; say so instead of bypassing the pool.
  rocksdb::Status Put(const WriteOptions&, ColumnFamilyHandle*, const Slice&,
                      const Slice&, const Slice&) override {
    return TimestampsNotSupported();
  }
  rocksdb::Status Delete(const WriteOptions&, ColumnFamilyHandle*, const Slice&,
                         const Slice&) override {
    return TimestampsNotSupported();
  }
  rocksdb::Status SingleDelete(const WriteOptions&, ColumnFamilyHandle*,
                               const Slice&, const Slice&) override {
    return TimestampsNotSupported();
  }
  rocksdb::Status Merge(const WriteOptions&, ColumnFamilyHandle*, const Slice&,
                        const Slice&, const Slice&) override {
    return TimestampsNotSupported();
  }
  static rocksdb::Status TimestampsNotSupported() {
    return rocksdb::Status::NotSupported(
        "flintkv::OpenDB: user-defined timestamps are not supported");
  }

  using rocksdb::StackableDB::Put;
  rocksdb::Status Put(const WriteOptions& wo, ColumnFamilyHandle* cf,
                      const Slice& k, const Slice& v) override {
    if (Large(k.size() + v.size())) {
      rocksdb::WriteBatch b;
      rocksdb::Status s = b.Put(cf, k, v);
      return s.ok() ? LargeWrite(wo, &b) : s;
    }
    Pass p(this);
    return Published(db_->Put(PoolLogged(wo), cf, k, v));
  }
  using rocksdb::StackableDB::Delete;
  rocksdb::Status Delete(const WriteOptions& wo, ColumnFamilyHandle* cf,
                         const Slice& k) override {
    Pass p(this);
    return Published(db_->Delete(PoolLogged(wo), cf, k));
  }
  using rocksdb::StackableDB::SingleDelete;
  rocksdb::Status SingleDelete(const WriteOptions& wo, ColumnFamilyHandle* cf,
                               const Slice& k) override {
    Pass p(this);
    return Published(db_->SingleDelete(PoolLogged(wo), cf, k));
  }
  using rocksdb::StackableDB::Merge;
  rocksdb::Status Merge(const WriteOptions& wo, ColumnFamilyHandle* cf,
                        const Slice& k, const Slice& v) override {
    if (Large(k.size() + v.size())) {
      rocksdb::WriteBatch b;
      rocksdb::Status s = b.Merge(cf, k, v);
      return s.ok() ? LargeWrite(wo, &b) : s;
    }
    Pass p(this);
    return Published(db_->Merge(PoolLogged(wo), cf, k, v));
  }
  using rocksdb::StackableDB::PutEntity;
  rocksdb::Status PutEntity(const WriteOptions& wo, ColumnFamilyHandle* cf,
                            const Slice& k,
                            const rocksdb::WideColumns& columns) override {
    size_t bytes = k.size();
    for (const rocksdb::WideColumn& c : columns) {
      bytes += c.name().size() + c.value().size() + 10;  // + varint lengths
    }
    if (Large(bytes)) {
      rocksdb::WriteBatch b;
      rocksdb::Status s = b.PutEntity(cf, k, columns);
      return s.ok() ? LargeWrite(wo, &b) : s;
    }
    Pass p(this);
    return Published(db_->PutEntity(PoolLogged(wo), cf, k, columns));
  }
  rocksdb::Status Write(const WriteOptions& wo,
                        rocksdb::WriteBatch* b) override {
    if (b->HasDeleteRange()) return RangeDeleteWrite(wo, b);
    if (Large(*b)) return LargeWrite(wo, b);
    Pass p(this);
    return Published(db_->Write(PoolLogged(wo), b));
  }
  using rocksdb::StackableDB::DeleteRange;
  rocksdb::Status DeleteRange(const WriteOptions& wo, ColumnFamilyHandle* cf,
                              const Slice& begin, const Slice& end) override {
    rocksdb::WriteBatch b;
    rocksdb::Status s = b.DeleteRange(cf, begin, end);
    Track(cf);
    return s.ok() ? RangeDeleteWrite(wo, &b) : s;
  }

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
  // Attribute groups write several column families in one batch.
  rocksdb::Status PutEntity(const WriteOptions& wo, const Slice& k,
                            const rocksdb::AttributeGroups& groups) override {
    rocksdb::WriteBatch b;  // Write checks its size (LargeWrite)
    rocksdb::Status s = b.PutEntity(k, groups);
    return s.ok() ? Write(wo, &b) : s;
  }
  // Multi-column-family iterators: as NewIterator for the non-tailing ones
  // (publish once, at creation); a tailing one would need publishing after
  // every move, which these interfaces cannot be wrapped for.
  std::unique_ptr<rocksdb::Iterator> NewCoalescingIterator(
      const ReadOptions& ro,
      const std::vector<ColumnFamilyHandle*>& cfs) override {
    if (ro.tailing) {
      return std::unique_ptr<rocksdb::Iterator>(rocksdb::NewErrorIterator(
          TailingNotSupported("NewCoalescingIterator")));
    }
    Pass p(this);
    auto it = db_->NewCoalescingIterator(ro, cfs);
    Publish();
    return it;
  }
  std::unique_ptr<rocksdb::AttributeGroupIterator> NewAttributeGroupIterator(
      const ReadOptions& ro,
      const std::vector<ColumnFamilyHandle*>& cfs) override {
    if (ro.tailing) {
      return std::make_unique<ErrorAttributeGroupIterator>(
          TailingNotSupported("NewAttributeGroupIterator"));
    }
    Pass p(this);
    auto it = db_->NewAttributeGroupIterator(ro, cfs);
    Publish();
    return it;
  }
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

 private:
  // An ordinary operation's pass through the gate.
  class Pass {
   public:
    explicit Pass(FlintDB* db) : db_(db), shard_(db->gate_.Enter()) {}
    ~Pass() { db_->gate_.Exit(shard_); }

   private:
    FlintDB* db_;
    int shard_;
  };

  rocksdb::Status Admissible(const rocksdb::DBOptions& db,
                             const rocksdb::ColumnFamilyOptions& cf) const {
    rocks::OptionContext ctx;
    ctx.pool = pool_.get();
    ctx.wrapper = true;
    return rocks::CheckOptions(db, cf, ctx);
  }
  rocksdb::ColumnFamilyOptions Durable(rocksdb::ColumnFamilyOptions o) {
    o.memtable_factory = factory_;
    return o;
  }
  void Track(ColumnFamilyHandle* h) {
    std::lock_guard<std::mutex> g(cfs_mu_);
    cfs_.emplace(h->GetID(), h);
  }

  // A write of more than the pool's reserve may not fit beside its own
  // memtable: all its entries go into one memtable, which is flushed only
  // after the write, and RocksDB gives a memtable no way to fail a write,
  // so the writer would wait forever for space only a flush frees
  // (ExplainWriteWait). Smaller writes always find room once older
  // memtables are flushed (the space rule at Open keeps two reserves beside
  // the write buffers), and the memtable waits for that itself.
  bool Large(size_t bytes) const {
    return EntryNodeBytes(bytes) > pool_->pool()->reserve_bytes();
  }
  // O(1): the batch's bytes, and each entry's node header and alignment.
  bool Large(const rocksdb::WriteBatch& b) const {
    return EntryNodeBytes(b.GetDataSize()) +
               b.Count() * (EntryNodeBytes(0) + pmem::kNodeAlign) >
           pool_->pool()->reserve_bytes();
  }
  // Room now for the batch's nodes (small ones with 1/16 and two chunks of
  // carving waste; big ones at their chunks' sizes) and, if its largest
  // node is big, a block for it.
  bool HasRoom(const CfCollector& sum) const {
    pmem::Pool* pool = pool_->pool();
    uint64_t need = sum.big_bytes;
    if (sum.small_bytes) {
      need += sum.small_bytes + sum.small_bytes / 16 + 2 * pool->chunk_size();
    }
    const uint64_t largest = EntryNodeBytes(sum.largest);
    return need <= pool->UnheldBytes() && (largest <= pool->chunk_size() / 4 ||
                                           pool->HasRoomForChunk(largest));
  }
  // With the gate closed (no other write shares the memtable): flushes
  // every column family if the pool has no room for the batch now, and
  // refuses it (nothing written) if there is none even then.
  rocksdb::Status MakeRoom(rocksdb::WriteBatch* b) {
    CfCollector sum(pool_->pool());
    rocksdb::Status s = b->Iterate(&sum);
    if (!s.ok() || HasRoom(sum)) return s;
    std::vector<ColumnFamilyHandle*> handles{db_->DefaultColumnFamily()};
    {
      std::lock_guard<std::mutex> g(cfs_mu_);
      for (auto& e : cfs_) {
        if (e.first != 0) handles.push_back(e.second);
      }
    }
    rocksdb::FlushOptions fo;
    fo.wait = true;
    fo.allow_write_stall = true;
    s = db_->Flush(fo, handles);
    // The flushed memtables give their space back when RocksDB destroys
    // them, just after Flush returns (its job's cleanup), or when the last
    // iterator reading one is gone.
    for (int i = 0; s.ok() && !HasRoom(sum) &&
                    pool_->pool()->RetiredLists() != 0 && i < 10000;
         i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!s.ok() || HasRoom(sum)) return s;
    return rocksdb::Status::InvalidArgument(
        "flintkv::OpenDB: a write of " +
        std::to_string(sum.small_bytes + sum.big_bytes) +
        " bytes of memtable nodes (the largest entry " +
        std::to_string(sum.largest) +
        " bytes of key and value) does not fit in pool " +
        pool_->pool()->path() + " (" +
        std::to_string(pool_->pool()->size() >> 20) +
        " MiB), even with every memtable flushed" +
        (pool_->pool()->RetiredLists() != 0
             ? std::string(" (a flushed one is still read, by an open "
                           "iterator?)")
             : std::string()) +
        ". Nothing was written; split the batch, or a larger pool_size "
        "takes it");
  }
  // Runs the write alone, after MakeRoom.
  rocksdb::Status LargeWrite(const WriteOptions& wo, rocksdb::WriteBatch* b) {
    gate_.Close();
    rocksdb::Status s = MakeRoom(b);
    if (s.ok()) s = db_->Write(PoolLogged(wo), b);
    if (s.ok()) Publish();
    gate_.Open();
    return s;
  }

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
  rocksdb::Status RangeDeleteWrite(const WriteOptions& wo,
                                   rocksdb::WriteBatch* b) {
    CfCollector cfs;
    rocksdb::Status s = b->Iterate(&cfs);
    if (!s.ok()) return s;
    std::vector<ColumnFamilyHandle*> handles;
    {
      std::lock_guard<std::mutex> g(cfs_mu_);
      for (uint32_t id : cfs.ids) {
        auto it = cfs_.find(id);
        if (it == cfs_.end() && id == 0) {
          handles.push_back(db_->DefaultColumnFamily());  // never destroyed
          continue;
        }
        if (it == cfs_.end()) {
          return rocksdb::Status::NotSupported(
              "flintkv: DeleteRange in column family id " + std::to_string(id) +
              ": the wrapper has no handle for it (open it through "
              "flintkv::OpenDB or CreateColumnFamily on the wrapper)");
        }
        handles.push_back(it->second);
      }
    }
    if (handles.size() > 1 && !db_->GetDBOptions().atomic_flush) {
      return rocksdb::Status::NotSupported(
          "flintkv: a WriteBatch with DeleteRange that spans several column "
          "families needs option atomic_flush=true to stay all-or-nothing");
    }
    gate_.Close();
    rocksdb::FlushOptions fo;
    fo.wait = true;
    fo.allow_write_stall = true;
    s = db_->Flush(fo, handles);
    if (s.ok() && Large(*b)) s = MakeRoom(b);
    if (s.ok()) s = db_->Write(PoolLogged(wo), b);
    // The gate is closed: no other write took a sequence number since.
    const uint64_t seq = db_->GetLatestSequenceNumber();
    if (s.ok()) s = db_->Flush(fo, handles);
    // The flush made the tombstone durable in an SST file, but no rep saw
    // its sequence number (a memtable of only range tombstones reports
    // none): raise the floor by hand, or a copy of the DB taken before the
    // DeleteRange would pass as the state the later lists extend (S3).
    if (s.ok()) rocks::OnRangeTombstonesFlushed(*factory_, seq);
    if (s.ok()) Publish();
    gate_.Open();
    return s;
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
    return new PublishingIterator(it, tailing, [this] {
      Pass p(this);
      Publish();
    });
  }

  std::shared_ptr<rocks::PoolSession> pool_;
  std::shared_ptr<rocksdb::MemTableRepFactory> factory_;
  Watermark wm_;
  std::atomic<uint64_t> durable_{0};
  Gate gate_;
  std::mutex cfs_mu_;
  std::mutex options_mu_;  // validate + apply as one step
  std::map<uint32_t, ColumnFamilyHandle*> cfs_;
  bool closed_ = false;
};

}  // namespace

rocksdb::DB* NewFlintDB(rocksdb::DB* db, std::shared_ptr<rocks::PoolSession> h,
                        std::shared_ptr<rocksdb::MemTableRepFactory> factory,
                        const std::vector<rocksdb::ColumnFamilyHandle*>& cfs) {
  return new FlintDB(db, std::move(h), std::move(factory), cfs);
}

}  // namespace flintkv

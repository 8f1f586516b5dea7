// FlintDB, the wrapper flintkv::OpenDB returns (recovery/flint_db.h): the
// reads of PublishingDB (recovery/publishing_db.h), and the writes, column
// families and options of a DB whose log is the pool; writes that must run
// alone go through WriteAdmission (recovery/write_admission.h).
// Thread safety: as rocksdb::DB.
#include "recovery/flint_db.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memtable/rocksdb/recovery_port.h"
#include "recovery/publishing_db.h"
#include "recovery/write_admission.h"
#include "rocksdb/convenience.h"
#include "rocksdb/version.h"

namespace flintkv {
namespace {

using recovery::PoolLogged;
using rocksdb::ColumnFamilyHandle;
using rocksdb::Slice;
using rocksdb::WriteOptions;

class FlintDB : public recovery::PublishingDB {
 public:
  FlintDB(rocksdb::DB* db, const rocks::RecoveryPort& port,
          std::shared_ptr<rocksdb::MemTableRepFactory> factory,
          const std::vector<ColumnFamilyHandle*>& handles)
      : recovery::PublishingDB(db, port.pool()),
        port_(port),
        factory_(std::move(factory)),
        admission_(db, port_.pool(), factory_.get(), &cfs_, gate(),
                   [this] { Publish(); }) {
    for (ColumnFamilyHandle* h : handles) cfs_.Track(h);
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
    watermark()->Disable();
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
    if (s.ok()) cfs_.Track(*h);
    return s;
  }
  rocksdb::Status CreateColumnFamilies(
      const rocksdb::ColumnFamilyOptions& o,
      const std::vector<std::string>& names,
      std::vector<ColumnFamilyHandle*>* hs) override {
    rocksdb::Status s = Admissible(GetDBOptions(), o);
    if (!s.ok()) return s;
    s = db_->CreateColumnFamilies(Durable(o), names, hs);
    for (ColumnFamilyHandle* h : *hs) cfs_.Track(h);
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
    for (ColumnFamilyHandle* h : *hs) cfs_.Track(h);
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
    if (s.ok()) cfs_.Track(*h);
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
    if (s.ok()) cfs_.Track(*h);
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
    cfs_.Forget(h);
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
      for (ColumnFamilyHandle* cf : cfs_.All()) {
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
    if (admission_.Large(k.size() + v.size())) {
      rocksdb::WriteBatch b;
      rocksdb::Status s = b.Put(cf, k, v);
      return s.ok() ? admission_.LargeWrite(wo, &b) : s;
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
    if (admission_.Large(k.size() + v.size())) {
      rocksdb::WriteBatch b;
      rocksdb::Status s = b.Merge(cf, k, v);
      return s.ok() ? admission_.LargeWrite(wo, &b) : s;
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
    if (admission_.Large(bytes)) {
      rocksdb::WriteBatch b;
      rocksdb::Status s = b.PutEntity(cf, k, columns);
      return s.ok() ? admission_.LargeWrite(wo, &b) : s;
    }
    Pass p(this);
    return Published(db_->PutEntity(PoolLogged(wo), cf, k, columns));
  }
  rocksdb::Status Write(const WriteOptions& wo,
                        rocksdb::WriteBatch* b) override {
    if (b->HasDeleteRange()) return admission_.RangeDeleteWrite(wo, b);
    if (admission_.Large(*b)) return admission_.LargeWrite(wo, b);
    Pass p(this);
    return Published(db_->Write(PoolLogged(wo), b));
  }
  using rocksdb::StackableDB::DeleteRange;
  rocksdb::Status DeleteRange(const WriteOptions& wo, ColumnFamilyHandle* cf,
                              const Slice& begin, const Slice& end) override {
    rocksdb::WriteBatch b;
    rocksdb::Status s = b.DeleteRange(cf, begin, end);
    cfs_.Track(cf);
    return s.ok() ? admission_.RangeDeleteWrite(wo, &b) : s;
  }
#if ROCKSDB_MAJOR >= 9
  // Attribute groups write several column families in one batch.
  rocksdb::Status PutEntity(const WriteOptions& wo, const Slice& k,
                            const rocksdb::AttributeGroups& groups) override {
    rocksdb::WriteBatch b;  // Write checks its size (LargeWrite)
    rocksdb::Status s = b.PutEntity(k, groups);
    return s.ok() ? Write(wo, &b) : s;
  }
#endif

 private:
  rocksdb::Status Admissible(const rocksdb::DBOptions& db,
                             const rocksdb::ColumnFamilyOptions& cf) const {
    return port_.CheckOptions(db, cf, rocks::OpenKind::kRecoverEveryOpen);
  }
  rocksdb::ColumnFamilyOptions Durable(rocksdb::ColumnFamilyOptions o) {
    o.memtable_factory = factory_;
    return o;
  }

  rocks::RecoveryPort port_;  // keeps the pool's session alive
  std::shared_ptr<rocksdb::MemTableRepFactory> factory_;
  recovery::FamilyHandles cfs_;
  recovery::WriteAdmission admission_;
  std::mutex options_mu_;  // validate + apply as one step
  bool closed_ = false;
};

}  // namespace

rocksdb::DB* NewFlintDB(rocksdb::DB* db, const rocks::RecoveryPort& port,
                        std::shared_ptr<rocksdb::MemTableRepFactory> factory,
                        const std::vector<rocksdb::ColumnFamilyHandle*>& cfs) {
  return new FlintDB(db, port, std::move(factory), cfs);
}

}  // namespace flintkv

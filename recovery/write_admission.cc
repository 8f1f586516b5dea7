#include "recovery/write_admission.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "memtable/rocksdb/recovery_port.h"
#include "pmem/layout.h"
#include "pmem/pool.h"
#include "recovery/sequence_clock.h"
#include "rocksdb/version.h"

namespace flintkv {
namespace recovery {
namespace {

using rocksdb::ColumnFamilyHandle;
using rocksdb::Slice;
using rocksdb::WriteOptions;

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

// Room now for the batch's nodes (small ones with 1/16 and two chunks of
// carving waste; big ones at their chunks' sizes) and, if its largest
// node is big, a block for it.
bool HasRoom(pmem::Pool* pool, const CfCollector& sum) {
  uint64_t need = sum.big_bytes;
  if (sum.small_bytes) {
    need += sum.small_bytes + sum.small_bytes / 16 + 2 * pool->chunk_size();
  }
  const uint64_t largest = EntryNodeBytes(sum.largest);
  return need <= pool->UnheldBytes() &&
         (largest <= pool->chunk_size() / 4 || pool->HasRoomForChunk(largest));
}

}  // namespace

void FamilyHandles::Track(ColumnFamilyHandle* h) {
  std::lock_guard<std::mutex> g(mu_);
  cfs_.emplace(h->GetID(), h);
}

void FamilyHandles::Forget(ColumnFamilyHandle* h) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = cfs_.find(h->GetID());
  if (it != cfs_.end() && it->second == h) cfs_.erase(it);
}

std::vector<ColumnFamilyHandle*> FamilyHandles::All() const {
  std::vector<ColumnFamilyHandle*> all;
  std::lock_guard<std::mutex> g(mu_);
  for (auto& e : cfs_) all.push_back(e.second);
  return all;
}

rocksdb::Status FamilyHandles::Of(const std::set<uint32_t>& ids,
                                  rocksdb::DB* db,
                                  std::vector<ColumnFamilyHandle*>* out) const {
  std::lock_guard<std::mutex> g(mu_);
  for (uint32_t id : ids) {
    auto it = cfs_.find(id);
    if (it == cfs_.end() && id == 0) {
      out->push_back(db->DefaultColumnFamily());  // never destroyed
      continue;
    }
    if (it == cfs_.end()) {
      return rocksdb::Status::NotSupported(
          "flintkv: DeleteRange in column family id " + std::to_string(id) +
          ": the wrapper has no handle for it (open it through "
          "flintkv::OpenDB or CreateColumnFamily on the wrapper)");
    }
    out->push_back(it->second);
  }
  return rocksdb::Status::OK();
}

WriteAdmission::WriteAdmission(rocksdb::DB* db, pmem::Pool* pool,
                               const rocksdb::MemTableRepFactory* factory,
                               FamilyHandles* cfs, Gate* gate,
                               std::function<void()> publish)
    : db_(db),
      pool_(pool),
      factory_(factory),
      cfs_(cfs),
      gate_(gate),
      publish_(std::move(publish)) {}

bool WriteAdmission::Large(size_t bytes) const {
  return EntryNodeBytes(bytes) > pool_->reserve_bytes();
}

bool WriteAdmission::Large(const rocksdb::WriteBatch& b) const {
  return EntryNodeBytes(b.GetDataSize()) +
             b.Count() * (EntryNodeBytes(0) + pmem::kNodeAlign) >
         pool_->reserve_bytes();
}

rocksdb::Status WriteAdmission::MakeRoom(rocksdb::WriteBatch* b) {
  CfCollector sum(pool_);
  rocksdb::Status s = b->Iterate(&sum);
  if (!s.ok() || HasRoom(pool_, sum)) return s;
  std::vector<ColumnFamilyHandle*> handles{db_->DefaultColumnFamily()};
  for (ColumnFamilyHandle* h : cfs_->All()) {
    if (h->GetID() != 0) handles.push_back(h);
  }
  rocksdb::FlushOptions fo;
  fo.wait = true;
  fo.allow_write_stall = true;
  s = db_->Flush(fo, handles);
  // The flushed memtables give their space back when RocksDB destroys
  // them, just after Flush returns (its job's cleanup), or when the last
  // iterator reading one is gone.
  for (int i = 0; s.ok() && !HasRoom(pool_, sum) &&
                  pool_->RetiredLists() != 0 && i < 10000;
       i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!s.ok() || HasRoom(pool_, sum)) return s;
  return rocksdb::Status::InvalidArgument(
      "flintkv::OpenDB: a write of " +
      std::to_string(sum.small_bytes + sum.big_bytes) +
      " bytes of memtable nodes (the largest entry " +
      std::to_string(sum.largest) +
      " bytes of key and value) does not fit in pool " + pool_->path() + " (" +
      std::to_string(pool_->size() >> 20) +
      " MiB), even with every memtable flushed" +
      (pool_->RetiredLists() != 0
           ? std::string(" (a flushed one is still read, by an open "
                         "iterator?)")
           : std::string()) +
      ". Nothing was written; split the batch, or a larger pool_size "
      "takes it");
}

rocksdb::Status WriteAdmission::LargeWrite(const WriteOptions& wo,
                                           rocksdb::WriteBatch* b) {
  gate_->Close();
  rocksdb::Status s = MakeRoom(b);
  if (s.ok()) s = db_->Write(PoolLogged(wo), b);
  if (s.ok()) publish_();
  gate_->Open();
  return s;
}

rocksdb::Status WriteAdmission::RangeDeleteWrite(const WriteOptions& wo,
                                                 rocksdb::WriteBatch* b) {
  CfCollector cfs;
  rocksdb::Status s = b->Iterate(&cfs);
  if (!s.ok()) return s;
  std::vector<ColumnFamilyHandle*> handles;
  s = cfs_->Of(cfs.ids, db_, &handles);
  if (!s.ok()) return s;
  if (handles.size() > 1 && !db_->GetDBOptions().atomic_flush) {
    return rocksdb::Status::NotSupported(
        "flintkv: a WriteBatch with DeleteRange that spans several column "
        "families needs option atomic_flush=true to stay all-or-nothing");
  }
  gate_->Close();
  rocksdb::FlushOptions fo;
  fo.wait = true;
  fo.allow_write_stall = true;
  s = db_->Flush(fo, handles);
  if (s.ok() && Large(*b)) s = MakeRoom(b);
  if (s.ok()) s = db_->Write(PoolLogged(wo), b);
  if (s.ok()) s = db_->Flush(fo, handles);
  // The flush made the tombstone durable in an SST file, but no rep saw
  // its sequence number (a memtable of only range tombstones reports
  // none): raise the floor by hand, or a copy of the DB taken before the
  // DeleteRange would pass as the state the later lists extend (S3). To
  // the newest number in a file, not LastSequence: an empty range, or a
  // Put and SingleDelete the flush dropped, take numbers no file holds,
  // and a floor above the MANIFEST's would refuse this very DB after a
  // kill.
  if (s.ok()) {
    rocks::RecoveryPort::RangeTombstonesFlushed(*factory_, NewestFileSeq(db_));
  }
  if (s.ok()) publish_();
  gate_->Open();
  return s;
}

}  // namespace recovery
}  // namespace flintkv

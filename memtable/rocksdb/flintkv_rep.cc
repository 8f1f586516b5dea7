#include "memtable/rocksdb/flintkv_rep.h"

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "memtable/coding.h"
#include "memtable/rocksdb/iterator_cache.h"
#include "memtable/rocksdb/lookup_key_layout.h"
#include "memtable/rocksdb/space_wait.h"
#include "memtable/thread_id.h"
#include "rocksdb/env.h"
#include "rocksdb/version.h"
#include "rocksdb_common/crash_point.h"
#include "rocksdb_common/memtable_meta.h"

namespace flintkv {
namespace rocks {
namespace {

memtable::SkipListOptions RepListOptions(uint64_t chunk_size,
                                         memtable::IndexArena* index_arena) {
  memtable::SkipListOptions o;
  o.index_arena = index_arena;
  o.unique_keys = true;         // internal keys (user key, seq, type)
  o.collapse_versions = false;  // RocksDB wants every entry
  o.chunk_size = chunk_size;
  o.write_stats = false;  // RocksDB accounts the memtable's DRAM
  return o;
}

pmem::NvmNode* NodeOf(rocksdb::KeyHandle handle) {
  return reinterpret_cast<pmem::NvmNode*>(static_cast<char*>(handle)) - 1;
}

// Memtable key (varint32 length + internal key) for a Seek target.
const char* EncodeTarget(const rocksdb::Slice& internal_key,
                         const char* memtable_key, std::string* buf) {
  if (memtable_key) return memtable_key;
  buf->clear();
  char len[memtable::kMaxVarint32Bytes];
  char* end =
      memtable::EncodeVarint32(len, static_cast<uint32_t>(internal_key.size()));
  buf->append(len, end - len);
  buf->append(internal_key.data(), internal_key.size());
  return buf->data();
}

// RocksDB filters memtable entries by sequence number itself, and a
// memtable iterator must see entries inserted after it was created
// (tailing iterators keep theirs across Seeks; SkipListRep's do). So
// iterators and Get read every committed (linked) node rather than a
// version snapshot; only uncommitted nodes (version MAX) stay hidden.
constexpr uint64_t kAllCommitted = pmem::kUncommittedVersion - 1;

#if ROCKSDB_MAJOR >= 9
// paranoid_memory_checks (RocksDB 9): the keys a read visits must be in
// order, as RocksDB's skiplist checks; a flipped bit in a PMEM key shows up
// here instead of as a wrong answer.
rocksdb::Status OutOfOrder(const char* before, const char* after,
                           bool allow_data_in_errors) {
  std::string msg = "flintkv: memtable keys out of order";
  if (allow_data_in_errors) {
    auto hex = [](const char* memtable_key) {
      return rocksdb::GetLengthPrefixedSlice(memtable_key).ToString(true);
    };
    msg += ": " + hex(before) + " before " + hex(after);
  }
  return rocksdb::Status::Corruption(msg);
}
#endif

class RepIterator : public rocksdb::MemTableRep::Iterator {
 public:
  RepIterator(const List* list, const RocksKeyComparator* cmp, bool in_block)
      : it_(list, kAllCommitted), cmp_(cmp), in_block_(in_block) {}
  ~RepIterator() override {
    // RocksDB's "arena" iterators are destroyed but never freed: park the
    // block (see iterator_cache.h).
    if (in_block_) ReleaseIteratorBlock(this);
  }
  // Invalid after a *AndValidate found keys out of order, until the next
  // Seek (MemTableRep::Iterator's contract).
  bool Valid() const override { return !corrupt_ && it_.Valid(); }
  const char* key() const override { return it_.node()->pnode->data(); }
  void Next() override { it_.Next(); }
  void Prev() override { it_.Prev(); }
  void Seek(const rocksdb::Slice& ikey, const char* mkey) override {
    corrupt_ = false;
    it_.Seek(EncodeTarget(ikey, mkey, &tmp_));
  }
  void SeekForPrev(const rocksdb::Slice& ikey, const char* mkey) override {
    corrupt_ = false;
    it_.SeekForPrev(EncodeTarget(ikey, mkey, &tmp_));
  }
  void SeekToFirst() override {
    corrupt_ = false;
    it_.SeekToFirst();
  }
  void SeekToLast() override {
    corrupt_ = false;
    it_.SeekToLast();
  }
#if ROCKSDB_MAJOR >= 9
  rocksdb::Status NextAndValidate(bool allow_data_in_errors) override {
    const char* before = key();
    Next();
    if (Valid() && cmp_->Compare(before, key()) >= 0) {
      return Corrupt(before, key(), allow_data_in_errors);
    }
    return rocksdb::Status::OK();
  }
  rocksdb::Status PrevAndValidate(bool allow_data_in_errors) override {
    const char* after = key();
    Prev();
    if (Valid() && cmp_->Compare(key(), after) >= 0) {
      return Corrupt(key(), after, allow_data_in_errors);
    }
    return rocksdb::Status::OK();
  }
  rocksdb::Status SeekAndValidate(const rocksdb::Slice& ikey, const char* mkey,
                                  bool allow_data_in_errors) override {
    corrupt_ = false;
    const char* target = EncodeTarget(ikey, mkey, &tmp_);
    it_.Seek(target);
    if (Valid() && cmp_->Compare(key(), target) < 0) {
      return Corrupt(target, key(), allow_data_in_errors);
    }
    return rocksdb::Status::OK();
  }
#endif

 private:
#if ROCKSDB_MAJOR >= 9
  rocksdb::Status Corrupt(const char* before, const char* after,
                          bool allow_data_in_errors) {
    rocksdb::Status s = OutOfOrder(before, after, allow_data_in_errors);
    corrupt_ = true;
    return s;
  }
#endif
  List::Iterator it_;
  const RocksKeyComparator* cmp_;
  bool in_block_;
  bool corrupt_ = false;
  std::string tmp_;
};
static_assert(sizeof(RepIterator) <= kIteratorBlockSize,
              "iterator must fit a cache block");

void Sleep(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

FlintRep::FlintRep(const rocksdb::MemTableRep::KeyComparator& cmp,
                   rocksdb::Allocator* allocator,
                   std::shared_ptr<PoolSession> pool, pmem::ListRoot* root,
                   rocksdb::Logger* logger)
    : rocksdb::MemTableRep(allocator),
      cmp_(cmp),
      pool_(std::move(pool)),
      root_(root),
      logger_(logger),
      list_(&cmp_, pool_->pool(), root,
            RepListOptions(pool_->pool()->chunk_size(),
                           allocator ? &index_arena_ : nullptr)) {
  pool_->OnListCreated(root_);
  if (logger_) {
    rocksdb::Log(rocksdb::InfoLogLevel::INFO_LEVEL, logger_,
                 "flintkv: memtable list %llu in %s; index key prefixes %s",
                 static_cast<unsigned long long>(root_->list_id),
                 pool_->pool()->path().c_str(),
                 cmp_.prefix_ordered() ? "on (BytewiseComparator)"
                 : MemTableComparatorRecognised()
                     ? "off (user comparator is not BytewiseComparator())"
                     : "off (RocksDB's memtable comparator not recognised: "
                       "its vtable symbol is not visible)");
  }
}

void* FlintRep::IndexArenaOfRep::Allocate(size_t size) {
  // MemTableRep::Allocate hands out unaligned arena bytes (ConcurrentArena
  // carves them from a block's tail): take 7 more and align the node.
  constexpr uintptr_t kAlign = alignof(memtable::IndexNode);
  char* buf = nullptr;
  rep_->rocksdb::MemTableRep::Allocate(size + kAlign - 1, &buf);
  if (!buf) return nullptr;
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf);
  return reinterpret_cast<void*>((p + kAlign - 1) & ~(kAlign - 1));
}

FlintRep::~FlintRep() {
  const size_t entries = list_.NumEntries();
  std::string kept;
  // S4: kept unless flushed, empty, or its life logs every write.
  pool_->OnListDestroyed(root_, flushed_.load(std::memory_order_acquire),
                         entries == 0, &kept);
  if (!kept.empty() && logger_) {
    rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, logger_,
                 "flintkv: memtable list %llu with %zu entries stays in pool "
                 "%s unflushed; %s",
                 static_cast<unsigned long long>(root_->list_id), entries,
                 pool_->pool()->path().c_str(), kept.c_str());
  }
}

std::string ExplainWriteWait(const pmem::Pool& pool, uint64_t list_id,
                             size_t entry_bytes) {
  if (pool.ChunkBytesOutside(list_id) != 0) return WaitsForFlushes("write");
  // Only this memtable holds chunks, and it cannot be flushed while one of
  // its writes is pending: no space will come (a single entry too large
  // for what the pool has beside this memtable).
  return "a write of a " + std::to_string(entry_bytes) +
         "-byte entry waits for pool space that cannot come: no other "
         "memtable is left to flush, and this one (" +
         std::to_string(pool.BytesInUse() >> 10) +
         " KiB of the pool in use) is flushed only after the write. RocksDB "
         "gives a memtable no way to fail a write, so the writing thread "
         "stays blocked. Acknowledged writes are safe: stop the process, "
         "run `flintkv_tool recover`, then give the DB a larger pool "
         "(pool_dir, pool_size), or write less at once (a large WriteBatch "
         "goes into one memtable). flintkv::OpenDB refuses a write that "
         "cannot fit, before it reaches the memtable";
}

Status FlintRep::AllocateNode(size_t len, pmem::NvmNode** node) {
  Status s = list_.AllocateNode(len, node, false);
  if (s.ok()) return s;
  if (s.IsNoSpace()) {
    // Ask RocksDB for a memtable switch (ApproximateMemoryUsage), and let
    // writes already under way finish from the pool's reserve. A write
    // cannot fail here: RocksDB treats a rejected memtable insert as a
    // duplicate key and asserts.
    pressure_.store(true, std::memory_order_relaxed);
    reserve_used_.store(true, std::memory_order_relaxed);
    s = list_.AllocateNode(len, node, true);
    if (s.ok()) return s;
  }
  return WaitForPoolSpace(
      pool_.get(), logger_, s,
      [&] { return list_.AllocateNode(len, node, true); },
      [&] {
        // Held flushed memtables, not the write buffers, are what keeps
        // the space: say so rather than blame pool_size.
        const std::string pinned = pool_->PinnedNote();
        return pinned.empty()
                   ? ExplainWriteWait(*pool_->pool(), root_->list_id, len)
                   : "write waits for pool space: " + pinned;
      });
}

rocksdb::KeyHandle FlintRep::Allocate(const size_t len, char** buf) {
  pmem::NvmNode* node = nullptr;
  AllocateNode(len, &node);  // retries until it succeeds
  *buf = node->data();
  return *buf;
}

bool FlintRep::InsertKey(rocksdb::KeyHandle handle) {
  pmem::NvmNode* node = NodeOf(handle);
  uint32_t ikey_len = 0;
  const char* data = node->data();
  const char* p = memtable::DecodeVarint32(
      data, data + memtable::kMaxVarint32Bytes, &ikey_len);
  List::SealNode(node, static_cast<uint32_t>(p - data) + ikey_len, 0);
  if (!has_entry_.load(std::memory_order_relaxed)) {
    has_entry_.store(true, std::memory_order_relaxed);
  }
  if (ikey_len >= 8) {
    uint64_t packed;  // (sequence << 8 | type), little-endian
    std::memcpy(&packed, p + ikey_len - 8, sizeof(packed));
    const int id = memtable::ThreadId::Get();
    std::atomic<uint64_t>& m = max_seq_[(id < 0 ? 0 : id) % kSeqSlots].max;
    uint64_t cur = m.load(std::memory_order_relaxed);
    while (
        (packed >> 8) > cur &&
        !m.compare_exchange_weak(cur, packed >> 8, std::memory_order_relaxed)) {
    }
    constexpr uint8_t kTypeSingleDeletion = 0x7;  // db/dbformat.h
    if ((packed & 0xff) == kTypeSingleDeletion &&
        !single_delete_.load(std::memory_order_relaxed)) {
      single_delete_.store(true, std::memory_order_relaxed);
    }
  }
  memtable::InsertResult result;
  Status s = list_.Insert(node, &result);
  while (!s.ok()) {  // DRAM exhaustion of a malloc'ed index (RocksDB's
                     // arena throws bad_alloc instead, as for its skiplist)
    Sleep(1);
    s = list_.Insert(node, &result);
  }
  return result == memtable::InsertResult::kOk;
}

bool FlintRep::Contains(const char* key) const {
  return list_.Find(key, kAllCommitted) != nullptr;
}

void FlintRep::MarkReadOnly() {
  // RocksDB asserts that a sealed memtable's usage never changes, and it
  // added the figure to its totals just before sealing: freeze that figure.
  sealed_usage_.store(ApproximateMemoryUsage(), std::memory_order_release);
  pool_->pool()->SetListState(root_, pmem::kListSealed);
  pool_->OnListSealed(root_);  // confirms the successor (S6)
}

bool FlintRep::IsSnapshotSupported() const {
  pool_->OnSnapshotQuery(root_);
  return true;
}

void FlintRep::MarkFlushed() {
  // Called after the SST and the MANIFEST edit are synced: the list must
  // never be recovered again (P6). Readers may still use it; its space is
  // reclaimed when RocksDB destroys the memtable.
  // Tests: killed installed, not yet retired.
  FLINTKV_TEST_CRASH_POINT("flintkv_mark_flushed");
  uint64_t max_seq = 0;  // every insert returned before the flush began
  for (const SeqSlot& s : max_seq_) {
    max_seq = std::max(max_seq, s.max.load(std::memory_order_relaxed));
  }
  if (max_seq != 0 && !single_delete_.load(std::memory_order_relaxed)) {
    pool_->OnListFlushed(MetaOf(root_)->incarnation, max_seq);
  }
  pool_->pool()->SetListState(root_, pmem::kListRetired);
  flushed_.store(true, std::memory_order_release);
}

void FlintRep::Get(const rocksdb::LookupKey& k, void* callback_args,
                   bool (*callback_func)(void* arg, const char* entry)) {
  List::Iterator it(&list_, kAllCommitted);
  for (it.Seek(MemtableKeyOf(k));
       it.Valid() && callback_func(callback_args, it.node()->pnode->data());
       it.Next()) {
  }
}

#if ROCKSDB_MAJOR >= 9
rocksdb::Status FlintRep::GetAndValidate(
    const rocksdb::LookupKey& k, void* callback_args,
    bool (*callback_func)(void* arg, const char* entry),
    bool allow_data_in_errors) {
  const char* target = MemtableKeyOf(k);
  List::Iterator it(&list_, kAllCommitted);
  it.Seek(target);
  const char* before = target;
  bool first = true;
  while (it.Valid()) {
    const char* entry = it.node()->pnode->data();
    // The first entry may equal the target; later ones must grow.
    if (first ? cmp_.Compare(entry, before) < 0
              : cmp_.Compare(before, entry) >= 0) {
      return OutOfOrder(before, entry, allow_data_in_errors);
    }
    if (!callback_func(callback_args, entry)) break;
    before = entry;
    first = false;
    it.Next();
  }
  return rocksdb::Status::OK();
}
#endif

uint64_t FlintRep::ApproximateNumEntries(const rocksdb::Slice& start_ikey,
                                         const rocksdb::Slice& end_ikey) {
  std::string a, b;
  return list_.CountRange(EncodeTarget(start_ikey, nullptr, &a),
                          EncodeTarget(end_ikey, nullptr, &b));
}

void FlintRep::UniqueRandomSample(const uint64_t num_entries,
                                  const uint64_t target_sample_size,
                                  std::unordered_set<const char*>* entries) {
  // Reservoir sample over one pass (used by MemPurge only).
  std::vector<const char*> sample;
  std::mt19937_64 rng(num_entries ^ target_sample_size);
  List::Iterator it(&list_, list_.VisibleVersion());
  uint64_t seen = 0;
  for (it.SeekToFirst(); it.Valid(); it.Next(), seen++) {
    const char* e = it.node()->pnode->data();
    if (sample.size() < target_sample_size) {
      sample.push_back(e);
    } else {
      uint64_t j = rng() % (seen + 1);
      if (j < target_sample_size) sample[j] = e;
    }
  }
  entries->insert(sample.begin(), sample.end());
}

size_t FlintRep::ApproximateMemoryUsage() {
  size_t frozen = sealed_usage_.load(std::memory_order_acquire);
  if (frozen) return frozen;
  size_t usage = list_.PmemBytesUsed() + list_.DramBytes();
  // An empty memtable never reports pressure: RocksDB asserts that a new
  // memtable does not ask for a flush, and flushing it would free nothing.
  if (!has_entry_.load(std::memory_order_relaxed)) return usage;
  if (pool_->pool()->ApproxFreeBytes() < pool_->space().pressure_free) {
    pressure_.store(true, std::memory_order_relaxed);
    // Say why in the DB's LOG: held iterators that keep flushed memtables
    // in the pool make memtables switch early and writes slow down, with
    // nothing else showing it.
    if (logger_ && pool_->PressureNoticeDue(kSpaceWaitLogInterval)) {
      const std::string pinned = pool_->PinnedNote();
      if (!pinned.empty()) {
        rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, logger_,
                     "flintkv: memtables switch early, the pool is short of "
                     "space: %s",
                     pinned.c_str());
      }
    }
  }
  if (pressure_.load(std::memory_order_relaxed)) {
    // Past write_buffer_size: RocksDB schedules a flush and switches.
    usage = std::max<size_t>(usage, 2 * pool_->write_buffer_size_hint());
  }
  if (reserve_used_.load(std::memory_order_relaxed)) {
    // Writes reached the reserve, so the pressure above did not switch this
    // memtable: RocksDB's write_buffer_size is above the hint (SetOptions
    // raises it without the factory hearing of it; writers then waited
    // forever for a switch that never came:
    // PlainFactoryWritesGoOnAfterSetOptionsRaisesWriteBuffer). Report past
    // any write buffer, while the reserve still lets this write finish.
    usage = std::max<size_t>(usage, kPastAnyWriteBuffer);
  }
  return usage;
}

rocksdb::MemTableRep::Iterator* FlintRep::GetIterator(rocksdb::Arena* arena) {
  if (arena) {
    return new (AcquireIteratorBlock()) RepIterator(&list_, &cmp_, true);
  }
  return new RepIterator(&list_, &cmp_, false);
}

}  // namespace rocks
}  // namespace flintkv

// The standalone engine: flintkv::Store on one DurableSkipList in a pool,
// with its version GC (memtable/version_gc.h): every list access runs in a
// Reclaimer guard or pin when the GC is on.
#include "flintkv/store.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>

#include "memtable/durable_skiplist.h"
#include "memtable/reclaim.h"
#include "memtable/version_gc.h"
#include "pmem/persist.h"
#include "pmem/pool.h"

namespace flintkv {

void WriteBatch::Put(std::string_view key, std::string_view value) {
  ops_.push_back({false, std::string(key), std::string(value)});
}
void WriteBatch::Delete(std::string_view key) {
  ops_.push_back({true, std::string(key), std::string()});
}

namespace {

using memtable::DurableSkipList;
using memtable::Reclaimer;
using List = DurableSkipList<pmem::PmemPersist>;
using Gc = memtable::VersionGc<pmem::PmemPersist>;

// A snapshot whose version the GC keeps while it lives. Holds the
// Reclaimer, not the store, so it may outlive Close().
class PinnedSnapshot : public Snapshot {
 public:
  PinnedSnapshot(uint64_t version, std::shared_ptr<Reclaimer> rec, uint64_t pin)
      : Snapshot(version), rec_(std::move(rec)), pin_(pin) {}
  ~PinnedSnapshot() override { rec_->RemovePin(pin_); }

 private:
  std::shared_ptr<Reclaimer> rec_;
  uint64_t pin_;
};

// A snapshot of a store without GC: nothing to pin.
class VersionSnapshot : public Snapshot {
 public:
  explicit VersionSnapshot(uint64_t version) : Snapshot(version) {}
};

// An iterator that could not be made: never valid, says why.
class ErrorIterator : public Iterator {
 public:
  explicit ErrorIterator(Status s) : status_(std::move(s)) {}
  bool Valid() const override { return false; }
  void SeekToFirst() override {}
  void SeekToLast() override {}
  void Seek(std::string_view) override {}
  void SeekForPrev(std::string_view) override {}
  void Next() override {}
  void Prev() override {}
  std::string_view key() const override { return {}; }
  std::string_view value() const override { return {}; }
  Status status() const override { return status_; }

 private:
  Status status_;
};

// A length-prefixed key built on the stack for short keys.
class PrefixedKey {
 public:
  explicit PrefixedKey(std::string_view key) {
    size_t n = memtable::VarintLength(key.size()) + key.size();
    char* p = n <= sizeof(inline_) ? inline_ : (heap_ = new char[n]);
    char* k = memtable::EncodeVarint32(p, static_cast<uint32_t>(key.size()));
    if (!key.empty()) std::memcpy(k, key.data(), key.size());  // UB if null
    data_ = p;
  }
  ~PrefixedKey() { delete[] heap_; }
  const char* data() const { return data_; }

 private:
  char inline_[128];
  char* heap_ = nullptr;
  const char* data_;
};

std::string_view UserKey(const memtable::IndexNode* n) {
  return memtable::PrefixedKey(n->key());
}
std::string_view UserValue(const memtable::IndexNode* n) {
  const pmem::NvmNode* p = n->pnode;
  return std::string_view(p->data() + p->key_size, p->data_size - p->key_size);
}

class StoreIterator : public Iterator {
 public:
  // rec != nullptr: pin (pinned by the caller) is released on destruction.
  StoreIterator(const List* list, uint64_t vv, std::shared_ptr<Reclaimer> rec,
                uint64_t pin)
      : it_(list, vv), rec_(std::move(rec)), pin_(pin) {}
  ~StoreIterator() override {
    if (rec_) rec_->RemovePin(pin_);
  }
  bool Valid() const override { return it_.Valid(); }
  void SeekToFirst() override { it_.SeekToFirst(); }
  void SeekToLast() override { it_.SeekToLast(); }
  void Seek(std::string_view t) override { it_.Seek(PrefixedKey(t).data()); }
  void SeekForPrev(std::string_view t) override {
    it_.SeekForPrev(PrefixedKey(t).data());
  }
  void Next() override {
    if (it_.Valid()) it_.Next();
  }
  void Prev() override {
    if (it_.Valid()) it_.Prev();
  }
  std::string_view key() const override {
    return it_.Valid() ? UserKey(it_.node()) : std::string_view();
  }
  std::string_view value() const override {
    return it_.Valid() ? UserValue(it_.node()) : std::string_view();
  }
  Status status() const override { return Status::OK(); }

 private:
  List::Iterator it_;
  std::shared_ptr<Reclaimer> rec_;
  uint64_t pin_;
};

class StoreImpl : public Store {
 public:
  explicit StoreImpl(const StoreOptions& o) : options_(o) {}
  ~StoreImpl() override { Close(); }

  Status Init(StoreStats* recovered) {
    Status s = pmem::Pool::Open(options_.pool, &pool_);
    if (!s.ok()) return s;
    if (options_.pool.latency.enabled()) {
      pmem::SetLatencyModel(options_.pool.latency);
    }
    pmem::ListRoot* root = nullptr;
    for (pmem::ListRoot* l : pool_->Lists()) {
      if (l->kind != pmem::kListStandalone) {
        return Status::InvalidArgument(
            options_.pool.path +
            ": pool holds RocksDB memtables, not a standalone store");
      }
      if (root) return Status::Corruption("pool holds two standalone stores");
      root = l;
    }
    bool existed = root != nullptr;
    if (!existed) {
      s = pool_->CreateList(pmem::kListStandalone, &root);
      if (!s.ok()) return s;
    }
    memtable::SkipListOptions lo;
    lo.chunk_size = options_.pool.chunk_size;
    if (options_.durability.group_commit) {
      lo.commit_mode = memtable::SkipListOptions::CommitMode::kGroup;
    }
    lo.reclaim_space = options_.gc;
    list_ = std::make_unique<List>(&cmp_, pool_.get(), root, lo);
    if (existed) {
      memtable::RecoveryStats rs;
      s = list_->Recover(&rs);
      if (!s.ok())
        return Status::Corruption(options_.pool.path + ": " + s.message());
      recovered->recovered_nodes = rs.nodes_kept;
      recovered->dropped_uncommitted = rs.dropped_uncommitted;
      recovered->rolled_back_batch = rs.rolled_back_batch;
      recovered->dropped_unpersisted = rs.dropped_unpersisted;
    }
    if (options_.gc) {
      rec_ = std::make_shared<Reclaimer>(list_->visible_version_word());
      gc_ = std::make_unique<Gc>(
          list_.get(), rec_.get(),
          std::max<uint32_t>(options_.gc_nodes_per_hold, 1));
      if (options_.gc_interval_ms > 0) {
        gc_thread_ = std::thread([this] { GcLoop(); });
      }
    }
    return Status::OK();
  }

  using Store::Delete;
  using Store::Put;
  using Store::Write;

  Status Put(const WriteOptions& wo, std::string_view key,
             std::string_view value) override {
    pmem::NvmNode* node;
    Status s = MakeNode(key, value, 0, &node);
    if (!s.ok()) return s;
    NoteWeak(wo);
    std::optional<Reclaimer::Guard> guard;
    if (rec_) guard.emplace(rec_.get(), false);
    return list_->Insert(node, nullptr, wo.sync);
  }

  Status Delete(const WriteOptions& wo, std::string_view key) override {
    pmem::NvmNode* node;
    Status s = MakeNode(key, {}, pmem::kNodeTombstone, &node);
    if (!s.ok()) return s;
    NoteWeak(wo);
    std::optional<Reclaimer::Guard> guard;
    if (rec_) guard.emplace(rec_.get(), false);
    return list_->Insert(node, nullptr, wo.sync);
  }

  Status Persist() override {
    if (!list_) return Status::InvalidArgument("store is closed");
    list_->Persist();
    return Status::OK();
  }

  Status Write(const WriteOptions& wo, const WriteBatch& batch) override {
    if (!list_) return Status::InvalidArgument("store is closed");
    // Last operation per key wins; earlier ones would be shadowed forever
    // by a node of the same version, so they are not written at all.
    std::unordered_set<std::string_view> seen;
    std::vector<const WriteBatch::Op*> ops;
    const auto& all = batch.ops();
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (seen.insert(it->key).second) ops.push_back(&*it);
    }
    for (const WriteBatch::Op* op : ops) {
      Status s = CheckSizes(op->key, op->value);
      if (!s.ok()) return s;
    }
    std::vector<pmem::NvmNode*> nodes(ops.size());
    for (size_t i = 0; i < ops.size(); i++) {
      Status s = MakeNode(
          ops[i]->key, ops[i]->value,
          ops[i]->is_delete ? uint32_t{pmem::kNodeTombstone} : 0u, &nodes[i]);
      if (!s.ok()) return s;
    }
    NoteWeak(wo);
    std::optional<Reclaimer::Guard> guard;
    if (rec_) guard.emplace(rec_.get(), false);
    return list_->InsertBatch(nodes.data(), nodes.size(), wo.sync);
  }

  Status Get(const ReadOptions& ro, std::string_view key,
             std::string* value) override {
    if (!list_) return Status::InvalidArgument("store is closed");
    const Snapshot* snapshot = ro.snapshot;
    std::optional<Reclaimer::Guard> guard;
    if (rec_) guard.emplace(rec_.get(), snapshot == nullptr);
    uint64_t vv = snapshot ? snapshot->version()
                  : guard  ? guard->version()
                           : list_->VisibleVersion();
    const memtable::IndexNode* n = list_->Find(PrefixedKey(key).data(), vv);
    if (!n || (n->pnode->flags & pmem::kNodeTombstone)) {
      return Status::NotFound();
    }
    value->assign(UserValue(n));
    return Status::OK();
  }

  std::unique_ptr<Snapshot> GetSnapshot() override {
    if (!list_ || !rec_) {
      return std::make_unique<VersionSnapshot>(list_ ? list_->VisibleVersion()
                                                     : 0);
    }
    uint64_t v;
    uint64_t pin = rec_->AddPin(Reclaimer::kCurrent, false, &v);
    return std::make_unique<PinnedSnapshot>(v, rec_, pin);
  }

  std::unique_ptr<Iterator> NewIterator(const ReadOptions& ro) override {
    if (!list_) {
      return std::make_unique<ErrorIterator>(
          Status::InvalidArgument("store is closed"));
    }
    const Snapshot* snapshot = ro.snapshot;
    if (!rec_) {
      uint64_t vv = snapshot ? snapshot->version() : list_->VisibleVersion();
      return std::make_unique<StoreIterator>(list_.get(), vv, nullptr, 0);
    }
    // The pin keeps the iterator's version and every node it may reach.
    uint64_t vv;
    uint64_t pin = rec_->AddPin(
        snapshot ? snapshot->version() : Reclaimer::kCurrent, true, &vv);
    return std::make_unique<StoreIterator>(list_.get(), vv, rec_, pin);
  }

  StoreStats GetStats() override {
    StoreStats st = recovered_;
    if (list_) {
      st.visible_version = list_->VisibleVersion();
      st.nodes = list_->NumEntries();
      st.pmem_bytes_reserved = list_->PmemBytes();
      st.dram_index_bytes = list_->DramBytes();
      st.weak_writes_pending = list_->HasUnpersisted();
    }
    if (pool_) st.emulated_pmem = !pool_->is_pmem();
    if (gc_) {
      memtable::GcStats g = gc_->Stats();
      st.gc_passes = g.passes;
      st.gc_unlinked = g.unlinked;
      st.gc_freed = g.freed;
      st.pmem_bytes_free = list_->PmemBytesFree();
    }
    return st;
  }

  Status GarbageCollect() override {
    if (!list_) return Status::InvalidArgument("store is closed");
    if (!gc_) return Status::InvalidArgument("StoreOptions::gc is off");
    gc_->RunPass();
    return Status::OK();
  }

  Status Close() override {
    StopPersister();
    if (gc_thread_.joinable()) {
      {
        std::lock_guard<std::mutex> g(gc_mu_);
        stop_ = true;
      }
      gc_cv_.notify_all();
      gc_thread_.join();
    }
    if (list_) list_->Persist();  // P16/P17: weak writes durable, cut clear
    gc_.reset();   // frees what it retired, into the list's arena
    rec_.reset();  // snapshots still open hold their own reference
    list_.reset();
    pool_.reset();
    return Status::OK();
  }

  StoreStats recovered_;

 private:
  Status CheckSizes(std::string_view key, std::string_view value) const {
    if (key.size() > options_.max_key_size) {
      return Status::InvalidArgument("key of " + std::to_string(key.size()) +
                                     " bytes exceeds max_key_size " +
                                     std::to_string(options_.max_key_size));
    }
    if (value.size() > options_.max_value_size) {
      return Status::InvalidArgument("value of " +
                                     std::to_string(value.size()) +
                                     " bytes exceeds max_value_size " +
                                     std::to_string(options_.max_value_size));
    }
    return Status::OK();
  }

  Status MakeNode(std::string_view key, std::string_view value, uint32_t flags,
                  pmem::NvmNode** out) {
    if (!list_) return Status::InvalidArgument("store is closed");
    Status s = CheckSizes(key, value);
    if (!s.ok()) return s;
    size_t klen = memtable::VarintLength(key.size()) + key.size();
    pmem::NvmNode* node;
    s = list_->AllocateNode(klen + value.size(), &node);
    // Pool full: collect now (the writer holds no guard here) and retry. A
    // second pass frees what the first unlinked while readers held it.
    for (int pass = 0; s.IsNoSpace() && gc_ && pass < kFullPoolPasses; pass++) {
      gc_->RunPass();
      s = list_->AllocateNode(klen + value.size(), &node);
    }
    if (!s.ok()) return s;
    char* p = memtable::EncodeVarint32(node->data(),
                                       static_cast<uint32_t>(key.size()));
    // An empty string_view may have a null data(): memcpy(dst, nullptr, 0)
    // is undefined behaviour (UBSAN), so skip empty copies.
    if (!key.empty()) std::memcpy(p, key.data(), key.size());
    if (!value.empty()) {
      std::memcpy(p + key.size(), value.data(), value.size());
    }
    List::SealNode(node, static_cast<uint32_t>(klen), flags);
    *out = node;
    return Status::OK();
  }

  // The first weak write starts the background persistence bound (if any).
  void NoteWeak(const WriteOptions& wo) {
    if (wo.sync || options_.durability.persist_interval_us == 0) return;
    std::call_once(persister_once_, [this] {
      persister_ = std::thread([this] { PersisterLoop(); });
    });
  }

  void PersisterLoop() {
    const auto interval =
        std::chrono::microseconds(options_.durability.persist_interval_us);
    std::unique_lock<std::mutex> l(persister_mu_);
    while (!stop_persister_) {
      persister_cv_.wait_for(l, interval);
      if (stop_persister_) break;
      l.unlock();
      if (list_->HasUnpersisted()) list_->Persist();
      l.lock();
    }
  }

  void StopPersister() {
    {
      std::lock_guard<std::mutex> g(persister_mu_);
      stop_persister_ = true;
    }
    persister_cv_.notify_all();
    if (persister_.joinable()) persister_.join();
  }

  // A pass walks every node, so the background thread starts one only
  // once the writes that made garbage (an overwrite or a delete) since the
  // previous pass reach 1/kScanRatio of the nodes: at most ~kScanRatio
  // node visits per such write, amortised, and no pass at all while writes
  // only add keys.
  void GcLoop() {
    std::unique_lock<std::mutex> lock(gc_mu_);
    uint64_t last = 0;
    while (!stop_) {
      lock.unlock();
      uint64_t v = list_->SupersededCount();
      uint64_t due = std::max<uint64_t>(1, list_->NumEntries() / kScanRatio);
      if (v - last >= due) {
        gc_->RunPass();
        last = v;
      }
      lock.lock();
      gc_cv_.wait_for(lock, std::chrono::milliseconds(options_.gc_interval_ms),
                      [this] { return stop_; });
    }
  }

  static constexpr int kFullPoolPasses = 3;
  static constexpr uint64_t kScanRatio = 8;
  StoreOptions options_;
  memtable::BytewiseKeyComparator cmp_;
  std::once_flag persister_once_;
  std::thread persister_;
  std::mutex persister_mu_;
  std::condition_variable persister_cv_;
  bool stop_persister_ = false;
  std::unique_ptr<pmem::Pool> pool_;
  std::unique_ptr<List> list_;
  std::shared_ptr<Reclaimer> rec_;  // null when the GC is off
  std::unique_ptr<Gc> gc_;
  std::thread gc_thread_;
  std::mutex gc_mu_;
  std::condition_variable gc_cv_;
  bool stop_ = false;  // under gc_mu_
};

}  // namespace

Status Store::Open(const StoreOptions& options, std::unique_ptr<Store>* out) {
  if (options.max_key_size > (1u << 30) ||
      options.max_value_size > (1u << 30)) {
    return Status::InvalidArgument("max_key_size/max_value_size above 1 GiB");
  }
  try {
    auto store = std::make_unique<StoreImpl>(options);
    Status s = store->Init(&store->recovered_);
    if (!s.ok()) return s;
    *out = std::move(store);
    return Status::OK();
  } catch (const std::bad_alloc&) {
    return Status::NoSpace("out of memory while opening the store");
  }
}

}  // namespace flintkv

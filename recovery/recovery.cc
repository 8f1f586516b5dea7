// Recovery of unflushed FlintKV memtables into RocksDB, and the
// crash-atomic write wrapper (flintkv/recovery.h, docs/rocksdb_recovery.md).
#include "flintkv/recovery.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "flintkv/rocksdb_memtable.h"
#include "memtable/list_walk.h"
#include "memtable/rocksdb/memtable_meta.h"
#include "memtable/rocksdb/pool_handle.h"
#include "memtable/rocksdb/status_convert.h"
#include "pmem/persist.h"
#include "recovery/internal_key_cmp.h"
#include "recovery/watermark.h"
#include "rocksdb/comparator.h"
#include "rocksdb/utilities/stackable_db.h"
#include "rocksdb/write_batch.h"

namespace flintkv {

using rocks::PoolHandle;
using rocks::ToRocks;

namespace {

// RocksDB value types that can appear in a memtable rep (db/dbformat.h).
constexpr uint8_t kTypeDeletion = 0x0;
constexpr uint8_t kTypeValue = 0x1;
constexpr uint8_t kTypeMerge = 0x2;
constexpr uint8_t kTypeSingleDeletion = 0x7;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// One decoded RocksDB memtable entry, pointing into the pool.
struct Entry {
  rocksdb::Slice user_key;
  uint64_t seq;
  uint8_t type;
  rocksdb::Slice value;
};

// varint32 ikey_len | user key | fixed64 (seq << 8 | type) | varint32 vlen
// | value [| checksum]. False if the node does not hold such an entry.
bool DecodeEntry(const pmem::NvmNode* n, Entry* e) {
  const char* p = n->data();
  const char* end = p + n->data_size;
  uint32_t ikey_len;
  const char* k = memtable::DecodeVarint32(p, end, &ikey_len);
  if (!k || ikey_len < 8 || ikey_len > static_cast<uint64_t>(end - k)) {
    return false;
  }
  uint64_t packed;
  std::memcpy(&packed, k + ikey_len - 8, 8);  // little-endian (x86)
  e->user_key = rocksdb::Slice(k, ikey_len - 8);
  e->seq = packed >> 8;
  e->type = static_cast<uint8_t>(packed & 0xff);
  uint32_t vlen;
  const char* v = memtable::DecodeVarint32(k + ikey_len, end, &vlen);
  if (!v || vlen > static_cast<uint64_t>(end - v)) return false;
  e->value = rocksdb::Slice(v, vlen);
  return true;
}

// Claimed pool handles, kept alive from BeginRecovery to the end of
// RecoverInto (the handle's leftover snapshot must not be retaken).
std::mutex& ClaimMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::shared_ptr<PoolHandle>>& Claims() {
  static auto* m = new std::map<std::string, std::shared_ptr<PoolHandle>>();
  return *m;
}

Status GetExistingPool(const std::string& pool_dir,
                       std::shared_ptr<PoolHandle>* h) {
  std::string path = PoolHandle::PoolPath(pool_dir);
  if (!FileExists(path)) {
    return Status::NotFound("no FlintKV pool at " + path);
  }
  return PoolHandle::Get(pool_dir, 1ull << 30, MemTableOptions().chunk_size, h);
}

void Log(const RecoveryOptions& o, const std::string& line) {
  if (o.log) o.log(line);
}

// Replays one list into db (column family cf). Streams: entries arrive in
// (user key asc, seq desc) order; for each user key only the newest
// surviving entry is re-applied, plus the Merge operands above the newest
// non-Merge entry (ascending), which reproduces the key's value.
class ListReplayer {
 public:
  ListReplayer(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
               const rocksdb::Comparator* ucmp, const RecoveryOptions& o,
               bool use_wm, uint64_t wm, RecoveryReport* r)
      : db_(db), cf_(cf), ucmp_(ucmp), o_(o), use_wm_(use_wm), wm_(wm), r_(r) {
    wo_.disableWAL = true;  // everything is flushed before the lists go
  }

  bool ok() const { return status_.ok(); }
  // Returns false (and sets the status) on an error.
  bool Visit(const pmem::ListRoot* root, const pmem::NvmNode* n) {
    if (n->version == pmem::kUncommittedVersion) {
      r_->dropped_uncommitted++;  // P4: its Write had not returned
      return true;
    }
    if (root->batch_mode && n->version > root->commit_version) {
      r_->dropped_torn_batch++;  // P3
      return true;
    }
    Entry e;
    if (!DecodeEntry(n, &e)) {
      status_ = rocksdb::Status::Corruption(
          "flintkv: list " + std::to_string(root->list_id) +
          ": node is not a RocksDB memtable entry");
      return false;
    }
    r_->entries_seen++;
    if (use_wm_ && e.seq > wm_) {
      r_->dropped_above_watermark++;  // never acknowledged (wrapper)
      return true;
    }
    if (e.type != kTypeValue && e.type != kTypeDeletion &&
        e.type != kTypeMerge && e.type != kTypeSingleDeletion) {
      status_ = rocksdb::Status::NotSupported(
          "flintkv: list " + std::to_string(root->list_id) +
          " holds an entry of RocksDB value type " + std::to_string(e.type) +
          " (timestamps, wide columns and blob indexes are not recovered)");
      return false;
    }
    bool same_key = have_key_ && ucmp_->Compare(e.user_key, key_) == 0;
    if (!same_key) {
      EndKey();
      key_.assign(e.user_key.data(), e.user_key.size());
      have_key_ = true;
      done_ = false;
    }
    if (done_) {
      r_->entries_superseded++;
      return true;
    }
    merges_.push_back(e);
    if (e.type != kTypeMerge) done_ = true;  // the base of the key's value
    return status_.ok();
  }

  rocksdb::Status Finish() {
    EndKey();
    if (status_.ok()) Commit();
    return status_;
  }

 private:
  void EndKey() {
    // merges_: newest first; apply oldest first.
    for (auto it = merges_.rbegin(); it != merges_.rend(); ++it) {
      rocksdb::Status s;
      switch (it->type) {
        case kTypeValue:
          s = batch_.Put(cf_, it->user_key, it->value);
          break;
        case kTypeDeletion:
          s = batch_.Delete(cf_, it->user_key);
          break;
        case kTypeSingleDeletion:
          s = batch_.SingleDelete(cf_, it->user_key);
          break;
        case kTypeMerge:
          s = batch_.Merge(cf_, it->user_key, it->value);
          break;
      }
      if (!s.ok() && status_.ok()) status_ = s;
      r_->entries_replayed++;
      r_->bytes_replayed += it->user_key.size() + it->value.size();
    }
    merges_.clear();
    if (batch_.GetDataSize() >= o_.batch_bytes) Commit();
  }
  void Commit() {
    if (batch_.Count() == 0 || !status_.ok()) return;
    status_ = db_->Write(wo_, &batch_);
    batch_.Clear();
  }

  rocksdb::DB* db_;
  rocksdb::ColumnFamilyHandle* cf_;
  const rocksdb::Comparator* ucmp_;
  const RecoveryOptions& o_;
  bool use_wm_;
  uint64_t wm_;
  RecoveryReport* r_;
  rocksdb::WriteOptions wo_;
  rocksdb::WriteBatch batch_;
  std::string key_;
  bool have_key_ = false;
  bool done_ = false;
  std::vector<Entry> merges_;
  rocksdb::Status status_;
};

std::vector<memtable::ChunkRange> ChunkRanges(const pmem::Pool* pool,
                                              uint64_t list_id,
                                              uint64_t* bytes) {
  std::vector<memtable::ChunkRange> out;
  *bytes = 0;
  for (const pmem::ChunkInfo& c : pool->ChunksOf(list_id)) {
    out.push_back({c.offset, c.len});
    *bytes += c.len;
  }
  return out;
}

// Smallest sequence number of a committed entry (false: none).
Status MinSeq(pmem::Pool* pool, pmem::ListRoot* l,
              const rocksdb::Comparator* ucmp, uint64_t* min_seq, bool* any) {
  InternalKeyCmp cmp(ucmp);
  uint64_t chunk_bytes;
  auto chunks = ChunkRanges(pool, l->list_id, &chunk_bytes);
  *any = false;
  return memtable::WalkList(
      *pool, l, cmp, &chunks,
      [&](const pmem::NvmNode* n) {
        Entry e;
        if (n->version != pmem::kUncommittedVersion &&
            !(l->batch_mode && n->version > l->commit_version) &&
            DecodeEntry(n, &e) && (!*any || e.seq < *min_seq)) {
          *min_seq = e.seq;
          *any = true;
        }
        return memtable::WalkDecision::kKeep;
      },
      [](uint64_t*) {});
}

void PersistMeta(pmem::ListRoot* l, uint32_t state) {
  rocks::MemtableMeta* m = rocks::MutableMetaOf(l);
  m->recovery_state = state;
  // P6: a triage decision is durable before any replayed write, so a crash
  // during recovery cannot replay a list that was judged already installed.
  pmem::PmemPersist::Persist(&m->recovery_state, sizeof(m->recovery_state));
}

// Decides, before the first replayed write, which leftover lists to replay,
// and makes the decision durable (docs/rocksdb_recovery.md, "Which lists
// are replayed"):
//  - a list whose smallest sequence number is <= the largest sequence
//    number in its column family's SST files was flushed and installed
//    (crash between the MANIFEST sync and MarkFlushed's retire): dropped;
//  - a list marked kReplayPending by an interrupted recovery is replayed;
//    unmarked lists created after it hold that recovery's copies: dropped;
//  - every other list is marked kReplayPending (persisted) and replayed.
// The check needs the DB exactly as the crash left it (no compaction has
// zeroed sequence numbers; no writes since open).
rocksdb::Status Triage(
    rocksdb::DB* db,
    const std::map<uint32_t, rocksdb::ColumnFamilyHandle*>& cf_by_id,
    pmem::Pool* pool, std::vector<pmem::ListRoot*>* lists,
    const RecoveryOptions& o, RecoveryReport* r) {
  uint64_t max_pending_id = 0;
  for (pmem::ListRoot* l : *lists) {
    if (rocks::MetaOf(l)->recovery_state == rocks::kReplayPending) {
      max_pending_id = std::max(max_pending_id, l->list_id);
    }
  }
  std::map<uint32_t, uint64_t> file_seq;
  for (auto& [id, cf] : cf_by_id) {
    rocksdb::ColumnFamilyMetaData md;
    db->GetColumnFamilyMetaData(cf, &md);
    uint64_t mx = 0;
    for (const auto& level : md.levels) {
      for (const auto& f : level.files) mx = std::max(mx, f.largest_seqno);
    }
    file_seq[id] = mx;
  }
  std::vector<pmem::ListRoot*> keep;
  for (pmem::ListRoot* l : *lists) {
    const rocks::MemtableMeta* meta = rocks::MetaOf(l);
    auto cf = cf_by_id.find(meta->column_family_id);
    if (l->kind != pmem::kListMemtable ||
        meta->magic != rocks::kMemtableMetaMagic || cf == cf_by_id.end() ||
        meta->recovery_state == rocks::kReplayPending) {
      keep.push_back(l);  // errors and dropped CFs are handled by the caller
      continue;
    }
    if (max_pending_id && l->list_id > max_pending_id) {
      Log(o, "flintkv: list " + std::to_string(l->list_id) +
                 " holds copies made by an interrupted recovery: dropped");
      r->lists_installed++;
      pool->DropList(l);
      continue;
    }
    uint64_t min_seq = 0;
    bool any = true;
    if (file_seq[cf->first] == 0) {
      min_seq = 1;  // no SST file can hold any of it; skip the walk
    } else {
      Status s = MinSeq(pool, l, cf->second->GetComparator(), &min_seq, &any);
      if (!s.ok()) return ToRocks(s);
    }
    if (!any || file_seq[cf->first] >= min_seq) {
      if (any) {
        Log(o, "flintkv: list " + std::to_string(l->list_id) +
                   " was already flushed (SST holds sequence " +
                   std::to_string(file_seq[cf->first]) + " >= its first " +
                   std::to_string(min_seq) + "): dropped");
        r->lists_installed++;
      }
      pool->DropList(l);
      continue;
    }
    PersistMeta(l, rocks::kReplayPending);
    keep.push_back(l);
  }
  *lists = keep;
  return rocksdb::Status::OK();
}

}  // namespace

std::string RecoveryReport::ToString() const {
  char buf[1024];
  std::snprintf(
      buf, sizeof(buf),
      "lists: %llu found, %llu replayed, %llu already flushed, %llu of "
      "dropped column families; "
      "entries: %llu committed, %llu replayed (%llu bytes), %llu superseded; "
      "dropped: %llu uncommitted (version MAX), %llu torn FlintKV batch, "
      "%llu above watermark; watermark: %s %llu; time: triage %.3f s, "
      "replay %.3f s, flush %.3f s",
      (unsigned long long)lists_found, (unsigned long long)lists_replayed,
      (unsigned long long)lists_installed, (unsigned long long)lists_dropped_cf,
      (unsigned long long)entries_seen, (unsigned long long)entries_replayed,
      (unsigned long long)bytes_replayed,
      (unsigned long long)entries_superseded,
      (unsigned long long)dropped_uncommitted,
      (unsigned long long)dropped_torn_batch,
      (unsigned long long)dropped_above_watermark,
      watermark_used ? "used" : "not used", (unsigned long long)watermark,
      triage_seconds, replay_seconds - triage_seconds, flush_seconds);
  return buf;
}

rocksdb::Status BeginRecovery(const std::string& pool_dir) {
  std::shared_ptr<PoolHandle> h;
  Status s = GetExistingPool(pool_dir, &h);
  if (!s.ok()) return ToRocks(s);
  int expected = PoolHandle::kPending;
  h->leftover_state.compare_exchange_strong(expected, PoolHandle::kClaimed);
  std::lock_guard<std::mutex> g(ClaimMutex());
  Claims()[PoolHandle::PoolPath(pool_dir)] = h;
  return rocksdb::Status::OK();
}

rocksdb::Status RecoverInto(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const RecoveryOptions& o, RecoveryReport* report) {
  RecoveryReport local;
  RecoveryReport* r = report ? report : &local;
  *r = RecoveryReport();
  std::shared_ptr<PoolHandle> h;
  {
    std::lock_guard<std::mutex> g(ClaimMutex());
    auto it = Claims().find(PoolHandle::PoolPath(o.pool_dir));
    if (it != Claims().end()) h = it->second;
  }
  if (!h) {
    Status s = GetExistingPool(o.pool_dir, &h);
    if (!s.ok()) return ToRocks(s);
  }
  auto release = [&] {
    std::lock_guard<std::mutex> g(ClaimMutex());
    Claims().erase(PoolHandle::PoolPath(o.pool_dir));
  };
  pmem::Pool* pool = h->pool();
  Watermark wm(pool);

  std::map<uint32_t, rocksdb::ColumnFamilyHandle*> cf_by_id;
  for (auto* cf : handles) cf_by_id[cf->GetID()] = cf;
  std::set<uint64_t> leftover_ids(h->leftover_lists().begin(),
                                  h->leftover_lists().end());
  std::vector<pmem::ListRoot*> lists;
  for (pmem::ListRoot* l : pool->Lists()) {
    if (leftover_ids.count(l->list_id)) lists.push_back(l);  // list_id order
  }
  r->lists_found = lists.size();
  r->watermark_used = wm.enabled() && o.watermark != WatermarkMode::kOff;
  if (o.watermark == WatermarkMode::kOn && !wm.enabled()) {
    release();
    return rocksdb::Status::InvalidArgument("flintkv: pool " + pool->path() +
                                            " has no watermark");
  }
  r->watermark = wm.published();

  if (wm.reset_pending()) {
    // A previous recovery flushed everything it replayed and crashed while
    // dropping the lists: they are all in SST files already.
    Log(o,
        "flintkv: finishing an interrupted recovery (replayed data is "
        "already flushed)");
    for (pmem::ListRoot* l : lists) pool->DropList(l);
    wm.FinishReset();
    lists.clear();
  }

  auto start = std::chrono::steady_clock::now();
  std::vector<pmem::ListRoot*> to_drop;
  rocksdb::Status ps = Triage(db, cf_by_id, pool, &lists, o, r);
  r->triage_seconds = Seconds(start);
  if (!ps.ok()) {
    release();
    return ps;
  }
  for (pmem::ListRoot* l : lists) {
    const rocks::MemtableMeta* meta = rocks::MetaOf(l);
    if (l->kind != pmem::kListMemtable ||
        meta->magic != rocks::kMemtableMetaMagic) {
      release();
      return rocksdb::Status::Corruption("flintkv: list " +
                                         std::to_string(l->list_id) +
                                         " is not a RocksDB memtable list");
    }
    auto cf = cf_by_id.find(meta->column_family_id);
    if (cf == cf_by_id.end()) {
      r->lists_dropped_cf++;
      Log(o, "flintkv: list " + std::to_string(l->list_id) +
                 " belongs to column family id " +
                 std::to_string(meta->column_family_id) +
                 ", which the DB does not have (dropped): discarded");
      to_drop.push_back(l);
      continue;
    }
    const rocksdb::Comparator* ucmp = cf->second->GetComparator();
    InternalKeyCmp cmp(ucmp);
    uint64_t chunk_bytes;
    auto chunks = ChunkRanges(pool, l->list_id, &chunk_bytes);
    ListReplayer rp(db, cf->second, ucmp, o, r->watermark_used, r->watermark,
                    r);
    Status ws = memtable::WalkList(
        *pool, l, cmp, &chunks,
        [&](const pmem::NvmNode* n) {
          if (rp.ok()) rp.Visit(l, n);
          return memtable::WalkDecision::kKeep;
        },
        [](uint64_t*) {});
    rocksdb::Status fs = rp.Finish();
    if (!ws.ok()) {
      release();
      return ToRocks(ws);
    }
    if (!fs.ok()) {
      release();
      return fs;
    }
    r->lists_replayed++;
    to_drop.push_back(l);
  }
  r->replay_seconds = Seconds(start);

  start = std::chrono::steady_clock::now();
  if (!to_drop.empty()) {
    rocksdb::FlushOptions fo;
    fo.wait = true;
    fo.allow_write_stall = true;
    rocksdb::Status s = db->Flush(fo, handles);
    if (!s.ok()) {
      release();
      return s;
    }
    // The replayed data is in SST files and the MANIFEST (Flush waits for
    // the install). Record that before dropping anything, so that a crash
    // in between neither replays twice nor trusts a stale watermark.
    wm.BeginReset(db->GetLatestSequenceNumber());
    for (pmem::ListRoot* l : to_drop) pool->DropList(l);
    wm.FinishReset();
  } else if (wm.enabled()) {
    wm.SetPublished(db->GetLatestSequenceNumber());
  }
  r->flush_seconds = Seconds(start);
  h->leftover_state = PoolHandle::kDone;
  release();
  Log(o, "flintkv: recovery: " + r->ToString());
  return rocksdb::Status::OK();
}

rocksdb::Status RecoverDB(const rocksdb::Options& db_options,
                          const std::string& db_path,
                          std::vector<rocksdb::ColumnFamilyDescriptor> cfs,
                          const RecoveryOptions& o, RecoveryReport* report) {
  rocksdb::Status s = BeginRecovery(o.pool_dir);
  if (!s.ok()) return s;
  auto fail = [&](rocksdb::Status st) {
    std::lock_guard<std::mutex> g(ClaimMutex());
    Claims().erase(PoolHandle::PoolPath(o.pool_dir));
    return st;
  };
  if (cfs.empty()) {
    std::vector<std::string> names;
    s = rocksdb::DB::ListColumnFamilies(db_options, db_path, &names);
    if (!s.ok()) return fail(s);
    for (auto& n : names) {
      cfs.emplace_back(n, rocksdb::ColumnFamilyOptions(db_options));
    }
  }
  MemTableOptions mo;
  mo.pool_dir = o.pool_dir;
  std::shared_ptr<rocksdb::MemTableRepFactory> factory;
  s = NewMemTableRepFactory(mo, &factory);
  if (!s.ok()) return fail(s);
  for (auto& cf : cfs) {
    cf.options.memtable_factory = factory;
    cf.options.disable_auto_compactions = true;  // keep SST seqnos (Triage)
  }
  rocksdb::DBOptions dbo(db_options);
  dbo.create_if_missing = false;
  dbo.avoid_flush_during_shutdown = false;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::Open(dbo, db_path, cfs, &handles, &db);
  if (!s.ok()) return fail(s);
  s = RecoverInto(db, handles, o, report);
  if (s.ok()) {
    // Offline recovery ends the wrapper's epoch: a plain user of the pool
    // must not be filtered by a watermark it never publishes.
    std::shared_ptr<PoolHandle> h;
    if (GetExistingPool(o.pool_dir, &h).ok()) Watermark(h->pool()).Disable();
  }
  for (auto* cf : handles) db->DestroyColumnFamilyHandle(cf);
  rocksdb::Status cs = db->Close();
  delete db;
  if (s.ok()) s = cs;
  return s;
}

// ---- The crash-atomic wrapper ----

namespace {

class FlintDB : public rocksdb::StackableDB {
 public:
  FlintDB(rocksdb::DB* db, std::shared_ptr<PoolHandle> pool)
      : rocksdb::StackableDB(db), pool_(std::move(pool)), wm_(pool_->pool()) {}
  ~FlintDB() override { Close(); }

  rocksdb::Status Close() override {
    if (closed_) return rocksdb::Status::OK();
    closed_ = true;
    rocksdb::Status s = db_->Close();
    // Nothing is in flight any more: every entry in the pool is published,
    // so plain users of the pool may come next.
    wm_.Disable();
    return s;
  }

  using rocksdb::StackableDB::Put;
  rocksdb::Status Put(const rocksdb::WriteOptions& wo,
                      rocksdb::ColumnFamilyHandle* cf, const rocksdb::Slice& k,
                      const rocksdb::Slice& v) override {
    return Published(db_->Put(wo, cf, k, v));
  }
  rocksdb::Status Put(const rocksdb::WriteOptions& wo,
                      rocksdb::ColumnFamilyHandle* cf, const rocksdb::Slice& k,
                      const rocksdb::Slice& ts,
                      const rocksdb::Slice& v) override {
    return Published(db_->Put(wo, cf, k, ts, v));
  }
  using rocksdb::StackableDB::Delete;
  rocksdb::Status Delete(const rocksdb::WriteOptions& wo,
                         rocksdb::ColumnFamilyHandle* cf,
                         const rocksdb::Slice& k) override {
    return Published(db_->Delete(wo, cf, k));
  }
  rocksdb::Status Delete(const rocksdb::WriteOptions& wo,
                         rocksdb::ColumnFamilyHandle* cf,
                         const rocksdb::Slice& k,
                         const rocksdb::Slice& ts) override {
    return Published(db_->Delete(wo, cf, k, ts));
  }
  using rocksdb::StackableDB::SingleDelete;
  rocksdb::Status SingleDelete(const rocksdb::WriteOptions& wo,
                               rocksdb::ColumnFamilyHandle* cf,
                               const rocksdb::Slice& k) override {
    return Published(db_->SingleDelete(wo, cf, k));
  }
  rocksdb::Status SingleDelete(const rocksdb::WriteOptions& wo,
                               rocksdb::ColumnFamilyHandle* cf,
                               const rocksdb::Slice& k,
                               const rocksdb::Slice& ts) override {
    return Published(db_->SingleDelete(wo, cf, k, ts));
  }
  using rocksdb::StackableDB::Merge;
  rocksdb::Status Merge(const rocksdb::WriteOptions& wo,
                        rocksdb::ColumnFamilyHandle* cf,
                        const rocksdb::Slice& k,
                        const rocksdb::Slice& v) override {
    return Published(db_->Merge(wo, cf, k, v));
  }
  rocksdb::Status Write(const rocksdb::WriteOptions& wo,
                        rocksdb::WriteBatch* b) override {
    if (b->HasDeleteRange()) return NoRangeDeletes();
    return Published(db_->Write(wo, b));
  }
  using rocksdb::StackableDB::DeleteRange;
  rocksdb::Status DeleteRange(const rocksdb::WriteOptions&,
                              rocksdb::ColumnFamilyHandle*,
                              const rocksdb::Slice&,
                              const rocksdb::Slice&) override {
    return NoRangeDeletes();
  }
  using rocksdb::StackableDB::PutEntity;
  rocksdb::Status PutEntity(const rocksdb::WriteOptions&,
                            rocksdb::ColumnFamilyHandle*, const rocksdb::Slice&,
                            const rocksdb::WideColumns&) override {
    return rocksdb::Status::NotSupported(
        "flintkv: wide-column entities are not recovered");
  }

 private:
  static rocksdb::Status NoRangeDeletes() {
    return rocksdb::Status::NotSupported(
        "flintkv: DeleteRange is not crash-durable with the flintkv memtable "
        "(RocksDB keeps range tombstones in DRAM)");
  }
  // The commit point: once Write has returned, every write group up to
  // LastSequence is completely in the memtables (RocksDB publishes
  // LastSequence after the whole group's memtable inserts), and FlintKV
  // made each insert durable; persisting W >= LastSequence makes all of
  // them, and only whole write groups, count for recovery.
  rocksdb::Status Published(rocksdb::Status s) {
    if (s.ok()) wm_.Publish(db_->GetLatestSequenceNumber());
    return s;
  }

  std::shared_ptr<PoolHandle> pool_;
  Watermark wm_;
  bool closed_ = false;
};

}  // namespace

rocksdb::Status OpenDB(const rocksdb::DBOptions& db_options,
                       const std::string& name,
                       const std::vector<rocksdb::ColumnFamilyDescriptor>& cfs,
                       std::vector<rocksdb::ColumnFamilyHandle*>* handles,
                       rocksdb::DB** dbptr, const RecoveryOptions& o,
                       RecoveryReport* report) {
  *dbptr = nullptr;
  if (db_options.unordered_write) {
    return rocksdb::Status::NotSupported(
        "flintkv::OpenDB: unordered_write publishes sequence numbers before "
        "the memtable inserts finish; the watermark needs ordered writes");
  }
  bool recover = FileExists(PoolHandle::PoolPath(o.pool_dir));
  if (recover) {
    rocksdb::Status s = BeginRecovery(o.pool_dir);
    if (!s.ok()) return s;
  }
  MemTableOptions mo;
  mo.pool_dir = o.pool_dir;
  mo.pool_size = o.pool_size;
  std::shared_ptr<rocksdb::MemTableRepFactory> factory;
  rocksdb::Status s = NewMemTableRepFactory(mo, &factory);
  std::vector<rocksdb::ColumnFamilyDescriptor> descs(cfs);
  for (auto& cf : descs) {
    cf.options.memtable_factory = factory;
    // No compaction may zero SST sequence numbers before Triage reads them.
    if (recover) cf.options.disable_auto_compactions = true;
  }
  rocksdb::DB* db = nullptr;
  if (s.ok()) s = rocksdb::DB::Open(db_options, name, descs, handles, &db);
  if (s.ok() && recover) s = RecoverInto(db, *handles, o, report);
  for (size_t i = 0; s.ok() && recover && i < handles->size(); i++) {
    if (!cfs[i].options.disable_auto_compactions) {
      s = db->SetOptions((*handles)[i],
                         {{"disable_auto_compactions", "false"}});
    }
  }
  std::shared_ptr<PoolHandle> h;
  if (s.ok()) s = ToRocks(GetExistingPool(o.pool_dir, &h));
  if (!s.ok()) {
    std::lock_guard<std::mutex> g(ClaimMutex());
    Claims().erase(PoolHandle::PoolPath(o.pool_dir));
    if (db) {
      for (auto* cf : *handles) db->DestroyColumnFamilyHandle(cf);
      handles->clear();
      delete db;
    }
    return s;
  }
  // New epoch: entries of this run have seq > LastSequence now.
  Watermark wm(h->pool());
  wm.SetPublished(db->GetLatestSequenceNumber());
  wm.Enable();
  *dbptr = new FlintDB(db, h);
  return rocksdb::Status::OK();
}

}  // namespace flintkv

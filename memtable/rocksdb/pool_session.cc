#include "memtable/rocksdb/pool_session.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>

#include "memtable/list_walk.h"
#include "memtable/rocksdb/db_binding.h"
#include "memtable/rocksdb/db_location.h"
#include "memtable/rocksdb/wal_coverage.h"
#include "pmem/persist.h"
#include "rocksdb_common/watermark.h"

namespace flintkv {
namespace rocks {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::weak_ptr<PoolSession>>& Registry() {
  static auto* r = new std::map<std::string, std::weak_ptr<PoolSession>>();
  return *r;
}

Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = dir.find('/', pos + 1);
    std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IOError("cannot create " + part + ": " +
                             std::strerror(errno));
    }
  }
  return Status::OK();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Whether two spellings name one directory (realpath where it exists;
// trailing slashes ignored otherwise).
bool SamePath(const std::string& a, const std::string& b) {
  auto canon = [](const std::string& p) {
    char buf[PATH_MAX];
    if (!p.empty() && realpath(p.c_str(), buf)) return std::string(buf);
    std::string q = p;
    while (q.size() > 1 && q.back() == '/') q.pop_back();
    return q;
  };
  return !a.empty() && !b.empty() && canon(a) == canon(b);
}

std::string Hex(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)v);
  return buf;
}

}  // namespace

SpaceRule SpaceRule::For(uint64_t pool_size, uint64_t chunk_size) {
  SpaceRule r;
  r.reserve = std::max<uint64_t>(pool_size / 32, 8 * chunk_size);
  r.pressure_free = 2 * r.reserve;
  return r;
}

uint64_t SpaceRule::MemtableBytes(uint64_t write_buffer_size,
                                  int max_write_buffer_number,
                                  uint64_t chunk_size) {
  uint64_t per = (write_buffer_size + chunk_size - 1) / chunk_size * chunk_size;
  return per *
         (static_cast<uint64_t>(std::max(max_write_buffer_number, 1)) + 1);
}

Status PoolSession::Open(const std::string& pool_dir, uint64_t pool_size,
                         uint64_t chunk_size,
                         std::shared_ptr<PoolSession>* out) {
  if (pool_dir.empty()) {
    return Status::InvalidArgument("flintkv: pool_dir is not set");
  }
  std::string path = PoolPath(pool_dir);
  std::lock_guard<std::mutex> g(RegistryMutex());
  if (auto h = Registry()[path].lock()) {
    *out = h;
    return Status::OK();
  }
  Status s = MakeDirs(pool_dir);
  if (!s.ok()) return s;
  PoolOptions po;
  po.path = path;
  po.size = pool_size;
  po.chunk_size = chunk_size;
  std::shared_ptr<PoolSession> h(new PoolSession());
  // Kept for the DBs' info logs (NoticesFor); the pool only speaks here.
  PoolSession* raw = h.get();
  po.info_log = [raw](const std::string& m) {
    std::lock_guard<std::mutex> g(raw->mu_);
    raw->notices_.push_back(m);
  };
  s = pmem::Pool::Open(po, &h->pool_);
  if (!s.ok()) return s;
  h->pool_dir_ = pool_dir;
  h->space_ = SpaceRule::For(h->pool_->size(), h->pool_->chunk_size());
  h->pool_->set_reserve_bytes(h->space_.reserve);
  h->ScanLeftoversLocked();
  if (h->leftovers_.empty()) h->ClearStaleWatermarkLocked();
  Registry()[path] = h;
  *out = h;
  return Status::OK();
}

bool PoolSession::PoolExists(const std::string& pool_dir) {
  return FileExists(PoolPath(pool_dir));
}

Status PoolSession::PreparePoolDir(const std::string& pool_dir) {
  Status s = MakeDirs(pool_dir);
  if (!s.ok()) return s;
  struct stat st;
  if (stat(pool_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("flintkv: pool_dir " + pool_dir +
                                   " is not a directory");
  }
  return Status::OK();
}

Status PoolSession::OpenExisting(const std::string& pool_dir,
                                 std::shared_ptr<PoolSession>* out) {
  std::string path = PoolPath(pool_dir);
  if (!FileExists(path)) {
    return Status::NotFound("no FlintKV pool at " + path);
  }
  // Size and chunk size are those of the existing pool.
  return Open(pool_dir, 1ull << 30, 1ull << 20, out);
}

PoolSession::~PoolSession() = default;

namespace {
// True at most once per interval for this clock word; one winner among the
// threads that ask at once (the one whose exchange succeeds logs).
bool NoticeDue(std::atomic<int64_t>* noticed,
               std::chrono::steady_clock::duration interval) {
  const int64_t now =
      std::chrono::steady_clock::now().time_since_epoch().count();
  int64_t last = noticed->load(std::memory_order_relaxed);
  return (last == INT64_MIN || now - last >= interval.count()) &&
         noticed->compare_exchange_strong(last, now, std::memory_order_relaxed);
}
}  // namespace

bool PoolSession::SpaceWaitNoticeDue(
    std::chrono::steady_clock::duration interval) {
  return NoticeDue(&space_wait_noticed_, interval);
}

bool PoolSession::PressureNoticeDue(
    std::chrono::steady_clock::duration interval) {
  return NoticeDue(&pressure_noticed_, interval);
}

std::string PoolSession::PinnedNote() {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t pinned = 0, pinned_bytes = 0;
  for (const auto& [id, root] : live_) {
    if (pmem::StateOf(*root) != pmem::kListRetired) continue;
    pinned++;
    for (const pmem::ChunkInfo& c : pool_->ChunksOf(id)) pinned_bytes += c.len;
  }
  if (pinned == 0) return "";
  const uint64_t mib = 1 << 20;
  return std::to_string(pinned) + " flushed memtable(s) holding " +
         std::to_string((pinned_bytes + mib - 1) / mib) + " MiB of pool " +
         pool_->path() +
         " are still kept alive by RocksDB (open iterators, snapshots' "
         "versions, max_write_buffer_size_to_maintain); their space returns "
         "when they are released";
}

std::vector<std::string> PoolSession::NoticesFor(const void* logger) {
  std::lock_guard<std::mutex> g(mu_);
  if (logger == noticed_logger_) return {};
  noticed_logger_ = logger;
  std::vector<std::string> out = notices_;
  out.insert(out.end(), open_notes_.begin(), open_notes_.end());
  open_notes_.clear();
  return out;
}

uint64_t PoolSession::NewIncarnation() {
  static std::mutex mu;
  static std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
           static_cast<uint64_t>(
               std::chrono::system_clock::now().time_since_epoch().count());
  }());
  std::lock_guard<std::mutex> g(mu);
  uint64_t v = 0;
  while (v == 0) v = rng();
  return v;
}

void PoolSession::ScanLeftoversLocked() {
  leftovers_.clear();
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (l->kind != pmem::kListMemtable || live_.count(l->list_id)) continue;
    if (MetaOf(l)->magic == kMemtableMetaMagic &&
        (MetaOf(l)->incarnation == kUnownedIncarnation ||
         OwnerPending(*MetaOf(l)))) {
      // A read-only instance's WAL replay (S1, S6), or an unconfirmed
      // successor that never took an entry.
      pool_->DropList(l);
      continue;
    }
    if (l->head.next != 0) leftovers_.insert(l->list_id);
  }
  // An empty list of an ended life tells which families the life had, and
  // which it dropped (S7), only while the life has leftovers for recovery
  // to check against the DB (S9); after that it holds nothing of use.
  std::set<uint64_t> with_leftovers;
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (leftovers_.count(l->list_id)) {
      with_leftovers.insert(MetaOf(l)->incarnation);
    }
  }
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (!EndedEmptyListLocked(l)) continue;
    const uint64_t inc = MetaOf(l)->incarnation;
    if (!with_leftovers.count(inc) && !lives_.count(inc)) pool_->DropList(l);
  }
}

bool PoolSession::EndedEmptyListLocked(const pmem::ListRoot* l) const {
  return l->kind == pmem::kListMemtable && l->head.next == 0 &&
         !live_.count(l->list_id) && MetaOf(l)->magic == kMemtableMetaMagic &&
         *MemtableListDamage(*l) == 0;
}

void PoolSession::ClearStaleWatermarkLocked() {
  // No leftover memtable holds an entry, so a watermark left enabled by a
  // run that crashed with empty memtables filters nothing that exists; a
  // run that follows and does not publish W never updates it, and recovery
  // would drop that run's writes as "above W". An unfinished recovery
  // epoch (R set) is finished the same way: nothing is left.
  Watermark wm(pool_.get());
  if (wm.reset_pending()) wm.FinishReset();
  if (wm.enabled()) wm.Disable();
}

bool PoolSession::AnyLiveLocked() const {
  for (const auto& [inc, life] : lives_) {
    if (life.lists > 0) return true;
  }
  return false;
}

std::string PoolSession::DiscardHintLocked(
    const std::set<uint64_t>& lists) const {
  std::set<uint64_t> lives;
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (lists.count(l->list_id)) lives.insert(MetaOf(l)->incarnation);
  }
  std::string out;
  for (uint64_t inc : lives) {
    out += std::string(out.empty() ? "" : " and ") +
           "flintkv_tool discard --pool_dir=" + pool_dir_ +
           " --incarnation=" + Hex(inc) + " --confirm";
  }
  return out;
}

std::string PoolSession::LeftoverSummaryLocked() const {
  std::map<uint64_t, int> by_inc;
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (leftovers_.count(l->list_id)) by_inc[MetaOf(l)->incarnation]++;
  }
  std::string out;
  for (auto& [inc, n] : by_inc) {
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " of incarnation " +
           (inc ? Hex(inc) : std::string("unknown (older FlintKV)"));
  }
  return out;
}

Status PoolSession::DiscardLeftovers(uint64_t incarnation, bool dry_run,
                                     std::vector<std::string>* dropped) {
  std::lock_guard<std::mutex> g(mu_);
  if (AnyLiveLocked() || claimed_) {
    return Status::Busy("flintkv: pool " + pool_->path() +
                        " serves a DB or a recovery in this process");
  }
  ScanLeftoversLocked();
  std::vector<pmem::ListRoot*> victims;
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (!leftovers_.count(l->list_id)) continue;
    const MemtableMeta* m = MetaOf(l);
    // A damaged list's incarnation says nothing: only "all" takes it.
    if (incarnation != 0 &&
        (m->incarnation != incarnation || *MemtableListDamage(*l) != 0)) {
      continue;
    }
    uint64_t entries = 0;
    Status ws = memtable::WalkList(
        *pool_, l, nullptr, nullptr,
        [&](const pmem::NvmNode* n) {
          entries += n->version != pmem::kUncommittedVersion;
          return memtable::WalkDecision::kKeep;
        },
        [](uint64_t*) {});
    dropped->push_back("list " + std::to_string(l->list_id) + " (incarnation " +
                       Hex(m->incarnation) + ", family " + Hex(m->family) +
                       ", column family " +
                       std::to_string(m->column_family_id) + ", " +
                       (ws.ok() ? std::to_string(entries) + " entries"
                                : "entries unknown: " + ws.message()) +
                       ")");
    victims.push_back(l);
  }
  if (dry_run) return Status::OK();
  for (pmem::ListRoot* l : victims) pool_->DropList(l);
  ScanLeftoversLocked();
  if (leftovers_.empty()) ClearStaleWatermarkLocked();
  return Status::OK();
}

std::set<uint64_t> PoolSession::LeftoverIds() const {
  std::lock_guard<std::mutex> g(mu_);
  return leftovers_;
}

bool PoolSession::ClaimedFor(OpenKind kind) const {
  std::lock_guard<std::mutex> g(mu_);
  return claimed_ && claim_kind_ == kind;
}

Status PoolSession::BeginOpen(const void* factory, bool wal_logged,
                              uint64_t write_buffer_size, const OpenWal& wal) {
  std::lock_guard<std::mutex> g(mu_);
  const std::string& path = pool_->path();
  Watermark wm(pool_.get());
  if (wm.record_intact()) wm.MarkChecked();  // a damaged one: recovery says so
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [thread, p] : prepared_) {
    // An entry older than a minute is an open that failed before its first
    // memtable (a DB::Open gets from ValidateOptions to its memtables in
    // milliseconds): it no longer holds the factory.
    if (thread != std::this_thread::get_id() && p.factory == factory &&
        now - p.prepared_at < std::chrono::minutes(1)) {
      return Status::Busy(
          "flintkv: another thread of this process is opening a DB with the "
          "same memtable factory on pool " +
          path + "; each DB needs its own pool_dir (and a factory of its own)");
    }
  }
  if (AnyLiveLocked()) {  // S1
    return Status::Busy(
        "flintkv: pool " + path +
        " already serves a DB that is open in this process; each DB needs "
        "its own pool_dir (e.g. --memtablerep=\"id=flintkv;pool_dir=" +
        pool_dir_ + "-2\" for the second DB)");
  }
  if (claimed_ && claim_thread_ != std::this_thread::get_id()) {
    return Status::Busy("flintkv: pool " + path +
                        " is claimed by a recovery running on another thread "
                        "of this process; open the DB once it is done");
  }
  if (!claimed_) ScanLeftoversLocked();
  std::string why_not;
  if (!claimed_ && !leftovers_.empty()) DropWalCoveredLocked(wal, &why_not);
  if (!claimed_ && !leftovers_.empty()) {  // S2
    return Status::InvalidArgument(
        "flintkv: pool " + path + " holds " +
        std::to_string(leftovers_.size()) + " unflushed memtable(s) (" +
        LeftoverSummaryLocked() +
        ") of a crashed run, of a close that did not flush them, or of a "
        "dropped column family, with writes that RocksDB's WAL replay cannot "
        "restore: " +
        why_not +
        ". Recover them first: flintkv_tool recover --db=<this DB's path> "
        "--pool_dir=" +
        pool_dir_ +
        " (or open the DB with flintkv::OpenDB, which recovers by itself). "
        "A DB whose writes all keep the WAL on can set wal_logged=true in "
        "the memtable options: its Close then leaves nothing in the pool. "
        "If the DB that wrote them no longer exists (destroyed, or replaced "
        "by a new DB at its path), drop them, and their writes: " +
        DiscardHintLocked(leftovers_));
  }
  // A new life for this thread's open. The open's next column family
  // prepares it again: no list carries the number yet. Pressure reports
  // use the largest write_buffer_size any open asked for (an over-report
  // only brings a flush forward).
  Life life;
  life.incarnation = NewIncarnation();
  life.family = claimed_ && claim_family_ ? claim_family_ : life.incarnation;
  life.recovers_every_open =
      claimed_ && claim_kind_ == OpenKind::kRecoverEveryOpen;
  life.wal_logged = wal_logged && !life.recovers_every_open;
  life.db_id_hash = claimed_ ? claim_db_id_hash_ : 0;
  life.recovered_upto = claimed_ ? claim_recovered_upto_ : 0;
  life.factory = factory;
  life.prepared_at = now;
  prepared_[std::this_thread::get_id()] = life;
  if (write_buffer_size > wbs_hint_.load(std::memory_order_relaxed)) {
    wbs_hint_.store(write_buffer_size, std::memory_order_relaxed);
  }
  return Status::OK();
}

MemtableMeta PoolSession::NewListMeta(uint32_t column_family_id,
                                      const void* logger) {
  std::lock_guard<std::mutex> g(mu_);
  MemtableMeta meta{};
  meta.magic = kMemtableMetaMagic;
  meta.column_family_id = column_family_id;
  meta.created_micros = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  const Life* life = nullptr;
  for (auto l = lives_.begin(); l != lives_.end();) {
    // A life whose DB::Open failed holds no list and yields its Logger to
    // this thread's new open (a retry with the same Logger).
    if (l->second.logger == logger && !l->second.opened &&
        l->second.lists == 0 && prepared_.count(std::this_thread::get_id())) {
      l = lives_.erase(l);
      continue;
    }
    if (l->second.logger == logger) life = &l->second;
    ++l;
  }
  if (!life) {
    // The first memtable of an open (on the thread that opens the DB)
    // binds the thread's prepared life to the DB's Logger.
    auto it = prepared_.find(std::this_thread::get_id());
    if (it != prepared_.end()) {
      it->second.logger = logger;
      it->second.open_thread = it->first;
      life = &(lives_[it->second.incarnation] = it->second);
      prepared_.erase(it);
    }
  }
  uint32_t state = 0;
  const bool cf_seen = life && life->column_families.count(column_family_id);
  if (life && !life->opened &&
      life->open_thread != std::this_thread::get_id()) {
    // S6: the DB::Open still runs on its own thread; another thread making
    // a memtable with its Logger is another instance opening meanwhile.
    life = nullptr;
  } else if (life && life->opened &&
             !current_.count({life->incarnation, column_family_id}) &&
             cf_seen) {
    // S6: the life's mutable memtable of this family is gone (the family
    // was dropped; RocksDB never reuses its id): another instance's.
    life = nullptr;
  }
  if (!life) {  // a read-only or secondary instance (S1): never recovered
    meta.incarnation = kUnownedIncarnation;
  } else {
    meta.incarnation = life->incarnation;
    meta.family = life->family;
    meta.db_id_hash = life->db_id_hash;
    meta.flushed_floor = life->flushed_floor;
    // S6: another instance's, or the primary's next (its seal tells), or
    // the primary's new family (the OPTIONS file CreateColumnFamily writes
    // on the same thread tells).
    if (life->opened) state = kOwnerPending;
  }
  SealMeta(&meta, state);
  return meta;
}

void PoolSession::OnListCreated(pmem::ListRoot* list) {
  std::lock_guard<std::mutex> g(mu_);
  live_[list->list_id] = list;
  const MemtableMeta* m = MetaOf(list);
  auto it = lives_.find(m->incarnation);
  if (it == lives_.end()) return;
  const LifeCf key{m->incarnation, m->column_family_id};
  if (OwnerPending(*m)) {
    // Not counted in the life until confirmed: an instance sharing the
    // Logger must not keep the life going once its DB has closed.
    pending_[std::this_thread::get_id()][key] = list->list_id;
  } else {
    it->second.lists++;
    it->second.column_families.insert(m->column_family_id);
    current_[key] = list->list_id;
  }
}

void PoolSession::OnSnapshotQuery(pmem::ListRoot* list) {
  std::lock_guard<std::mutex> g(mu_);
  const MemtableMeta* m = MetaOf(list);
  auto life = lives_.find(m->incarnation);
  if (life == lives_.end() || !life->second.opened) return;  // DB::Open's
  const LifeCf key{m->incarnation, m->column_family_id};
  auto cur = current_.find(key);
  if (cur == current_.end() || cur->second != list->list_id) {
    // S6: CreateColumnFamily's, of the new family's first memtable, on the
    // thread that made it; a read-only or secondary open never asks.
    auto mine = pending_.find(std::this_thread::get_id());
    if (cur == current_.end() && mine != pending_.end()) {
      auto p = mine->second.find(key);
      if (p != mine->second.end() && p->second == list->list_id) {
        new_family_queried_.insert(list->list_id);
      }
    }
    return;
  }
  // S7: DropColumnFamily's, or DB::Open's last sweep over every family
  // (when a family it created made the life opened early); the OPTIONS
  // file this thread writes next tells them apart.
  life->second.queried[std::this_thread::get_id()].insert(m->column_family_id);
}

void PoolSession::ConfirmNewFamiliesLocked(Life* life) {
  auto mine = pending_.find(std::this_thread::get_id());
  if (mine == pending_.end()) return;
  for (auto p = mine->second.begin(); p != mine->second.end();) {
    const auto l = live_.find(p->second);
    if (p->first.first != life->incarnation || current_.count(p->first) ||
        l == live_.end() || !new_family_queried_.erase(p->second)) {
      ++p;
      continue;
    }
    // S6: CreateColumnFamily asked the new memtable IsSnapshotSupported and
    // persists the OPTIONS file naming the family, both on the thread that
    // made it, before any write can reach it; a read-only or secondary
    // instance does neither.
    PersistRecoveryState(MutableMetaOf(l->second), 0);
    current_[p->first] = p->second;
    life->lists++;
    life->column_families.insert(p->first.second);
    p = mine->second.erase(p);
  }
  if (mine->second.empty()) pending_.erase(mine);
}

void PoolSession::MarkDroppedFamiliesLocked(uint64_t incarnation, Life* life) {
  auto mine = life->queried.find(std::this_thread::get_id());
  if (mine == life->queried.end()) return;
  std::set<uint32_t> queried;
  queried.swap(mine->second);
  life->queried.erase(mine);
  // The default family is never dropped: a set with it is DB::Open's
  // sweep, or a drop of a family without snapshots, after which RocksDB
  // asks the others (that drop is not marked).
  if (queried.count(0)) return;
  bool all = true;
  for (const auto& [key, id] : current_) {
    auto l = live_.find(id);
    if (key.first != incarnation || l == live_.end() ||
        FamilyDropped(*MetaOf(l->second))) {
      continue;  // a family dropped before, its handle still held
    }
    all &= queried.count(key.second) > 0;
  }
  if (all) return;  // DB::Open's sweep
  for (auto& [id, root] : live_) {
    const MemtableMeta* lm = MetaOf(root);
    if (lm->incarnation == incarnation && queried.count(lm->column_family_id) &&
        !OwnerPending(*lm)) {
      PersistRecoveryState(MutableMetaOf(root), kFamilyDropped);
    }
  }
}

void PoolSession::OnListSealed(pmem::ListRoot* list) {
  std::lock_guard<std::mutex> g(mu_);
  const MemtableMeta* m = MetaOf(list);
  const LifeCf key{m->incarnation, m->column_family_id};
  auto cur = current_.find(key);
  if (cur == current_.end() || cur->second != list->list_id) return;
  auto mine = pending_.find(std::this_thread::get_id());
  if (mine == pending_.end()) return;
  auto next = mine->second.find(key);
  if (next == mine->second.end()) return;
  auto l = live_.find(next->second);
  mine->second.erase(next);
  if (mine->second.empty()) pending_.erase(mine);
  if (l == live_.end()) return;
  // S6: confirmed before RocksDB installs it, so before its first entry.
  PersistRecoveryState(MutableMetaOf(l->second), 0);
  cur->second = l->first;
  auto life = lives_.find(key.first);
  if (life != lives_.end()) life->second.lists++;
}

void PoolSession::OnListDestroyed(pmem::ListRoot* list, bool flushed,
                                  bool empty, std::string* kept_note) {
  std::lock_guard<std::mutex> g(mu_);
  live_.erase(list->list_id);
  new_family_queried_.erase(list->list_id);
  auto it = lives_.find(MetaOf(list)->incarnation);
  Life* life = it == lives_.end() ? nullptr : &it->second;
  // S4. RocksDB destroys a memtable without MarkFlushed when its data is
  // in SST files some other way (the flush ending WAL recovery inside
  // DB::Open), in the WAL (a Close with WAL-logged writes does not flush),
  // when a flush failed (disk full; RocksDB ignores a failed flush at
  // Close), at a Close with avoid_flush_during_shutdown (also set at run
  // time with SetDBOptions, which no factory hook sees), or for a dropped
  // column family. Only the first is told apart (the open has not
  // finished); otherwise only a life that declared every write WAL-logged
  // lets such a list go. Keeping a WAL-replay list would be wrong, not
  // just wasteful: its entries are in SST files whose sequence numbers a
  // compaction may zero before a later recovery, which would then replay
  // them over newer writes. An unowned list (read-only or secondary
  // instance) holds WAL replay only.
  const MemtableMeta* m = MetaOf(list);
  const LifeCf key{m->incarnation, m->column_family_id};
  auto cur = current_.find(key);
  if (cur != current_.end() && cur->second == list->list_id) {
    current_.erase(cur);
  }
  for (auto t = pending_.begin(); t != pending_.end();) {
    auto p = t->second.find(key);
    if (p != t->second.end() && p->second == list->list_id) t->second.erase(p);
    t = t->second.empty() ? pending_.erase(t) : std::next(t);
  }
  const bool pending = OwnerPending(*m);
  const bool keep = life && !flushed && !empty && !life->wal_logged &&
                    life->opened && !pending;
  // S9: the only durable trace of a drop of a family whose memtable was
  // empty (flushed by a checkpoint or backup just before, say).
  const bool evidence =
      life && empty && life->opened && !pending && FamilyDropped(*m);
  if (evidence) {
    // Empty: not a leftover; ScanLeftoversLocked drops it once its life
    // has ended with nothing left for recovery.
  } else if (keep) {
    leftovers_.insert(list->list_id);
    if (kept_note) {
      *kept_note = life->recovers_every_open
                       ? "the DB recovers it at its next open"
                       : "the next DB::Open asks for `flintkv_tool recover "
                         "--pool_dir=" +
                             pool_dir_ + "` first";
    }
  } else {
    // P6: the contents are in SST files, in the WAL, or there are none.
    pool_->DropList(list);
  }
  // An open's WAL replay can leave it with no list for a moment (RocksDB
  // destroys the memtable it flushed before making the next): the life
  // keeps its Logger until the open finished.
  if (life && !pending && --life->lists == 0 && life->opened) lives_.erase(it);
}

void PoolSession::OnListFlushed(uint64_t incarnation, uint64_t seq) {
  std::lock_guard<std::mutex> g(mu_);
  RaiseFloorLocked(incarnation, seq);
}

void PoolSession::RaiseFloorLocked(uint64_t incarnation, uint64_t seq) {
  auto it = lives_.find(incarnation);
  if (it == lives_.end()) return;
  Life& life = it->second;
  life.flushed_floor = std::max(life.flushed_floor, seq);
  for (auto& [id, root] : live_) {
    MemtableMeta* m = MutableMetaOf(root);
    if (m->incarnation != incarnation ||
        m->flushed_floor >= life.flushed_floor) {
      continue;
    }
    m->flushed_floor = life.flushed_floor;
    // S3 (flushed_floor): raised only after the MANIFEST edit that reached
    // it is durable (MarkFlushed); a lower value after a crash only
    // weakens the "older DB" check, never wrongs it.
    pmem::PmemPersist::Persist(&m->flushed_floor, sizeof(m->flushed_floor));
  }
}

void PoolSession::OnOptionsPersisted(uint64_t incarnation) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = lives_.find(incarnation);
  if (it == lives_.end() || it->second.lists == 0) return;
  if (it->second.opened) {
    ConfirmNewFamiliesLocked(&it->second);
    MarkDroppedFamiliesLocked(incarnation, &it->second);
    return;
  }
  it->second.opened = true;
  // S5: where this life's WAL is, for the open after a crash or a Close.
  RecordDbLocation(pool_dir_, incarnation, OpenOptionsFileDirs());
}

void PoolSession::DropWalCoveredLocked(const OpenWal& wal,
                                       std::string* why_not) {
  if (wal.filtered) {
    *why_not = "the DB's options set a WAL filter, which may skip records";
    return;
  }
  if (wal.best_efforts) {
    *why_not = "best_efforts_recovery is set, and it replays no WAL";
    return;
  }
  std::map<uint64_t, std::vector<pmem::ListRoot*>> by_life;
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (leftovers_.count(l->list_id)) {
      by_life[MetaOf(l)->incarnation].push_back(l);
    }
  }
  // Every life's lists are checked before any is dropped: the open drops
  // them all or none, so a refused open leaves the pool as it was.
  std::vector<std::string> reasons;
  std::set<std::string> wal_dirs;
  size_t covered = 0;
  for (auto& [inc, lists] : by_life) {
    std::string wal_dir,
        why =
            "their DB's WAL cannot be found (no DB directory is recorded for "
            "their life: a run of an older FlintKV, or one killed inside "
            "DB::Open)";
    for (const std::string& dir : RecordedDbLocations(pool_dir_, inc)) {
      DbBinding b = ReadDbBinding(dir);
      if (!b.options_flintkv || b.incarnation != inc) {
        why = dir +
              " was opened again since (its OPTIONS file names "
              "another life), or is another DB";
        continue;
      }
      const std::string logs = b.wal_dir.empty() ? dir : b.wal_dir;
      if (!(wal.wal_dir.empty() && b.wal_dir.empty()) &&
          !SamePath(wal.wal_dir, logs)) {
        why = "this open reads its WAL from " +
              (wal.wal_dir.empty() ? std::string("the DB's directory")
                                   : wal.wal_dir) +
              ", not from " + logs + " where their DB wrote it";
        continue;
      }
      wal_dir = logs;
      break;
    }
    if (wal_dir.empty()) {
      reasons.push_back(why);
      continue;
    }
    WalCoverage c;
    Status s = CheckWalCoverage(*pool_, lists, wal_dir, &c);
    if (!s.ok()) {
      reasons.push_back(s.message());
      continue;
    }
    covered += c.covered.size();
    wal_dirs.insert(wal_dir);
    if (c.covered.size() == lists.size()) continue;
    std::string r = std::to_string(c.entries - c.found) + " of their " +
                    std::to_string(c.entries) + " entries were not found in " +
                    "the WAL in " + wal_dir;
    if (!c.stopped.empty()) {
      r += " (the WAL was read only up to " + c.stopped + ")";
    } else if (c.abandoned_batches > 0) {
      r += " (writes with disableWAL, or " +
           std::to_string(c.abandoned_batches) +
           " WAL batches this check does not follow: 2PC transactions, "
           "blob indexes, TimedPut)";
    } else {
      r += " (writes with disableWAL, writes to a column family dropped "
           "since, or entries the memtable holds otherwise than the WAL "
           "does, e.g. merged by max_successive_merges)";
    }
    reasons.push_back(r);
  }
  if (reasons.empty()) {
    for (const std::string& dir : wal_dirs) {  // C3
      Status s = SyncWalFiles(dir);
      if (!s.ok()) reasons.push_back(s.message());
    }
  }
  if (!reasons.empty()) {
    for (const auto& r : reasons) {
      *why_not += (why_not->empty() ? "" : "; ") + r;
    }
    return;
  }
  for (auto& [inc, lists] : by_life) {
    for (pmem::ListRoot* l : lists) pool_->DropList(l);  // S5
  }
  open_notes_.push_back(
      "flintkv: " + std::to_string(covered) +
      " memtable(s) the last run of this DB left unflushed are in its WAL: "
      "RocksDB's WAL replay restores them; dropped from pool " +
      pool_->path());
  ScanLeftoversLocked();
  if (leftovers_.empty()) ClearStaleWatermarkLocked();
}

Status PoolSession::Claim(const DbBinding& b, OpenKind kind) {
  std::lock_guard<std::mutex> g(mu_);
  if (AnyLiveLocked()) {
    return Status::Busy("flintkv: pool " + pool_->path() +
                        " serves a DB that is open in this process; close "
                        "it before recovering " +
                        b.db_path);
  }
  if (claimed_) {
    return Status::Busy("flintkv: a recovery of pool " + pool_->path() +
                        " is already under way in this process");
  }
  ScanLeftoversLocked();
  std::map<uint64_t, const MemtableMeta*> meta;  // list_id -> meta
  const std::string path = pool_->path();
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (!leftovers_.count(l->list_id)) continue;
    meta[l->list_id] = MetaOf(l);
    const char* damage = MemtableListDamage(*l);
    if (*damage == 0) continue;
    // Every decision below (whose list, which column family, already
    // replayed, which entries are committed) reads these fields: a damaged
    // one would drop the list's writes, cross them into another column
    // family or leave them behind, silently.
    return Status::Corruption(
        "flintkv: pool " + path + ": unflushed memtable list " +
        std::to_string(l->list_id) + ": " + damage +
        " (a flipped bit?), so what its writes are and where they belong "
        "cannot be trusted. The list was left as it is. `flintkv_tool verify "
        "--pool_dir=" +
        pool_dir_ +
        "` reports it; restore the pool from a copy taken before the damage "
        "(then recover), or move the pool away to open the DB without the "
        "pool's unflushed writes");
  }
  if (!meta.empty() && !b.options_flintkv && !b.allow_foreign_open) {
    return Status::InvalidArgument(
        "flintkv: pool " + path + " holds " + std::to_string(meta.size()) +
        " unflushed memtable(s) (" + LeftoverSummaryLocked() + "), but " +
        (b.options_file.empty()
             ? "the DB " + b.db_path + " has no OPTIONS file"
             : "the latest OPTIONS file of " + b.db_path + ", " +
                   b.options_file +
                   ", was written by a process without FlintKV (memtable "
                   "factory " +
                   b.other_factory + ")") +
        ". Either " + b.db_path +
        " is not the DB that wrote them (check --db: `flintkv_tool inspect "
        "--pool_dir=" +
        pool_dir_ +
        "` shows their sequence ranges and creation times), or something "
        "opened it after they were written "
        "(stock ldb, a restore, a tool without the plugin) and may have "
        "written keys they also hold. Nothing was changed. Sequence numbers "
        "cannot order those writes against the pool's, so replaying could "
        "revert newer writes. If it is the right DB, to replay anyway (for "
        "a key written by both, the entry with the higher sequence number "
        "wins, which may be the older write): flintkv_tool recover "
        "--allow_foreign_open (C++: RecoveryOptions::allow_foreign_open)");
  }
  // The family the DB's OPTIONS file vouches for. An OPTIONS file written
  // before families existed records 0, and so do lists of that time.
  auto accepted = [&](const MemtableMeta* m) {
    return b.accept_incarnation && (m->incarnation == b.accept_incarnation ||
                                    m->family == b.accept_incarnation);
  };
  auto ours = [&](const MemtableMeta* m) {
    if (accepted(m)) return true;
    if (b.options_flintkv) {
      return b.family ? m->family == b.family
                      : m->family == 0 && m->incarnation == 0;
    }
    // allow_foreign_open: one family only, the lists' own.
    return m->family == meta.begin()->second->family;
  };
  std::string others;
  std::set<uint64_t> own;
  for (auto& [id, m] : meta) {
    // A list that names a DB IDENTITY is claimed only by a DB whose
    // IDENTITY is known and the same: a DB without one (a copy, backup or
    // checkpoint that did not take it) is unknown, and unknown refuses.
    const bool db_mismatch =
        m->db_id_hash != 0 && m->db_id_hash != b.db_id_hash;
    if (ours(m) && (!db_mismatch || accepted(m))) {
      own.insert(id);
      continue;
    }
    if (!others.empty()) others += ", ";
    others += "list " + std::to_string(id) + " (incarnation " +
              Hex(m->incarnation) + ", family " + Hex(m->family) +
              (!db_mismatch        ? ""
               : b.db_id_hash == 0 ? ", a DB IDENTITY this DB does not have"
                                   : ", another DB IDENTITY") +
              ")";
  }
  // Another DB's lists are never claimed. They can sit beside this DB's
  // only if two opens raced past S1 (each DB's lists then carry its own
  // family): claim this DB's and leave the rest to their DB's recovery.
  // With nothing of this DB's, the named DB is the wrong one: refuse.
  if (!others.empty() && own.empty()) {
    return Status::InvalidArgument(
        "flintkv: pool " + path + " holds unflushed memtables that are not " +
        b.db_path + "'s: " + others + "; " +
        (b.options_flintkv
             ? "the DB's OPTIONS file " + b.options_file +
                   " records incarnation " + Hex(b.incarnation) + ", family " +
                   Hex(b.family)
             : std::string("the DB records no FlintKV incarnation")) +
        ". They belong to another database (two DBs on one pool_dir), or "
        "the DB was replaced by a copy, backup or checkpoint taken before "
        "they were written. Nothing was changed. Recover them into the DB "
        "that wrote them (flintkv_tool recover --db=<that DB> --pool_dir=" +
        pool_dir_ + "); `flintkv_tool inspect --pool_dir=" + pool_dir_ +
        "` lists them; to claim them for this DB anyway: "
        "--accept_incarnation=<incarnation or family> (RecoveryOptions::"
        "accept_incarnation); if the DB that wrote them no longer exists, "
        "drop them and their writes: " +
        DiscardHintLocked(leftovers_));
  }
  // S10: a copy of the DB at another path (a checkpoint, a backup restored
  // elsewhere, `cp -a`) carries the same OPTIONS file, and on RocksDB 9.x
  // the same DB id, as the DB that wrote the lists; while that DB is still
  // where its life recorded it (db_location.h), on this pool, recovering
  // the copy would take its unflushed writes from it. (A pool copied with
  // the DB leaves the other DB its own pool: its OPTIONS file names that.)
  std::map<uint64_t, std::string> elsewhere;  // life -> its DB's directory
  for (uint64_t id : own) {
    const MemtableMeta* m = meta[id];
    if (accepted(m) || elsewhere.count(m->incarnation)) continue;
    std::string there;
    for (const std::string& dir :
         RecordedDbLocations(pool_dir_, m->incarnation)) {
      if (SamePath(dir, b.db_path)) {
        there.clear();
        break;
      }
      if (!FileExists(dir + "/CURRENT")) continue;
      const DbBinding o = ReadDbBinding(dir);
      if (o.options_flintkv && SamePath(o.pool_dir, pool_dir_) &&
          (o.incarnation == m->incarnation ||
           (o.db_id_hash != 0 && o.db_id_hash == b.db_id_hash))) {
        there = dir;
      }
    }
    if (!there.empty()) elsewhere[m->incarnation] = there;
  }
  if (!elsewhere.empty()) {
    const auto& [inc, dir] = *elsewhere.begin();
    return Status::InvalidArgument(
        "flintkv: pool " + path + " holds unflushed memtables of life " +
        Hex(inc) + " of the DB at " + dir + ", which still exists there, " +
        "and " + b.db_path +
        " is a copy of it (a checkpoint, or a backup or copy put elsewhere: "
        "the same OPTIONS file" +
        (b.db_id_hash != 0 ? " and DB id" : "") +
        "). Nothing was changed. Recover them into that DB: flintkv_tool "
        "recover --db=" +
        dir + " --pool_dir=" + pool_dir_ +
        " (or open it with flintkv::OpenDB). Open the copy with its own "
        "pool_dir. If " +
        b.db_path + " replaces " + dir + " (moved), remove or rename " + dir +
        " first, or claim them for this copy anyway: --accept_incarnation=" +
        Hex(inc) + " (RecoveryOptions::accept_incarnation)");
  }
  claimed_ = true;
  claim_thread_ = std::this_thread::get_id();
  claim_kind_ = kind;
  // The recovering life continues the leftovers' family, so that an
  // interrupted recovery's lists and OPTIONS file still name it.
  claim_family_ = own.empty() ? 0 : meta[*own.begin()]->family;
  claim_db_id_hash_ = b.db_id_hash;
  claim_recovered_upto_ = b.recovered_upto;
  claim_newest_created_ = 0;
  std::set<uint64_t> lives;
  for (uint64_t id : own) {
    claim_newest_created_ =
        std::max(claim_newest_created_, meta[id]->created_micros);
    lives.insert(meta[id]->incarnation);
  }
  claimed_lists_ = own;
  // S9: the claimed lives' empty lists, for the identity checks.
  claimed_empty_.clear();
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (EndedEmptyListLocked(l) && lives.count(MetaOf(l)->incarnation)) {
      claimed_empty_.insert(l->list_id);
    }
  }
  claim_note_ = others.empty() ? "" : "left for their own DB: " + others;
  keep_alive_ = shared_from_this();
  return Status::OK();
}

std::vector<pmem::ListRoot*> PoolSession::ListsLocked(
    const std::set<uint64_t>& ids) const {
  std::vector<pmem::ListRoot*> out;
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (ids.count(l->list_id)) out.push_back(l);
  }
  return out;
}

std::vector<pmem::ListRoot*> PoolSession::ClaimedLists() const {
  std::lock_guard<std::mutex> g(mu_);
  return ListsLocked(claimed_lists_);
}

std::vector<pmem::ListRoot*> PoolSession::ClaimedEmptyLists() const {
  std::lock_guard<std::mutex> g(mu_);
  return ListsLocked(claimed_empty_);
}

std::string PoolSession::claim_note() const {
  std::lock_guard<std::mutex> g(mu_);
  return claim_note_;
}

bool PoolSession::claimed() const {
  std::lock_guard<std::mutex> g(mu_);
  return claimed_;
}

void PoolSession::FinishRecovery(uint64_t life_start) {
  std::shared_ptr<PoolSession> self;
  std::lock_guard<std::mutex> g(mu_);
  // The recovering life (the only one: S1). Its lists extend the DB as
  // this recovery left it, never an older copy.
  std::vector<uint64_t> lives;
  for (const auto& [inc, l] : lives_) lives.push_back(inc);
  for (uint64_t inc : lives) RaiseFloorLocked(inc, life_start);
  // S8: the claimed lists are in the DB's files now.
  for (auto& [inc, l] : lives_) {
    l.recovered_upto = std::max(l.recovered_upto, claim_newest_created_);
  }
  for (uint64_t id : claimed_lists_) leftovers_.erase(id);
  claimed_lists_.clear();
  claimed_empty_.clear();
  ScanLeftoversLocked();  // drops the recovered lives' empty lists (S9)
  claim_note_.clear();
  claimed_ = false;
  self.swap(keep_alive_);  // released after the lock
}

uint64_t PoolSession::claim_recovered_upto() const {
  std::lock_guard<std::mutex> g(mu_);
  return claimed_ ? claim_recovered_upto_ : 0;
}

uint64_t PoolSession::RecoveredUpto(uint64_t incarnation) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = lives_.find(incarnation);
  return it == lives_.end() ? 0 : it->second.recovered_upto;
}

void PoolSession::ReleaseClaim() {
  std::shared_ptr<PoolSession> self;
  std::lock_guard<std::mutex> g(mu_);
  claimed_lists_.clear();
  claimed_empty_.clear();
  claim_note_.clear();
  claimed_ = false;
  self.swap(keep_alive_);
}

}  // namespace rocks
}  // namespace flintkv

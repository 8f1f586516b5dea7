// PoolSession: the one owner of a FlintKV pool's use by RocksDB in this
// process. Every factory, memtable (FlintRep) and recovery port
// (recovery_port.h) naming the same pool_dir shares one session:
// libpmemobj allows one open per file, and PMDK's file lock refuses the
// pool to a second process.
//
// The session owns the pool, the DB life it serves, the unflushed lists
// earlier lives left (leftovers) and the recovery claim on them:
//
//   idle ─BeginOpen─▶ opening ─first memtable─▶ live ─last memtable─▶ idle
//                                                        (or leftovers)
//   leftovers ─Claim (identity checked)─▶ claimed ─BeginOpen─▶ opening
//   claimed ─FinishRecovery / ReleaseClaim─▶ idle / leftovers
//
// A life is one DB::Open to Close of one DB. BeginOpen prepares it for the
// opening thread; the open's first memtable (created on that thread, inside
// DB::Open) binds it to the DB's info Logger, which tells this DB's later
// memtables from another DB's. A memtable whose Logger belongs to no life
// and whose thread prepared none is a read-only or secondary instance's
// (those opens never call ValidateOptions): its list is unowned, holds WAL
// replay only, and is always dropped. A life gets a random incarnation
// number and a family: its own number, or, for a life that recovers
// leftovers, the family of those leftovers (so a chain of interrupted
// recoveries stays one family). Both are recorded in every list the life
// creates and, through the factory's `incarnation` and `family` options, in
// the DB's OPTIONS file. Recovery reads the DB's latest OPTIONS file and
// IDENTITY and claims only lists of that family (db_binding.h).
//
// Invariants (docs/invariants.md):
//  S1 one DB life per pool at a time: BeginOpen refuses while another life
//     has memtables, a recovery claim is another thread's, or another
//     thread is opening a DB with the same factory (its OPTIONS file would
//     record either life); two opens that race past it with their own
//     factories get two lives, each bound to its own DB's Logger, so their
//     lists never mix;
//  S2 a DB::Open over unrecovered leftovers proceeds only under a recovery
//     claim (P6: new writes would reuse the lost sequence numbers);
//  S3 every list carries the incarnation, family and DB identity of the
//     life that wrote it; a claim covers only lists of the family the named
//     DB's OPTIONS file records, else it is refused naming the lists;
//  S4 a list is dropped only when RocksDB flushed it (MarkFlushed), when
//     it holds nothing (but see S9), when its life declared every write
//     WAL-logged
//     (MemTableOptions::wal_logged), or when it is destroyed before its
//     DB::Open finished (it then holds WAL replay only: RocksDB flushed it
//     to SST itself, or the open failed and the WAL is still there); a
//     memtable destroyed unflushed otherwise stays for recovery;
//  S5 a plain DB::Open drops the leftover lists instead of refusing only
//     when the WAL of the DB that wrote them holds every committed entry of
//     every one (wal_coverage.h, C1-C3), and drops all or none: the DB's
//     latest OPTIONS file must name each list's life (db_location.h,
//     db_binding.h), the open must read the same WAL directory and replay
//     it (no WAL filter, no best_efforts_recovery), and the WAL files are
//     synced first. RocksDB's WAL replay then restores the entries, or
//     they are in SST files already; a crash after the drop finds them in
//     the WAL again. Otherwise S2's refusal stands and the pool is as it
//     was.
//  S6 a memtable created with a live life's Logger after its DB::Open
//     finished is unconfirmed (kOwnerPending, memtable_meta.h): a
//     read-only or secondary instance sharing the primary's Logger makes
//     such memtables, and a Logger is no identity. RocksDB makes the
//     primary's next memtable of a family on the thread that then seals the
//     current one (SwitchMemtable), before any write reaches it: that seal
//     confirms it, durably, before its first entry. The first memtable of
//     a family the life had none of (CreateColumnFamily) is confirmed by the
//     OPTIONS file RocksDB writes on the same thread before returning the
//     family's handle, once RocksDB asked it IsSnapshotSupported on that
//     thread; no read-only or secondary instance does either. An
//     unconfirmed list is dropped when its memtable goes, is never a
//     leftover (it holds another instance's WAL replay, or nothing), and
//     does not keep its life going. A memtable made with the Logger of a
//     life still inside DB::Open on a thread other than the open's, or for
//     a family whose life's mutable memtable is gone (dropped: RocksDB
//     never reuses a family's id), is another instance's outright
//     (unowned). A life inside DB::Open keeps its Logger while it has no
//     list (RocksDB destroys the memtable of a flushed WAL replay before it
//     makes the next).
//  S7 a column family dropped by a life marks the life's lists of it
//     (kFamilyDropped, memtable_meta.h) durably once RocksDB wrote the
//     OPTIONS file that follows the drop's MANIFEST edit: DropColumnFamily
//     first asks the family's mutable memtable IsSnapshotSupported, which
//     RocksDB otherwise asks right after CreateColumnFamily made the
//     memtable, and at the end of DB::Open of every family (told apart: the
//     queries one thread made before its OPTIONS write cover all the life's
//     families, or the default one, which is never dropped; so does a drop
//     of a family without snapshots, after which RocksDB asks the others,
//     and such a drop is not marked). Recovery into a DB that still
//     has the family refuses: the DB is older than the drop (a restored
//     copy), and the other families' lists extend a state it never
//     reached. (Not marked: a family whose drop was cut short by a crash
//     before that OPTIONS file, or the last family of a life whose
//     default family is not FlintKV's.)
//  S8 recovery refuses, changing nothing, claimed lists created no later
//     than the newest list the DB's family's recoveries replayed into it
//     (recovered_upto, which a recovery raises and writes into the DB's
//     OPTIONS file once its lists are dropped, and which every life of
//     the family carries there) that the DB's record of recovered lists
//     does not name: such lists are in the DB already (an older pool
//     image put back, with the record deleted or left behind by a backup
//     or checkpoint, which do not take it), and replaying them would
//     apply them twice.
//  S9 a life's empty lists are evidence too: the list of a family that
//     S7 marked dropped stays in the pool when its memtable goes, even
//     empty (a checkpoint or backup flushed it just before the drop), and
//     recovery checks the claimed lives' empty lists with the floor (S3)
//     and S7's rule like their other lists (a DB having the dropped family
//     of a marked one is older than that life), but not with "lacks the
//     family" (a kill between a drop and its OPTIONS file leaves an empty
//     list unmarked). An ended life's empty lists are dropped once it has
//     no leftover left.
//  S10 a claim is refused, changing nothing, when a claimed list's life
//     recorded its DB at another directory (db_location.h) that still
//     holds that DB on this pool (its latest OPTIONS file names this
//     pool_dir, and the life or the claimant's IDENTITY): the claimant is
//     a copy (a checkpoint, a backup restored elsewhere) and the lists are
//     the other DB's. A DB copied or moved with a copy of its pool (the
//     other DB's OPTIONS file names another pool_dir) is not refused.
// Thread safety: every member is thread-safe (one mutex; none is on the
// write path: memtable creation and destruction only).
// Persistence: list stamps are written with the list (Pool::CreateList is
// atomic); DropList is crash-idempotent (P6).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/status.h"
#include "memtable/rocksdb/recovery_port.h"
#include "pmem/pool.h"
#include "rocksdb_common/memtable_meta.h"

namespace flintkv {
namespace rocks {

// Pool space for RocksDB memtables, one rule for the Open-time check, the
// reserve and the pressure threshold.
struct SpaceRule {
  // Pool bytes NewChunk keeps back for writes already past the full check
  // while RocksDB switches memtables (about 3% of the pool, at least 8
  // chunks: one per writer in flight).
  uint64_t reserve = 0;
  // Below this much free space, a memtable holding entries reports itself
  // full so that RocksDB switches and flushes it.
  uint64_t pressure_free = 0;

  static SpaceRule For(uint64_t pool_size, uint64_t chunk_size);
  // PMEM that max_write_buffer_number memtables of write_buffer_size (plus
  // the one being built while they flush) occupy, in whole chunks.
  static uint64_t MemtableBytes(uint64_t write_buffer_size,
                                int max_write_buffer_number,
                                uint64_t chunk_size);
  // Smallest pool that holds memtable_bytes without pressure.
  uint64_t MinPoolSize(uint64_t memtable_bytes) const {
    return memtable_bytes + pressure_free;
  }
};

// The DB a recovery is for, as its files tell (db_binding.h).
struct DbBinding {
  std::string db_path;
  std::string options_file;  // latest OPTIONS file ("" if none)
  std::string wal_dir;       // the wal_dir it names ("": the DB's directory)
  // The latest OPTIONS file names the flintkv memtable factory; false means
  // the DB was last opened without FlintKV (or has no OPTIONS file).
  bool options_flintkv = false;
  std::string other_factory;  // the factory it names instead
  uint64_t incarnation = 0;   // recorded there (0: before incarnations)
  uint64_t family = 0;
  uint64_t recovered_upto = 0;  // S8 (0: none recorded)
  std::string pool_dir;         // the factory's there (S10)
  uint64_t db_id_hash = 0;      // of the DB's IDENTITY (0: none)
  // Overrides (ClaimOverrides, recovery_port.h): replay although the DB
  // was opened without FlintKV since; claim the lists of this incarnation
  // or family as well.
  bool allow_foreign_open = false;
  uint64_t accept_incarnation = 0;
};

// What a plain DB::Open's options say about the WAL its replay reads (S5).
struct OpenWal {
  std::string wal_dir;        // DBOptions::wal_dir ("": the DB's directory)
  bool filtered = false;      // a WalFilter, which may skip records, is set
  bool best_efforts = false;  // best_efforts_recovery: no WAL is replayed
};

class PoolSession : public std::enable_shared_from_this<PoolSession> {
 public:
  // Opens pool_dir/flintkv.pool (creating dir and pool if missing), or
  // returns this process's session on it.
  static Status Open(const std::string& pool_dir, uint64_t pool_size,
                     uint64_t chunk_size, std::shared_ptr<PoolSession>* out);
  // The same for a pool that must exist: NotFound otherwise; never creates.
  static Status OpenExisting(const std::string& pool_dir,
                             std::shared_ptr<PoolSession>* out);
  // Whether pool_dir holds a pool file; for one that does not yet, makes
  // pool_dir (if missing) and checks that it is a directory, creating no
  // pool (FlintKVFactory::PrepareOptions).
  static bool PoolExists(const std::string& pool_dir);
  static Status PreparePoolDir(const std::string& pool_dir);
  static std::string PoolPath(const std::string& pool_dir) {
    return pool_dir + "/flintkv.pool";
  }

  pmem::Pool* pool() const { return pool_.get(); }
  const SpaceRule& space() const { return space_; }

  // ---- Diagnostics (for RocksDB's info log; the adapter writes to stderr
  // only where RocksDB gave a memtable no Logger (space_wait.h) and when
  // it is about to abort the process (flintkv_factory.cc)) ----
  // The pool's notices from its open (emulated PMEM, no pmempool), which
  // comes before any RocksDB Logger exists: returned once per Logger, for
  // the first memtable of each DB, empty otherwise; with them, once, what
  // the last BeginOpen did about leftovers (S5).
  std::vector<std::string> NoticesFor(const void* logger);
  // True at most once per `interval` for this pool (space_wait.h: one
  // "waiting for flushes" line however many threads wait).
  bool SpaceWaitNoticeDue(std::chrono::steady_clock::duration interval);
  // The same for the pressure notice (PinnedNote, when memtables switch
  // early).
  bool PressureNoticeDue(std::chrono::steady_clock::duration interval);
  // The flushed memtables RocksDB still keeps alive (open iterators,
  // snapshots' versions, max_write_buffer_size_to_maintain) and the pool
  // space their lists hold, which returns only when RocksDB destroys
  // them; "" if there are none. For the log lines of a pool short of space.
  std::string PinnedNote();

  // ---- DB lives (the factory and its memtables) ----
  // DB::Open is starting on this thread (once per column family;
  // option_checks.h has run). Refuses a second DB (S1) and an open over
  // unclaimed leftovers (S2) that the DB's WAL does not hold (S5);
  // otherwise prepares a new life for the thread.
  // `factory`: the factory object (a DB's OPTIONS file records the life of
  // the factory that serialized it, so one factory serves one opening DB).
  Status BeginOpen(const void* factory, bool wal_logged,
                   uint64_t write_buffer_size, const OpenWal& wal);
  // A claim for an open of this kind is in place (recovery_port.h): the
  // open's option checks differ by it (option_checks.h).
  bool ClaimedFor(OpenKind kind) const;
  // A memtable of the DB whose info log is `logger` is being created: its
  // list's stamp (binds the thread's prepared life to the DB, see above).
  MemtableMeta NewListMeta(uint32_t column_family_id, const void* logger);
  // The list backs a live memtable / its memtable is gone. OnListDestroyed
  // keeps or drops the list (S4); flushed: RocksDB called MarkFlushed.
  void OnListCreated(pmem::ListRoot* list);
  void OnListDestroyed(pmem::ListRoot* list, bool flushed, bool empty,
                       std::string* kept_note);
  // RocksDB sealed the list's memtable (MarkReadOnly): if it was its life's
  // mutable memtable of its column family, the list this thread created
  // for that family is the successor, and is confirmed (S6).
  void OnListSealed(pmem::ListRoot* list);
  // RocksDB asked the list's memtable IsSnapshotSupported: a drop of its
  // family if it is its opened life's current list (CreateColumnFamily's
  // is not confirmed yet) and not one of DB::Open's sweep (S7, decided at
  // the next OnOptionsPersisted).
  void OnSnapshotQuery(pmem::ListRoot* list);
  // RocksDB wrote the DB's OPTIONS file naming `incarnation`: the last step
  // of a successful DB::Open (also repeated at CreateColumnFamily, whose
  // new list it confirms (S6), at DropColumnFamily (S7), SetOptions and
  // the like).
  void OnOptionsPersisted(uint64_t incarnation);
  // A memtable of life `incarnation` was flushed (the MANIFEST edit is
  // durable) and the MANIFEST's last sequence is at least seq (see
  // FlintRep::min_seq_). Raised, durably, in the flushed_floor of the
  // life's live lists and of the lists it creates later.
  void OnListFlushed(uint64_t incarnation, uint64_t seq);
  // Largest write_buffer_size an open asked for (lock-free: memtables read
  // it on the write path under pool pressure).
  uint64_t write_buffer_size_hint() const {
    return wbs_hint_.load(std::memory_order_relaxed);
  }

  // ---- Recovery ----
  // Claims the leftovers of the DB `b` names (S3), for an open of this
  // kind (recovery_port.h), which recovers them before any write. Never
  // claims another DB's lists: refuses, changing nothing, if every
  // leftover is another DB's or life's, or if the DB was opened without
  // FlintKV since; leaves them if the DB has its own too.
  Status Claim(const DbBinding& b, OpenKind kind);
  // The claimed leftover lists, in list_id order.
  std::vector<pmem::ListRoot*> ClaimedLists() const;
  // The empty lists the claimed lists' lives left (S9), in list_id order:
  // for recovery's identity checks only.
  std::vector<pmem::ListRoot*> ClaimedEmptyLists() const;
  bool claimed() const;
  // Leftovers of another DB the claim left in the pool ("" if none).
  std::string claim_note() const;
  // Recovery put the claimed lists' data in SST files; they are dropped by
  // the caller. Ends the claim. life_start: a sequence number the DB
  // durably reached in the recovery (its files, or the clock's import),
  // which the recovering life's lists record as their flushed_floor (S3):
  // a DB restored from a copy taken before it cannot claim them.
  void FinishRecovery(uint64_t life_start);
  // Ends a claim without recovering (an error): the leftovers stay.
  void ReleaseClaim();
  // S8: the creation time of the newest list the life's family recovered
  // into its DB (0: none), for the DB's OPTIONS file; and the value the
  // claimed DB's OPTIONS file records.
  uint64_t RecoveredUpto(uint64_t incarnation) const;
  uint64_t claim_recovered_upto() const;
  // Lists with entries that no live memtable of this process owns.
  std::set<uint64_t> LeftoverIds() const;
  // Drops the leftover lists of life `incarnation` (0: of every life, also
  // lists whose metadata is damaged), whose writes are then gone: for
  // leftovers of a DB that no longer exists (destroyed, replaced).
  // *dropped says which ("list <id> (incarnation <hex>, ..., <n>
  // entries)"). With `dry_run` only says. Busy while the pool serves a DB
  // or a recovery.
  Status DiscardLeftovers(uint64_t incarnation, bool dry_run,
                          std::vector<std::string>* dropped);

  ~PoolSession();

 private:
  struct Life {
    uint64_t incarnation = 0;
    uint64_t family = 0;
    uint64_t db_id_hash = 0;
    bool recovers_every_open = false;  // OpenKind::kRecoverEveryOpen
    bool wal_logged = false;
    bool opened = false;  // DB::Open finished (S4)
    uint64_t flushed_floor = 0;
    const void* logger = nullptr;  // the DB's info log (binds memtables)
    const void* factory = nullptr;
    std::thread::id open_thread;  // the DB::Open's (S6)
    std::chrono::steady_clock::time_point prepared_at;
    int lists = 0;  // live memtables, confirmed ones only (S6)
    std::set<uint32_t> column_families;  // that had a list of the life
    // S7: per thread, since its last OPTIONS file.
    std::map<std::thread::id, std::set<uint32_t>> queried;
    uint64_t recovered_upto = 0;  // S8
  };
  // S6: confirms the lists this thread made for families the life had no
  // mutable memtable of (CreateColumnFamily, which persisted OPTIONS).
  void ConfirmNewFamiliesLocked(Life* life);
  // S7: marks the lists of the families queried since the last OPTIONS
  // file dropped, unless the queries covered every family of the life.
  void MarkDroppedFamiliesLocked(uint64_t incarnation, Life* life);
  bool AnyLiveLocked() const;
  // The pool's lists with these ids, in list_id order.
  std::vector<pmem::ListRoot*> ListsLocked(const std::set<uint64_t>& ids) const;
  // Raises the life's flushed_floor to seq in it and, durably, in each of
  // its live lists (S3).
  void RaiseFloorLocked(uint64_t incarnation, uint64_t seq);
  PoolSession() = default;
  void ScanLeftoversLocked();
  // An empty memtable list no live memtable owns, its metadata intact (S9).
  bool EndedEmptyListLocked(const pmem::ListRoot* l) const;
  // S5: drops every leftover if the WAL of their DB holds them all, else
  // none and says in *why_not what keeps them.
  void DropWalCoveredLocked(const OpenWal& wal, std::string* why_not);
  // With no leftover left, a watermark or recovery record still set filters
  // nothing that exists: cleared, so no later run is filtered by it.
  void ClearStaleWatermarkLocked();
  std::string LeftoverSummaryLocked() const;
  // The discard command for each life the lists belong to.
  std::string DiscardHintLocked(const std::set<uint64_t>& lists) const;
  static uint64_t NewIncarnation();

  mutable std::mutex mu_;
  std::unique_ptr<pmem::Pool> pool_;
  std::vector<std::string> notices_;      // the pool's, from its open
  std::vector<std::string> open_notes_;   // for the next DB's log, once
  const void* noticed_logger_ = nullptr;  // the last Logger given them
  // steady_clock ticks of the last space-wait notice (min: none yet).
  std::atomic<int64_t> space_wait_noticed_{INT64_MIN};
  std::atomic<int64_t> pressure_noticed_{INT64_MIN};
  std::string pool_dir_;
  SpaceRule space_;
  std::atomic<uint64_t> wbs_hint_{64ull << 20};
  std::map<std::thread::id, Life> prepared_;  // by BeginOpen, not yet bound
  std::map<uint64_t, Life> lives_;            // bound, by incarnation
  std::map<uint64_t, pmem::ListRoot*> live_;  // lists of live memtables
  // S6: per (incarnation, column family), the list of the life's mutable
  // memtable; per thread, the unconfirmed list it created last for each.
  using LifeCf = std::pair<uint64_t, uint32_t>;
  std::map<LifeCf, uint64_t> current_;
  std::map<std::thread::id, std::map<LifeCf, uint64_t>> pending_;
  // S6: pending first lists of new families CreateColumnFamily asked.
  std::set<uint64_t> new_family_queried_;
  std::set<uint64_t> leftovers_;
  // The claim (a recovery about to open the DB) and what the next life
  // inherits from it.
  bool claimed_ = false;
  std::thread::id claim_thread_;  // the recovery's thread: it opens the DB
  OpenKind claim_kind_ = OpenKind::kReplayThenWrite;
  uint64_t claim_family_ = 0;
  uint64_t claim_db_id_hash_ = 0;
  uint64_t claim_recovered_upto_ = 0;  // S8: the DB's
  uint64_t claim_newest_created_ = 0;  // S8: of the claimed lists
  std::set<uint64_t> claimed_lists_;
  std::set<uint64_t> claimed_empty_;  // S9
  std::string claim_note_;
  // Kept alive while claimed: between the claim and DB::Open nothing else
  // may hold the session.
  std::shared_ptr<PoolSession> keep_alive_;
};

}  // namespace rocks
}  // namespace flintkv

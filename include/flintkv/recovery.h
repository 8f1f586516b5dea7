// Bringing unflushed FlintKV memtables back into a RocksDB database after a
// crash (WAL disabled), and dropping those of a DB that no longer exists.
// The crash-atomic OpenDB wrapper is flintkv/open_db.h; reading a pool
// without changing a DB is flintkv/inspect.h.
//
//   // Offline (what `flintkv_tool recover` does): open, replay (SST files
//   // ingested into the DB), close.
//   flintkv::RecoveryOptions ro;
//   ro.memtable.pool_dir = "/mnt/pmem0/db1";
//   ro.info_log = logger;  // a rocksdb::Logger for progress (default: none)
//   flintkv::RecoveryReport report;
//   rocksdb::Status s = flintkv::RecoverDB(options, "/data/db1", cfs, ro,
//                                          &report);
//
// Guarantees (docs/rocksdb_recovery.md has the argument):
//  - Plain factory (options.memtable_factory = flintkv factory, any DB
//    API) + recovery: every write whose DB::Write returned is recovered;
//    a multi-key WriteBatch that was in flight may come back in part.
//  - OpenDB's wrapper (flintkv/open_db.h): additionally every WriteBatch is
//    all-or-nothing; recovery replays only entries at or below the
//    wrapper's persisted watermark.
//  - Never resurrects a value older than one already in SST files (P6).
//  - DeleteRange is not covered by the plain factory (RocksDB keeps range
//    tombstones in its own DRAM table, never in the memtable rep); the
//    wrapper makes it durable by flushing.
//  - A pool's lists are replayed only into the DB that wrote them.
// Thread safety: RecoverInto/RecoverDB must not run concurrently with writes
// to the same DB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flintkv/export.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"
#include "rocksdb/status.h"

namespace flintkv {

enum class WatermarkMode {
  kAuto,  // honor the pool's watermark if a wrapper ever enabled it
  kOn,    // honor it (error if the pool has none)
  kOff,   // ignore it: replay every committed entry (plain factory use)
};

struct RecoveryOptions {
  // The factory every column family gets (flintkv/rocksdb_memtable.h).
  // memtable.pool_dir is the factory's pool_dir (one pool_dir per DB):
  // recovery uses this pool, never the one a (possibly moved or copied)
  // DB's OPTIONS file names, and never creates one (OpenDB does, for a new
  // DB, of memtable.pool_size).
  MemTableOptions memtable;
  WatermarkMode watermark = WatermarkMode::kAuto;
  // true: replayed entries are written into SST files and ingested
  // (docs/rocksdb_recovery.md); what SST files cannot express goes through
  // DB writes. false: everything through DB writes, then a flush.
  bool ingest_sst = true;
  // Entries written through the DB go in WriteBatches of about this size.
  size_t batch_bytes = 1 << 20;
  // Progress and summary lines, at INFO (what was done) and WARN (a damaged
  // record overridden, a step that failed without failing the recovery);
  // nullptr: quiet.
  std::shared_ptr<rocksdb::Logger> info_log;
  // Overrides of the identity checks (docs/rocksdb_recovery.md,
  // "Operations"); each refusal names the one that applies.
  // Replay although the DB was opened without FlintKV after the lists were
  // written: for a key written by both, the higher sequence number wins,
  // which may be the older write.
  bool allow_foreign_open = false;
  // Claim the lists of this incarnation (or family) as this DB's, although
  // the DB's OPTIONS file does not record it.
  uint64_t accept_incarnation = 0;
  // Replay although the DB's WAL held DeleteRange operations (plain
  // factory, WAL-logged DeleteRange mixed with WAL-less writes): the pool's
  // writes land above every range deletion, which may bring back a value
  // a DeleteRange removed.
  bool allow_wal_delete_range = false;
  // Replay although the DB is older than the pool's memtables (its last
  // sequence number falls short of them: restored from a backup or
  // checkpoint after they were written), making a state that never was.
  bool allow_older_db = false;
};

struct FLINTKV_EXPORT RecoveryReport {
  uint64_t lists_found = 0;  // leftover memtable lists in the pool
  uint64_t lists_replayed = 0;
  uint64_t lists_checked = 0;         // replayed with per-key presence checks
  uint64_t lists_copies_dropped = 0;  // copies of an interrupted recovery
  // already recovered into this DB (a pool copy, or a rerun after the
  // flush): dropped, not replayed
  uint64_t lists_already_recovered = 0;
  uint64_t lists_dropped_cf = 0;     // of a column family that no longer exists
  uint64_t entries_seen = 0;         // committed entries walked
  uint64_t entries_replayed = 0;     // re-applied (SST files or DB writes)
  uint64_t entries_superseded = 0;   // older versions of a replayed key
  uint64_t entries_present = 0;      // already in the DB (SST, WAL replay)
  uint64_t dropped_uncommitted = 0;  // version MAX (P4)
  uint64_t dropped_torn_batch = 0;   // FlintKV batch rollback (P3)
  uint64_t dropped_above_watermark = 0;  // unacknowledged (wrapper)
  uint64_t bytes_replayed = 0;
  uint64_t sst_files = 0;      // written and ingested
  uint64_t sst_entries = 0;    // in them (a key's entries folded into one)
  uint64_t fallback_keys = 0;  // replayed through DB writes (ingest_sst)
  bool watermark_used = false;
  uint64_t watermark = 0;
  // The DB's last sequence number was raised to this, the newest the
  // pool's lists held (0: it was already there), so that no later write
  // reuses a number acknowledged before the crash.
  uint64_t sequence_raised_to = 0;
  double triage_seconds = 0;  // deciding which lists are already in SST
  double replay_seconds = 0;  // triage + walk + SST files / DB writes + ingest
  double ingest_seconds = 0;  // IngestExternalFiles
  double flush_seconds = 0;   // flush of all column families + drop
  std::string ToString() const;
};

// Replays the leftover memtables of options.memtable.pool_dir into db,
// which must have been opened with the flintkv factory on that pool_dir
// after BeginRecovery(db_path, options) (or through OpenDB/RecoverDB, which
// do it), and must not have taken writes since; open it with
// disable_auto_compactions (re-enable with SetOptions afterwards) so that
// no compaction zeroes the SST sequence numbers that tell which memtables
// were already flushed. handles: every column family of the DB (lists of
// other column families are dropped: their CF was dropped). Ingests the
// replayed data as SST files (or writes it), flushes all column families,
// then frees the replayed lists. Uses the directory
// <db>/flintkv_recovery for its SST files and removes it.
FLINTKV_EXPORT rocksdb::Status RecoverInto(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const RecoveryOptions& options, RecoveryReport* report);

// Opens options.memtable.pool_dir's pool (it must exist), checks that its
// leftover memtables are the DB at db_path's (its latest OPTIONS file and
// IDENTITY, docs/rocksdb_recovery.md "Operations"), and lets the next
// DB::Open with the flintkv factory on that pool proceed; RecoverInto must
// then run before any write. Without this call such a DB::Open fails (new
// writes would reuse the lost sequence numbers). Refuses, changing
// nothing, if a leftover belongs to another DB or the DB was opened
// without FlintKV since. The DB::Open that follows must run on the same
// thread (the claim is that thread's; another thread's open on the pool is
// refused until RecoverInto or EndRecovery). EndRecovery undoes a claim
// whose DB::Open failed.
FLINTKV_EXPORT rocksdb::Status BeginRecovery(const std::string& db_path,
                                             const RecoveryOptions& options);
FLINTKV_EXPORT void EndRecovery(const std::string& pool_dir);

// Offline recovery: opens the DB at db_path with every column family listed
// in cfs (empty: all of the DB's, with db_options' column family options),
// sets the flintkv factory on options.memtable for each, replays
// (RecoverInto), closes. Afterwards the DB is readable without the plugin
// (stock ldb, db_bench).
FLINTKV_EXPORT rocksdb::Status RecoverDB(
    const rocksdb::Options& db_options, const std::string& db_path,
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs,
    const RecoveryOptions& options, RecoveryReport* report);

// Drops the unflushed memtables a pool holds for a DB that no longer exists
// (destroyed with DestroyDB, or replaced by a new DB at its path): their
// writes are gone for good. Only those of life `incarnation` (the hex
// number `inspect` and the refusals print), or all with 0. *dropped lists
// what was (or, with dry_run, would be) dropped. NotFound if pool_dir holds
// no pool; Busy if a DB of this or another process has it open.
FLINTKV_EXPORT rocksdb::Status DiscardLeftovers(
    const std::string& pool_dir, uint64_t incarnation, bool dry_run,
    std::vector<std::string>* dropped);

}  // namespace flintkv

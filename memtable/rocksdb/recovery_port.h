// RecoveryPort: all that bringing a pool's leftover memtables back into a
// RocksDB database, and a DB that recovers at every open, may ask of the
// RocksDB adapter. A port is a handle on this process's session of one
// pool (pool_session.h), kept alive while a copy of the port lives:
//   - open the pool (existing, or created for a new DB);
//   - claim its leftovers for the DB::Open of one DB, saying what kind of
//     open that is (OpenKind); read the claimed lists; finish the claim
//     once their data is in the DB's files, or release it;
//   - list and discard leftovers of a DB that no longer exists;
//   - check the options of a column family or DB changed after the open,
//     and report a flush the memtables did not see (range tombstones).
// The records in the pool are read and written with their own headers, in
// rocksdb_common/: memtable_meta.h (a list's stamp), memtable_entry.h (an
// entry's encoding) and watermark.h (the root words W and R). The walks
// over a list use the pool (pool()) and memtable/list_walk.h.
// Thread safety: every member is thread-safe. A claim is its thread's: the
// DB::Open it is for must run on the same thread.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/options.h"
#include "rocksdb/status.h"

namespace flintkv {
namespace pmem {
class Pool;
struct ListRoot;
}  // namespace pmem

namespace rocks {

class PoolSession;

// The kind of DB::Open a claim is for. The adapter's rules that differ by
// it read only this: the open's option checks and the life it starts.
enum class OpenKind {
  // Replays the leftovers into the DB and closes it, taking no other
  // write: the pool space rule is not applied to the open (the options and
  // the pool are the crashed life's, and neither can change before the
  // data is out).
  kReplayAndClose,
  // Replays the leftovers; then the caller may keep the DB and write.
  kReplayThenWrite,
  // Replays the leftovers and keeps the DB, whose every open recovers
  // likewise and whose every write the pool logs: a Close may leave
  // memtables unflushed (the next open recovers them), and the factory's
  // wal_logged does not apply.
  kRecoverEveryOpen,
};

// The caller's overrides of the claim's identity checks (S3), named by the
// refusal each applies to.
struct ClaimOverrides {
  // Claim although the DB was opened without FlintKV after the lists were
  // written.
  bool allow_foreign_open = false;
  // Claim the lists of this incarnation (or family) as the DB's, although
  // its OPTIONS file does not record it.
  uint64_t accept_incarnation = 0;
};

class RecoveryPort {
 public:
  // Opens pool_dir/flintkv.pool, or returns this process's session on it:
  // OpenExisting never creates one (NotFound); Open creates the directory
  // and a pool of options.pool_size if missing.
  static rocksdb::Status OpenExisting(const std::string& pool_dir,
                                      RecoveryPort* out);
  static rocksdb::Status Open(const MemTableOptions& options,
                              RecoveryPort* out);
  static std::string PoolPath(const std::string& pool_dir);

  // The pool, for list walks, the root words and space accounting.
  pmem::Pool* pool() const;

  // ---- The claim (pool_session.h: S2, S3, S8-S10) ----
  // Claims the leftovers of the DB at db_path (its latest OPTIONS file and
  // IDENTITY say which), for the DB::Open of this kind that follows on this
  // thread. Refuses, changing nothing, if every leftover is another DB's
  // or life's, or if the DB was opened without FlintKV since; leaves them
  // if the DB has its own too (claim_note).
  rocksdb::Status Claim(const std::string& db_path, OpenKind kind,
                        const ClaimOverrides& overrides);
  bool claimed() const;
  // The claimed leftover lists, in list_id order.
  std::vector<pmem::ListRoot*> ClaimedLists() const;
  // The empty lists the claimed lists' lives left (S9), in list_id order:
  // evidence for the identity checks only.
  std::vector<pmem::ListRoot*> ClaimedEmptyLists() const;
  // Leftovers of another DB the claim left in the pool ("" if none).
  std::string claim_note() const;
  // S8: what the claimed DB's OPTIONS file records (0: nothing).
  uint64_t claim_recovered_upto() const;
  // The claimed lists' data is in the DB's files; the caller drops them.
  // life_start: a sequence number the DB durably reached in the recovery,
  // which the recovering life's lists record as their floor (S3).
  void FinishRecovery(uint64_t life_start);
  // Ends a claim without recovering (an error): the leftovers stay.
  void ReleaseClaim();

  // ---- Leftovers without a claim ----
  // Lists with entries that no live memtable of this process owns.
  std::set<uint64_t> LeftoverIds() const;
  // Drops the leftovers of life `incarnation` (0: all), whose writes are
  // then gone; *dropped says which. Busy while the pool serves a DB or a
  // recovery.
  rocksdb::Status DiscardLeftovers(uint64_t incarnation, bool dry_run,
                                   std::vector<std::string>* dropped);

  // ---- A DB the pool serves ----
  // The checks DB::Open ran on the factory (option_checks.h), for options
  // set later with SetOptions / SetDBOptions or a column family created
  // later, of a DB whose open was of this kind.
  rocksdb::Status CheckOptions(const rocksdb::DBOptions& db,
                               const rocksdb::ColumnFamilyOptions& cf,
                               OpenKind kind) const;
  // A flush of `factory`'s memtables is durable and put a file holding
  // sequence number `seq` in the DB, though no memtable saw an entry that
  // new (range tombstones only, which RocksDB keeps in a table of its own):
  // raises the floor of the factory's life as a flush of a memtable would
  // (S3). `seq` must be in a live file. No-op for a factory that is not
  // FlintKV's or has made no memtable yet.
  static void RangeTombstonesFlushed(const rocksdb::MemTableRepFactory& factory,
                                     uint64_t seq);

 private:
  std::shared_ptr<PoolSession> session_;
};

}  // namespace rocks
}  // namespace flintkv

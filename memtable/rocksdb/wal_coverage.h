// WAL coverage: which of a pool's leftover memtable lists the DB's
// write-ahead log holds entirely, so that a plain DB::Open can leave them
// to RocksDB's own WAL replay instead of asking for `flintkv_tool recover`
// (pool_session.h, S5).
//
// A leftover list is a memtable that a crash, or a Close that did not flush
// it (with the WAL on, RocksDB does not flush at Close), left in the pool.
// When each of its writes was WAL-logged, the DB's WAL holds every entry:
// RocksDB's WAL replay at the next DB::Open puts it back with the same
// sequence number, or, for a WAL older than its column family's log number,
// it is already in an SST file. Either way the list adds nothing and
// replaying it as well would apply its Merge operands twice.
//
// Invariants (docs/invariants.md):
//  C1 a list is covered only if every committed entry of it (sequence
//     number, column family, type, user key and value) is in a WAL record
//     that parsed and passed its checksum, at that sequence number; the
//     list's metadata must be intact and its walk must succeed;
//  C2 the WAL files are read in log-number order and the read ends at the
//     first fragment that is torn, fails its checksum, is zeroed (except
//     the unwritten end of the newest log and a recycling writer's padding
//     of a block's last 7-10 bytes), is an older log's record in a
//     recycled log (except at the end of the newest) or has a type this
//     reader does not know (a compressed WAL, a newer format), and at the
//     first batch that fails to parse: RocksDB's point-in-time recovery
//     stops at the first such record too, so an entry after it is never
//     counted. The check errs only towards "not covered", which keeps the
//     refusal;
//  C3 before a list is dropped on the WAL's word, the WAL files are
//     fdatasynced, and their directory (a WAL-on write without sync=true
//     may still be only in the page cache, while the pool's copy is
//     durable).
// Thread safety: stateless; the caller holds the pool's session. Persistence:
// reads the pool and the WAL files only.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "flintkv/status.h"
#include "pmem/pool.h"

namespace flintkv {
namespace rocks {

struct WalCoverage {
  std::set<uint64_t> covered;  // list ids whose entries the WAL holds (C1)
  uint64_t entries = 0;        // committed entries in the lists checked
  uint64_t found = 0;          // of those, found in the WAL
  uint64_t wal_files = 0;
  uint64_t wal_batches = 0;
  // Batches whose walk ended at an operation the check does not follow (a
  // 2PC section, a blob index, a TimedPut): their entries are unmatched.
  uint64_t abandoned_batches = 0;
  // Why the WAL was not read to its end (C2), or "" if it was.
  std::string stopped;
};

// Checks `lists` (memtable lists of `pool`) against the WAL files
// (<number>.log) in wal_dir. Fails only if wal_dir cannot be listed.
Status CheckWalCoverage(const pmem::Pool& pool,
                        const std::vector<pmem::ListRoot*>& lists,
                        const std::string& wal_dir, WalCoverage* out);

// fdatasyncs every WAL file in wal_dir: before a list the WAL holds is
// dropped from the pool, the WAL copy must be as durable as the pool's.
Status SyncWalFiles(const std::string& wal_dir);

// Calls fn(log_number, record) for each complete record of the WAL files
// in wal_dir, oldest log first, until fn returns false or the read ends
// (C2; *stopped says why, "" at the end of the last file). Exposed for tests.
Status ForEachWalRecord(
    const std::string& wal_dir,
    const std::function<bool(uint64_t, const std::string&)>& fn,
    uint64_t* files, std::string* stopped);

}  // namespace rocks
}  // namespace flintkv

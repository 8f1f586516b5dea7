// Where the DB of each life of a pool lives, as far as the plain factory can
// tell: RocksDB never gives a memtable factory its DB's path, so the WAL
// coverage check (wal_coverage.h, S5 in pool_session.h) needs another way to
// find the WAL that may hold a crashed or closed life's leftovers.
//
// A life learns its DB's directory when RocksDB persists the DB's OPTIONS
// file at the end of DB::Open: RocksDB serializes the factory while the new
// file, <db>/OPTIONS-<number>.dbtmp, is open in this process, so the
// directories of the open OPTIONS-*.dbtmp files (/proc/self/fd) are the
// candidates (usually one; another DB of the process writing its OPTIONS
// file at the same moment adds a second). They are kept, per incarnation,
// in <pool_dir>/flintkv.db_location.
//
// The record is a hint and is never trusted alone: the WAL check uses a
// candidate only if that directory's latest OPTIONS file names the life's
// incarnation (db_binding.h), which no other DB's can (a random 64-bit
// number per life). A missing, stale, foreign or unreadable record only
// leaves the check without a WAL: the open is refused as it was before.
// Thread safety: stateless (the caller holds the pool's session).
// Persistence: the file is replaced whole (written aside, then renamed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flintkv {
namespace rocks {

// The directories of the OPTIONS-*.dbtmp files open in this process.
std::vector<std::string> OpenOptionsFileDirs();

// Adds (incarnation, dirs) to pool_dir's record, keeping the newest lives.
void RecordDbLocation(const std::string& pool_dir, uint64_t incarnation,
                      const std::vector<std::string>& dirs);

// The directories recorded for incarnation (none if there is no record).
std::vector<std::string> RecordedDbLocations(const std::string& pool_dir,
                                             uint64_t incarnation);

}  // namespace rocks
}  // namespace flintkv

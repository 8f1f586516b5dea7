// The record of recovered lists: the file in the DB directory naming the
// lists whose entries a finished recovery put in this DB's SST files
// (invariant P11a, docs/invariants.md).
// Thread safety: none needed; recovery owns the DB while it runs.
#pragma once

#include <set>
#include <string>

#include "pmem/layout.h"
#include "pmem/pool.h"
#include "rocksdb/db.h"
#include "rocksdb/status.h"

namespace flintkv {
namespace recovery {

// The lists whose entries a finished replay put in this DB's SST files,
// kept in the DB directory, one line per list: the pool's libpmemobj id and
// the list's id, DB life and creation time. A list named here is never
// replayed into this DB again: a byte copy of the pool (same pool id, same
// lists) recovered after the original, or the original after its copy,
// applied every Merge operand twice. The life and creation time tell apart
// a list of another history of the same pool id (an older image of the pool
// put back reuses list ids; its new lists must be replayed).
constexpr char kRecoveredListsFile[] = "/FLINTKV_RECOVERED_LISTS";

// The record file's line for list l of pool.
std::string RecordLine(const pmem::Pool* pool, const pmem::ListRoot* l);

// The record file's content ("" when none was written yet).
std::string ReadRecordFile(rocksdb::DB* db);

// The lines of a record file's content.
std::set<std::string> RecordedLines(const std::string& data);

// Writes the file's new content, durably, before the lists are dropped from
// the pool: under a temporary name, synced, renamed over the old one and the
// directory synced (plain Env calls every FileSystem has).
rocksdb::Status RecordRecoveredLists(rocksdb::DB* db,
                                     const std::string& content);

}  // namespace recovery
}  // namespace flintkv

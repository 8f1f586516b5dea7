// What a FlintKV pool holds (flintkv_tool inspect / verify): its lists,
// their state and sequence ranges, checked with the validated walker.
//
//   flintkv::PoolSummary ps;
//   rocksdb::Status s = flintkv::InspectPool("/mnt/pmem0/db1", &ps);
//
// Changes no DB; Busy, nothing read, if another process has the pool open.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flintkv/export.h"
#include "rocksdb/comparator.h"
#include "rocksdb/status.h"

namespace flintkv {

// One list of a pool.
struct ListSummary {
  uint64_t list_id = 0;
  uint32_t kind = 0;   // pmem::ListKind
  uint32_t state = 0;  // pmem::ListState
  uint32_t column_family_id = 0;
  uint64_t created_micros = 0;
  uint64_t incarnation = 0;     // the life that wrote it (DiscardLeftovers)
  bool family_dropped = false;  // its life dropped its column family
  bool leftover = false;        // held entries when the pool was opened
  uint64_t entries = 0;         // committed nodes
  uint64_t uncommitted = 0;
  uint64_t min_seq = 0, max_seq = 0;
  uint64_t chunks = 0, chunk_bytes = 0;
  bool batch_mode = false;
  uint64_t commit_version = 0;
  std::string error;       // structural problem found by the walk, if any
  std::string comparator;  // the user comparator order was checked with
  std::string note;        // e.g. why order was not checked
};

struct PoolSummary {
  std::string path;
  uint64_t size = 0;
  bool is_pmem = false;
  uint64_t bytes_in_use = 0;
  bool watermark_enabled = false;
  uint64_t watermark = 0;
  std::vector<ListSummary> lists;
};

// A memtable list is sorted by its column family's comparator, which the
// pool does not record (CreateMemTableRep is never told its name), so the
// caller names it; first match wins.
struct InspectOptions {
  const rocksdb::Comparator* comparator = nullptr;  // for every list
  std::string comparator_name;  // for every list (Comparator::CreateFromString)
  std::string db;  // per column family, from this DB's OPTIONS and MANIFEST
};
// With none of them, order is checked as bytewise (RocksDB's default) and
// a list that is not bytewise-sorted gets a note, not an error.
// A comparator that cannot be had leaves that list's order unchecked (note).

// Opens the pool read-mostly (opening frees lists retired before a crash,
// and corrects a list state word with one flipped bit) and walks every list
// with the validated walker. A structural problem is reported in
// ListSummary::error and makes the status Corruption, as do a state word
// the open corrected and a damaged root word (W, R).
FLINTKV_EXPORT rocksdb::Status InspectPool(
    const std::string& pool_dir, PoolSummary* out,
    const InspectOptions& options = InspectOptions());

}  // namespace flintkv

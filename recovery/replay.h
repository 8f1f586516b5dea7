// Replaying one leftover memtable list into a RocksDB column family
// (recovery/replay_driver.cc drives it; docs/rocksdb_recovery.md has the
// argument).
//
// Entries arrive in the list's order (user key ascending, sequence
// descending). For each user key the replayer keeps the key's *group*: the
// newest entry and the Merge operands above the newest non-Merge entry
// (its base). Replaying the group oldest first reproduces the key's value.
//
// Exactly once. A group, or its older part, may already be in the DB:
//  - the list was flushed and installed, and the crash hit before
//    MarkFlushed retired it (entries in SST with their own sequence);
//  - RocksDB's WAL replay at DB::Open restored WAL-logged writes with their
//    own sequence numbers;
//  - an interrupted earlier recovery wrote copies (new sequence numbers in
//    the range it persisted in the list's meta) and they reached SST.
// With `check_presence`, the replayer asks the DB for every version of the
// key (rocksdb::GetAllKeyVersions: memtables and SST files) and looks for
// the newest group entry that is already there (the anchor): an entry with
// the same user key and sequence number, and, unless it is a Merge operand
// (a flush may fold operands into one entry), the same type and value; or
// any version inside the copy range of an interrupted recovery. Versions
// above the DB's sequence at open are this recovery's own copies of older
// lists and are never taken for presence. Only the
// entries newer than the anchor are replayed. Nothing is dropped on
// sequence numbers alone: those are reused after a WAL-less reopen, so a
// foreign writer (stock ldb, db_bench without the plugin) can produce SST
// files whose sequence numbers cover a list it never saw.
// A Merge group that is present only in part (some operands WAL-logged,
// older ones not) cannot be replayed in order: Incomplete, nothing written
// for it — recovery refuses rather than guess.
//
// Thread safety: single-threaded (recovery owns the DB).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flintkv/recovery.h"
#include "memtable/list_walk.h"
#include "pmem/layout.h"
#include "pmem/pool.h"
#include "rocksdb/comparator.h"
#include "rocksdb/db.h"
#include "rocksdb/utilities/debug.h"
#include "rocksdb/wide_columns.h"
#include "rocksdb/write_batch.h"
#include "rocksdb_common/memtable_entry.h"

namespace flintkv {
namespace replay {

// Entry types and the entry decoding are the adapter's
// (rocksdb_common/memtable_entry.h).
using rocks::kTypeDeletion;
using rocks::kTypeMerge;
using rocks::kTypeSingleDeletion;
using rocks::kTypeValue;
using rocks::kTypeValuePreferredSeqno;
using rocks::kTypeWideColumnEntity;
using Entry = rocks::MemtableEntry;
inline bool DecodeEntry(const pmem::NvmNode* n, Entry* e) {
  return rocks::DecodeMemtableEntry(n, e);
}

// Node n of list l decoded (into *e) and, where RocksDB stored a per-key
// checksum, checked against it. "" if both hold, else what is wrong,
// naming the list, the node's offset in the pool and the key. A mismatch
// is bit rot (or a stray write) in the pool: the entry must never be
// served or replayed as data.
std::string CheckEntry(const pmem::Pool& pool, const pmem::ListRoot* l,
                       const pmem::NvmNode* n, Entry* e);

// True for the nodes recovery replays or filters by sequence: committed,
// and not past the commit of a torn FlintKV batch (P3, P4). The others may
// hold a write that never finished.
inline bool IsCommitted(const pmem::ListRoot* l, const pmem::NvmNode* n) {
  return n->version != pmem::kUncommittedVersion &&
         !(l->batch_mode && n->version > l->commit_version);
}

// CheckEntry on every committed node of list l (a walk of its own, order
// not checked), which must all have the protection width of the first.
// Recovery runs it on every list before it writes anything, so a damaged
// entry fails the recovery with the DB unchanged. Skipped (OK) when the
// list's first entry carries no checksum and option_width (the column
// family's memtable_protection_bytes_per_key in this run) is 0: there is
// nothing to check, and the extra walk would cost ~45% of the recovery
// time (300 MB: 1.65 s on 3.66 s).
rocksdb::Status CheckList(pmem::Pool* pool, pmem::ListRoot* l,
                          size_t option_width);

// The chunks of a list, for the validated walker.
std::vector<memtable::ChunkRange> ChunkRanges(const pmem::Pool* pool,
                                              uint64_t list_id);

// Smallest sequence number of a committed entry (*any false: none).
Status MinSeq(pmem::Pool* pool, pmem::ListRoot* l,
              const rocksdb::Comparator* ucmp, uint64_t* min_seq, bool* any);

// Sequence numbers earlier, interrupted recoveries gave their copies of one
// list: one span (first, last] per recovery (P11).
struct CopyRange {
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  bool valid() const { return !spans.empty(); }
  bool Contains(uint64_t s) const {
    for (const auto& [first, last] : spans) {
      if (s > first && s <= last) return true;
    }
    return false;
  }
};

// The copy spans of this list and of the older leftover lists of the same
// column family. A DB version of a key newer than the key's group is newer
// history — a newer list's entry flushed together with this list and
// hiding it, a WAL-replayed write (also one whose memtable insert never
// finished), a newer list's copy from an interrupted recovery, a foreign
// write after the crash — and the group is superseded: replaying it on top
// would resurrect an older value or apply an operand out of order. The one
// exception: sequence numbers are reused after a WAL-less reopen, so an
// interrupted recovery's copy of this list's or an older list's entry can
// carry a larger sequence number while being older data; versions inside
// these spans never supersede. Everything else in the
// DB that is newer than a group got there after the crashed run wrote it.
struct OlderCopies {
  std::vector<CopyRange> ranges;
  bool Contains(uint64_t s) const {
    for (const CopyRange& r : ranges) {
      if (r.Contains(s)) return true;
    }
    return false;
  }
};

// Receives, key by key, the entries of one list that recovery must
// replay: group[n-1] (oldest) ... group[0] (newest).
class GroupSink {
 public:
  virtual ~GroupSink() = default;
  virtual void Add(const std::vector<Entry>& group, size_t n) = 0;
};

// Writes entries through DB writes (WAL off; the caller flushes before the
// lists go). A key's entries are never split across WriteBatches: a batch
// is committed only in EndKey (the "whole group" premise of Present()).
class BatchWriter {
 public:
  BatchWriter(rocksdb::DB* db, size_t batch_bytes);
  void Append(rocksdb::ColumnFamilyHandle* cf, const Entry& e);
  void EndKey();
  rocksdb::Status Finish();
  const rocksdb::Status& status() const { return status_; }

 private:
  void Commit();

  rocksdb::DB* db_;
  size_t batch_bytes_;
  rocksdb::WriteOptions wo_;
  rocksdb::WriteBatch batch_;
  rocksdb::Status status_;
};

// The memtable path: each group goes to the DB as soon as it is decided.
class BatchSink : public GroupSink {
 public:
  BatchSink(BatchWriter* w, rocksdb::ColumnFamilyHandle* cf) : w_(w), cf_(cf) {}
  void Add(const std::vector<Entry>& group, size_t n) override {
    for (size_t i = n; i-- > 0;) w_->Append(cf_, group[i]);
    w_->EndKey();
  }

 private:
  BatchWriter* w_;
  rocksdb::ColumnFamilyHandle* cf_;
};

// Walks one list and decides, key by key, what to replay (above); hands the
// result to a GroupSink. Writes nothing itself.
class ListReplayer {
 public:
  ListReplayer(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, bool use_wm,
               uint64_t wm, bool check_presence, uint64_t open_seq,
               CopyRange copies, OlderCopies older, GroupSink* sink,
               RecoveryReport* r);

  bool ok() const { return status_.ok(); }
  // Feeds one node of list `root`, in list order. False on an error.
  bool Visit(const pmem::ListRoot* root, const pmem::NvmNode* n);
  // Decides the last group.
  rocksdb::Status Finish();
  // The newest sequence number of a committed entry fed so far (P18: the
  // DB's clock is raised to it after the replay).
  uint64_t max_seq() const { return max_seq_; }

 private:
  void EndKey();
  // Index of the newest group entry already in the DB, or group_.size().
  size_t Anchor();
  bool Present(const Entry& e,
               const std::vector<rocksdb::KeyVersion>& versions) const;

  rocksdb::DB* db_;
  rocksdb::ColumnFamilyHandle* cf_;
  const rocksdb::Comparator* ucmp_;
  bool use_wm_;
  uint64_t wm_;
  bool check_presence_;
  uint64_t open_seq_;  // LastSequence when this recovery opened the DB
  uint64_t max_seq_ = 0;
  CopyRange copies_;
  OlderCopies older_;
  GroupSink* sink_;
  RecoveryReport* r_;
  std::string key_;
  bool have_key_ = false;
  bool done_ = false;
  std::vector<Entry> group_;  // newest first
  rocksdb::Status status_;
};

// RocksDB's in-memtable wide-column serialisation, decoded (PutEntity).
bool DecodeEntity(rocksdb::Slice in, rocksdb::WideColumns* out);

}  // namespace replay
}  // namespace flintkv

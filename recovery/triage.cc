#include "recovery/triage.h"

#include <algorithm>
#include <utility>

#include "recovery/copy_spans.h"
#include "recovery/progress.h"
#include "recovery/recovered_lists.h"
#include "rocksdb/metadata.h"
#include "rocksdb_common/crash_point.h"
#include "rocksdb_common/memtable_meta.h"
#include "rocksdb_common/status_convert.h"

namespace flintkv {
namespace recovery {
namespace {

// Validates the lists and closes the copy spans interrupted recoveries
// left open: *replay, the lists of the DB's column families, each with its
// copy spans in *copy_range; *to_drop, the others.
rocksdb::Status SortLists(
    const std::vector<pmem::ListRoot*>& lists,
    const std::map<uint32_t, rocksdb::ColumnFamilyHandle*>& cf_by_id,
    uint64_t open_seq, const RecoveryOptions& o, RecoveryReport* r,
    std::vector<pmem::ListRoot*>* replay,
    std::map<uint64_t, replay::CopyRange>* copy_range,
    std::vector<pmem::ListRoot*>* to_drop) {
  for (pmem::ListRoot* l : lists) {
    rocks::MemtableMeta* meta = rocks::MutableMetaOf(l);
    if (l->kind != pmem::kListMemtable ||
        meta->magic != rocks::kMemtableMetaMagic) {
      return rocksdb::Status::Corruption("flintkv: list " +
                                         std::to_string(l->list_id) +
                                         " is not a RocksDB memtable list");
    }
    auto cf = cf_by_id.find(meta->column_family_id);
    if (cf == cf_by_id.end()) {
      r->lists_dropped_cf++;
      LogInfo(o, "flintkv: list " + std::to_string(l->list_id) +
                     " belongs to column family id " +
                     std::to_string(meta->column_family_id) +
                     ", which the DB does not have (dropped): discarded");
      to_drop->push_back(l);
      continue;
    }
    (*copy_range)[l->list_id] = CloseCopySpans(meta, open_seq);
    replay->push_back(l);
  }
  return rocksdb::Status::OK();
}

// Per list: presence checks and the copy spans that never supersede.
rocksdb::Status PlanLists(
    pmem::Pool* pool, const std::vector<pmem::ListRoot*>& replay,
    const std::map<uint32_t, rocksdb::ColumnFamilyHandle*>& cf_by_id,
    const std::map<uint32_t, CfState>& cf_state,
    const std::map<uint64_t, replay::CopyRange>& copy_range, RecoveryReport* r,
    std::vector<ListPlan>* plans) {
  for (size_t i = 0; i < replay.size(); i++) {
    pmem::ListRoot* l = replay[i];
    ListPlan p;
    p.list = l;
    p.cf = cf_by_id.at(rocks::MetaOf(l)->column_family_id);
    p.copies = copy_range.at(l->list_id);
    // Presence checks cost a DB lookup per key; skip them when nothing in
    // the DB can hold an entry of this list: no SST sequence reaches its
    // first entry, WAL replay left nothing, and no earlier recovery copied
    // it.
    const CfState& st = cf_state.at(p.cf->GetID());
    p.check = p.copies.valid() || st.memtable_entries;
    if (!p.check && st.file_seq > 0) {
      uint64_t first = 0;
      bool any = false;
      Status s = replay::MinSeq(pool, l, p.cf->GetComparator(), &first, &any);
      if (!s.ok()) return rocks::ToRocks(s);
      p.check = any && st.file_seq >= first;
    }
    for (size_t j = 0; p.check && j <= i; j++) {
      if (rocks::MetaOf(replay[j])->column_family_id != p.cf->GetID()) continue;
      p.older.ranges.push_back(copy_range.at(replay[j]->list_id));
    }
    if (p.check) r->lists_checked++;
    plans->push_back(std::move(p));
  }
  return rocksdb::Status::OK();
}

}  // namespace

CfState StateOf(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf) {
  CfState st;
  rocksdb::ColumnFamilyMetaData md;
  db->GetColumnFamilyMetaData(cf, &md);
  for (const auto& level : md.levels) {
    for (const auto& f : level.files) {
      st.file_seq = std::max(st.file_seq, f.largest_seqno);
    }
  }
  uint64_t active = 0, imm = 0;
  db->GetIntProperty(cf, "rocksdb.num-entries-active-mem-table", &active);
  db->GetIntProperty(cf, "rocksdb.num-entries-imm-mem-tables", &imm);
  st.memtable_entries = active + imm > 0;
  return st;
}

void Triage(pmem::Pool* pool, std::vector<pmem::ListRoot*>* lists,
            const RecoveryOptions& o, RecoveryReport* r) {
  uint64_t max_pending_id = 0;
  for (pmem::ListRoot* l : *lists) {
    if (rocks::ReplayPending(*rocks::MetaOf(l))) {
      max_pending_id = std::max(max_pending_id, l->list_id);
    }
  }
  std::vector<pmem::ListRoot*> keep, unmarked;
  for (pmem::ListRoot* l : *lists) {  // ascending list_id (Pool::Lists)
    const rocks::MemtableMeta* meta = rocks::MetaOf(l);
    bool valid = l->kind == pmem::kListMemtable &&
                 meta->magic == rocks::kMemtableMetaMagic;
    if (valid && !rocks::ReplayPending(*meta)) {
      if (max_pending_id && l->list_id > max_pending_id) {
        LogInfo(o,
                "flintkv: list " + std::to_string(l->list_id) +
                    " holds copies made by an interrupted recovery: dropped");
        r->lists_copies_dropped++;
        pool->DropList(l);
        continue;
      }
      unmarked.push_back(l);
    }
    keep.push_back(l);  // invalid ones are reported by the caller
  }
  // Newest first: a kill between two marks then leaves unmarked originals
  // only below a marked one, which the rule above keeps; oldest first left
  // a newer original above a marked list, and the next run dropped it as a
  // copy (RecoveryKilledWhileMarkingListsLosesNothing).
  if (!unmarked.empty()) pool->UseCurrentFormat();  // marks are checked words
  for (auto it = unmarked.rbegin(); it != unmarked.rend(); ++it) {
    // A list is marked before any replayed write, so that the lists a
    // crashed recovery created (its copies) are told apart from the
    // originals.
    rocks::PersistRecoveryState(rocks::MutableMetaOf(*it),
                                rocks::kReplayPending);
    FLINTKV_TEST_CRASH_POINT("recovery_after_mark");
  }
  *lists = keep;
}

void DropRecovered(pmem::Pool* pool, const std::set<std::string>& done,
                   std::vector<pmem::ListRoot*>* lists,
                   const RecoveryOptions& o, RecoveryReport* r) {
  std::vector<pmem::ListRoot*> left;
  for (pmem::ListRoot* l : *lists) {
    if (done.count(RecordLine(pool, l)) == 0) {
      left.push_back(l);
      continue;
    }
    LogInfo(o, "flintkv: list " + std::to_string(l->list_id) +
                   " was recovered into this DB already (this pool is a copy "
                   "of the one recovered, or the recovery that replayed it "
                   "stopped before dropping it): dropped, not replayed");
    r->lists_already_recovered++;
    pool->DropList(l);
  }
  lists->swap(left);
}

rocksdb::Status PlanReplay(
    rocksdb::DB* db, pmem::Pool* pool,
    const std::vector<pmem::ListRoot*>& lists,
    const std::map<uint32_t, rocksdb::ColumnFamilyHandle*>& cf_by_id,
    const std::map<uint32_t, CfState>& cf_state, uint64_t open_seq,
    const RecoveryOptions& o, RecoveryReport* r, std::vector<ListPlan>* plans,
    std::vector<pmem::ListRoot*>* to_drop) {
  std::vector<pmem::ListRoot*> replay;
  std::map<uint64_t, replay::CopyRange> copy_range;
  rocksdb::Status s =
      SortLists(lists, cf_by_id, open_seq, o, r, &replay, &copy_range, to_drop);
  if (s.ok())
    s = PlanLists(pool, replay, cf_by_id, cf_state, copy_range, r, plans);
  if (!s.ok()) return s;
  // A damaged entry (bit rot: a per-key checksum that does not match)
  // fails the recovery before anything is written (replay::CheckList).
  for (const ListPlan& p : *plans) {
    s = replay::CheckList(
        pool, p.list, db->GetOptions(p.cf).memtable_protection_bytes_per_key);
    if (!s.ok()) return s;
  }
  return rocksdb::Status::OK();
}

}  // namespace recovery
}  // namespace flintkv

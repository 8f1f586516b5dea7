#include "recovery/refusals.h"

#include "recovery/recovered_lists.h"
#include "rocksdb/table_properties.h"
#include "rocksdb_common/memtable_meta.h"

namespace flintkv {
namespace recovery {

// WAL-logged DeleteRange with WAL-less writes: RocksDB keeps range tombstones
// outside the memtable rep, so the pool never holds a DeleteRange; a WAL-logged
// one comes back through RocksDB's WAL replay when recovery opens the DB, and
// presence checks cannot see range tombstones (GetAllKeyVersions lists point
// entries only). Replaying the pool's WAL-less writes would then put a
// Put that came *before* the DeleteRange above it. Which of the two came
// first cannot be told, so recovery refuses the mix: a range tombstone in
// an SST file of this session (WAL replay, flushed at the open or by the
// flush below) means the WAL held a DeleteRange.
rocksdb::Status RefuseWalRangeDeletes(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    bool memtable_entries, const RecoveryOptions& o) {
  if (o.allow_wal_delete_range) return rocksdb::Status::OK();
  if (memtable_entries) {  // avoid_flush_during_recovery kept WAL replay
    rocksdb::FlushOptions fo;
    fo.allow_write_stall = true;
    rocksdb::Status s = db->Flush(fo, handles);
    if (!s.ok()) return s;
  }
  std::string session;
  rocksdb::Status s = db->GetDbSessionId(session);
  if (!s.ok()) return s;
  for (rocksdb::ColumnFamilyHandle* cf : handles) {
    rocksdb::TablePropertiesCollection props;
    s = db->GetPropertiesOfAllTables(cf, &props);
    if (!s.ok()) return s;
    for (const auto& [file, p] : props) {
      if (p->db_session_id != session || p->num_range_deletions == 0) continue;
      return rocksdb::Status::NotSupported(
          "flintkv: the DB's WAL holds DeleteRange operations (restored into " +
          file + ", column family " + cf->GetName() +
          ") and the pool holds WAL-less writes: a WAL-logged DeleteRange "
          "mixed with WAL-less writes cannot be ordered, so replaying could "
          "bring back a value the DeleteRange removed. Nothing was replayed "
          "and the pool is unchanged. Use the WAL for all writes or none "
          "(flintkv::OpenDB makes DeleteRange durable without it). To replay "
          "anyway (the pool's writes then land above every range deletion): "
          "flintkv_tool recover --allow_wal_delete_range "
          "(RecoveryOptions::allow_wal_delete_range)");
    }
  }
  return rocksdb::Status::OK();
}

// A DB restored from a backup or checkpoint, or replaced by an older copy,
// after the pool's memtables were written lacks SST files that the life
// which wrote them had flushed; replaying the newer memtables over it would
// make a state that never existed. Each list records a sequence number the
// MANIFEST of its life had reached (flushed_floor, reported at MarkFlushed,
// after the MANIFEST edit): the DB that wrote the list has a last sequence
// at least that large.
// The same for a column family the life that wrote the lists dropped
// (S7): a DB that still has it is older than the drop; and for one the
// life did not drop that the DB lacks: it is older than the family.
rocksdb::Status RefuseOlderDb(
    rocksdb::DB* db, const std::vector<pmem::ListRoot*>& lists,
    const std::map<uint32_t, rocksdb::ColumnFamilyHandle*>& cf_by_id,
    const RecoveryOptions& o) {
  if (o.allow_older_db) return rocksdb::Status::OK();
  const uint64_t last = db->GetLatestSequenceNumber();
  for (pmem::ListRoot* l : lists) {
    const rocks::MemtableMeta* m = rocks::MetaOf(l);
    if (m->magic != rocks::kMemtableMetaMagic) continue;
    std::string why;
    if (m->flushed_floor > last) {
      why = "its last sequence number is " + std::to_string(last) +
            ", but list " + std::to_string(l->list_id) +
            " was written after the DB had reached sequence " +
            std::to_string(m->flushed_floor) +
            " (by a flush, or by the recovery that began the life that "
            "wrote it)";
    } else if (rocks::FamilyDropped(*m) &&
               cf_by_id.count(m->column_family_id)) {
      why = "it has column family id " + std::to_string(m->column_family_id) +
            ", which the life that wrote list " + std::to_string(l->list_id) +
            " dropped";
    } else if (!rocks::FamilyDropped(*m) && !rocks::ReplayPending(*m) &&
               !cf_by_id.count(m->column_family_id) && l->head.next != 0) {
      // A family its life dropped marked the list (S7); an unmarked list of
      // a family the DB lacks was written to a family made after the DB's
      // state (or dropped by a crash between the drop and its OPTIONS
      // file, the one false refusal). Not an empty list (S9): that crash
      // leaves every dropped family's empty list unmarked, and a family
      // made after a copy with nothing written to it changes no key.
      why = "it lacks column family id " + std::to_string(m->column_family_id) +
            ", which list " + std::to_string(l->list_id) +
            " was written to and which its life did not drop";
    } else {
      continue;
    }
    return rocksdb::Status::InvalidArgument(
        "flintkv: the DB is older than the pool's unflushed memtables: " + why +
        ", so this DB lacks changes those memtables build on (was it "
        "restored from a backup or checkpoint, or replaced by an older copy, "
        "after they were written?). Nothing was replayed and the pool is "
        "unchanged. Recover with the DB as it was at the crash; if that DB is "
        "gone and this one is to be kept as it is, drop the pool's unflushed "
        "writes: flintkv_tool discard --pool_dir=" +
        o.memtable.pool_dir +
        " --confirm; to replay over this one anyway: flintkv_tool recover "
        "--allow_older_db (RecoveryOptions::allow_older_db)");
  }
  return rocksdb::Status::OK();
}

// S8 (pool_session.h): lists no newer than the newest one the DB's family
// recovered, which the DB's record file does not name (those are dropped
// below as recovered), are in the DB already: a pool image older than a
// recovery put back, with the record gone (deleted, or not taken by the
// backup or checkpoint the DB was restored from).
// `done`: the lines of the DB's record file.
rocksdb::Status RefuseRecoveredAlready(
    const pmem::Pool* pool, const std::vector<pmem::ListRoot*>& lists,
    uint64_t recovered_upto, const std::set<std::string>& done,
    const RecoveryOptions& o) {
  if (recovered_upto == 0) return rocksdb::Status::OK();
  std::string old;
  for (pmem::ListRoot* l : lists) {
    const rocks::MemtableMeta* m = rocks::MetaOf(l);
    if (m->magic != rocks::kMemtableMetaMagic ||
        m->created_micros > recovered_upto || done.count(RecordLine(pool, l)) ||
        (o.accept_incarnation && (m->incarnation == o.accept_incarnation ||
                                  m->family == o.accept_incarnation))) {
      continue;
    }
    if (!old.empty()) old += ", ";
    old += "list " + std::to_string(l->list_id) + " (created " +
           std::to_string(m->created_micros) + " us)";
  }
  if (old.empty()) return rocksdb::Status::OK();
  return rocksdb::Status::InvalidArgument(
      "flintkv: the pool holds unflushed memtables this DB recovered "
      "already: " +
      old +
      ", no newer than the newest list its recoveries replayed (created " +
      std::to_string(recovered_upto) +
      " us, its OPTIONS file records). The pool is an older image put "
      "back, and the DB's record of recovered lists (" +
      std::string(kRecoveredListsFile + 1) +
      ") was deleted or not copied with the DB (a backup or checkpoint "
      "does not take it); replaying would apply their writes twice. "
      "Nothing was changed. Drop them (their writes are in the DB): "
      "flintkv_tool discard --pool_dir=" +
      o.memtable.pool_dir +
      " --confirm; if the wall clock went back and they are new: "
      "flintkv_tool recover --accept_incarnation=<their incarnation> "
      "(RecoveryOptions::accept_incarnation)");
}

}  // namespace recovery
}  // namespace flintkv

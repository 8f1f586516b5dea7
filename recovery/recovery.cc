// Recovery of unflushed FlintKV memtables into RocksDB: claiming the pool,
// deciding what to replay, replaying (recovery/replay.h), flushing, and
// flintkv::OpenDB (flintkv/recovery.h, docs/rocksdb_recovery.md).
#include "flintkv/recovery.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "flintkv/rocksdb_memtable.h"
#include "memtable/rocksdb/crash_point.h"
#include "memtable/rocksdb/db_binding.h"
#include "memtable/rocksdb/memtable_meta.h"
#include "memtable/rocksdb/pool_session.h"
#include "memtable/rocksdb/status_convert.h"
#include "memtable/rocksdb/watermark.h"
#include "pmem/persist.h"
#include "recovery/flint_db.h"
#include "recovery/internal_key_cmp.h"
#include "recovery/replay.h"
#include "recovery/sequence_clock.h"
#include "recovery/sst_ingest.h"
#include "rocksdb/env.h"
#include "rocksdb/table.h"

namespace flintkv {

using rocks::DbBinding;
using rocks::PoolSession;
using rocks::ReadDbBinding;
using rocks::ToRocks;

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

MemTableOptions FactoryOptions(const RecoveryOptions& o) {
  MemTableOptions mo;
  mo.pool_dir = o.pool_dir;
  mo.pool_size = o.pool_size;
  mo.chunk_size = o.chunk_size;
  mo.latency_model = o.latency_model;
  return mo;
}

void Log(const RecoveryOptions& o, const std::string& line) {
  if (o.log) o.log(line);
}

void PersistCopyBound(uint64_t* word, uint64_t seq) {
  *word = seq + 1;
  pmem::PmemPersist::Persist(word, sizeof(*word));  // P11
}

// The lists whose entries a finished replay put in this DB's SST files,
// kept in the DB directory, one line per list: the pool's libpmemobj id and
// the list's id, DB life and creation time. A list named here is never
// replayed into this DB again: a byte copy of the pool (same pool id, same
// lists) recovered after the original, or the original after its copy,
// applied every Merge operand twice. The life and creation time tell apart
// a list of another history of the same pool id (an older image of the pool
// put back reuses list ids; its new lists must be replayed).
constexpr char kRecoveredListsFile[] = "/FLINTKV_RECOVERED_LISTS";

std::string RecordLine(const pmem::Pool* pool, const pmem::ListRoot* l) {
  const rocks::MemtableMeta* m = rocks::MetaOf(l);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%016llx %llu %016llx %llu\n",
                (unsigned long long)pool->pool_uuid_lo(),
                (unsigned long long)l->list_id,
                (unsigned long long)m->incarnation,
                (unsigned long long)m->created_micros);
  return buf;
}

std::string ReadRecordFile(rocksdb::DB* db) {
  std::string data;
  if (!rocksdb::ReadFileToString(db->GetEnv(),
                                 db->GetName() + kRecoveredListsFile, &data)
           .ok()) {
    data.clear();  // none recorded yet
  }
  return data;
}

std::set<std::string> RecordedLines(const std::string& data) {
  std::set<std::string> lines;
  for (size_t at = 0, nl; (nl = data.find('\n', at)) != std::string::npos;
       at = nl + 1) {
    lines.insert(data.substr(at, nl - at + 1));
  }
  return lines;
}

// Writes the file's new content, durably, before the lists are dropped from
// the pool: under a temporary name, synced, renamed over the old one and the
// directory synced (plain Env calls every FileSystem has).
rocksdb::Status RecordRecoveredLists(rocksdb::DB* db,
                                     const std::string& content) {
  rocksdb::Env* env = db->GetEnv();
  const std::string path = db->GetName() + kRecoveredListsFile;
  const std::string tmp = path + ".tmp";
  std::unique_ptr<rocksdb::WritableFile> f;
  rocksdb::Status s = env->NewWritableFile(tmp, &f, rocksdb::EnvOptions());
  if (s.ok()) s = f->Append(content);
  if (s.ok()) s = f->Sync();
  if (s.ok()) s = f->Close();
  if (s.ok()) s = env->RenameFile(tmp, path);
  std::unique_ptr<rocksdb::Directory> dir;
  if (s.ok()) s = env->NewDirectory(db->GetName(), &dir);
  if (s.ok()) s = dir->Fsync();
  return s;
}

// The newest sequence number in the DB's live files: a reopened DB's last
// sequence is at least this.
uint64_t NewestFileSeq(rocksdb::DB* db) {
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  uint64_t newest = 0;
  for (const auto& f : files) newest = std::max(newest, f.largest_seqno);
  return newest;
}

// What the DB holds per column family right after open: the largest
// sequence number in its SST files, and whether RocksDB's WAL replay left
// entries in its memtables.
struct CfState {
  uint64_t file_seq = 0;
  bool memtable_entries = false;
};

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

// Marks the originals before the first replayed write and drops the lists
// an interrupted recovery created (its copies; they are not marked and
// come after every marked list). Which entries are already in the DB is
// decided per key during replay (recovery/replay.h), never here from
// sequence numbers: those are reused after a WAL-less reopen.
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
        Log(o, "flintkv: list " + std::to_string(l->list_id) +
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
        o.pool_dir +
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
      o.pool_dir +
      " --confirm; if the wall clock went back and they are new: "
      "flintkv_tool recover --accept_incarnation=<their incarnation> "
      "(RecoveryOptions::accept_incarnation)");
}

// One leftover list to replay and how (see RecoverInto).
struct ListPlan {
  pmem::ListRoot* list = nullptr;
  rocksdb::ColumnFamilyHandle* cf = nullptr;
  bool check = false;  // presence checks
  replay::CopyRange copies;
  replay::OlderCopies older;
};

// Walks plan p's list into `sink` (nothing is written to the DB here).
// *max_seq: raised to the list's newest committed sequence number (P18).
rocksdb::Status WalkInto(rocksdb::DB* db, pmem::Pool* pool, const ListPlan& p,
                         uint64_t open_seq, RecoveryReport* r,
                         replay::GroupSink* sink, uint64_t* max_seq) {
  InternalKeyCmp cmp(p.cf->GetComparator());
  auto chunks = replay::ChunkRanges(pool, p.list->list_id);
  replay::ListReplayer rp(db, p.cf, r->watermark_used, r->watermark, p.check,
                          open_seq, p.copies, p.older, sink, r);
  Status ws = memtable::WalkList(
      *pool, p.list, cmp, &chunks,
      [&](const pmem::NvmNode* n) {
        if (rp.ok()) rp.Visit(p.list, n);
        return memtable::WalkDecision::kKeep;
      },
      [](uint64_t*) {});
  rocksdb::Status fs = rp.Finish();
  *max_seq = std::max(*max_seq, rp.max_seq());
  if (!ws.ok()) return ToRocks(ws);
  return fs;
}

// All of a list's copy spans as one, in the first pair, when every pair is
// taken (P11): the merged span covers each, and whatever lies between them
// (copies of the same recoveries, of this list and of other leftovers
// replayed with it, which are replayed again after it), so no copy of an
// interrupted recovery ever supersedes; a write made by another tool
// between two interrupted recoveries, inside the merged span, does not
// either. Crash-safe: the first pair only widens, and a pair is cleared
// last word first, so the spans on PMEM always cover the old ones and a
// half-cleared pair is never taken for a span.
void MergeCopySpans(rocks::MemtableMeta* meta, replay::CopyRange* copies) {
  uint64_t first = ~0ull, last = 0;
  for (const auto& [f, l] : copies->spans) {
    first = std::min(first, f);
    last = std::max(last, l);
  }
  uint64_t* span = meta->copy_spans;
  PersistCopyBound(&span[1], last);
  PersistCopyBound(&span[0], first);
  for (int k = rocks::kMaxCopySpans - 1; k >= 1; k--) {
    for (int w : {1, 0}) {
      span[2 * k + w] = 0;
      pmem::PmemPersist::Persist(&span[2 * k + w], sizeof(uint64_t));
    }
  }
  copies->spans.assign(1, {first, last});
}

// The copy span of this recovery in list l's meta (P11): the next free
// pair (RecoverInto merged the spans if none was).
uint64_t* NewSpan(pmem::ListRoot* l, const replay::CopyRange& copies) {
  return &rocks::MutableMetaOf(l)->copy_spans[2 * copies.spans.size()];
}

// The memtable path (RecoveryOptions::ingest_sst = false): list by list,
// each list's copies through DB writes inside a span of its own.
rocksdb::Status ReplayIntoMemtables(rocksdb::DB* db, pmem::Pool* pool,
                                    const std::vector<ListPlan>& plans,
                                    const RecoveryOptions& o, RecoveryReport* r,
                                    uint64_t* max_seq) {
  const uint64_t open_seq = db->GetLatestSequenceNumber();
  for (const ListPlan& p : plans) {
    // P11: this run's copies of the list get a span of their own, persisted
    // before the first copy is written.
    uint64_t* span = NewSpan(p.list, p.copies);
    PersistCopyBound(&span[0], db->GetLatestSequenceNumber());
    replay::BatchWriter w(db, o.batch_bytes);
    replay::BatchSink sink(&w, p.cf);
    rocksdb::Status s = WalkInto(db, pool, p, open_seq, r, &sink, max_seq);
    rocksdb::Status ws = w.Finish();
    if (!s.ok()) return s;
    if (!ws.ok()) return ws;
    PersistCopyBound(&span[1], db->GetLatestSequenceNumber());
    FLINTKV_TEST_CRASH_POINT("recovery_after_list");
    r->lists_replayed++;
  }
  return rocksdb::Status::OK();
}

// The SST path: every list's copies (SST files and the keys they cannot
// express, written through the DB) share one span per list, persisted
// before the first write; the files land in one atomic ingestion.
rocksdb::Status ReplayIntoSst(
    rocksdb::DB* db, pmem::Pool* pool,
    const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const std::vector<ListPlan>& plans, const RecoveryOptions& o,
    RecoveryReport* r, uint64_t* max_seq) {
  if (plans.empty()) return rocksdb::Status::OK();
  const uint64_t open_seq = db->GetLatestSequenceNumber();
  // P11: the span starts before the first copy (a fallback write or the
  // ingestion) can be in the DB.
  for (const ListPlan& p : plans) {
    PersistCopyBound(&NewSpan(p.list, p.copies)[0], open_seq);
  }
  const std::string dir = replay::SstDir(db);
  rocksdb::Status s = db->GetEnv()->CreateDirIfMissing(dir);
  if (!s.ok()) return s;
  replay::BatchWriter fallback(db, o.batch_bytes);
  std::vector<std::vector<std::string>> files(handles.size());
  for (size_t c = 0; c < handles.size() && s.ok(); c++) {
    std::vector<const ListPlan*> cf_plans;  // oldest list first
    for (const ListPlan& p : plans) {
      if (p.cf == handles[c]) cf_plans.push_back(&p);
    }
    if (cf_plans.empty()) continue;
    replay::SstBuilder b(db, handles[c], dir, &fallback, r);
    if (cf_plans.size() == 1) {  // the common case: straight into the file
      replay::StreamSink sink(&b);
      s = WalkInto(db, pool, *cf_plans[0], open_seq, r, &sink, max_seq);
      if (s.ok()) s = b.Finish(&files[c]);
      continue;
    }
    // Several lists: collect each, then merge them key by key.
    std::vector<std::unique_ptr<replay::ListOutput>> outs;
    std::vector<const replay::ListOutput*> lists;
    for (const ListPlan* p : cf_plans) {
      outs.emplace_back(new replay::ListOutput());
      s = WalkInto(db, pool, *p, open_seq, r, outs.back().get(), max_seq);
      if (!s.ok()) return s;
      lists.push_back(outs.back().get());
    }
    s = b.Build(lists, &files[c]);
  }
  if (s.ok()) s = fallback.Finish();
  if (!s.ok()) return s;
  FLINTKV_TEST_CRASH_POINT("recovery_before_ingest");
  auto start = std::chrono::steady_clock::now();
  s = replay::IngestFiles(db, handles, files);
  r->ingest_seconds = Seconds(start);
  if (!s.ok()) return s;
  FLINTKV_TEST_CRASH_POINT("recovery_after_ingest");
  for (const ListPlan& p : plans) {
    PersistCopyBound(&NewSpan(p.list, p.copies)[1],
                     db->GetLatestSequenceNumber());
    FLINTKV_TEST_CRASH_POINT("recovery_after_list");
    r->lists_replayed++;
  }
  return rocksdb::Status::OK();
}

}  // namespace

std::string RecoveryReport::ToString() const {
  char buf[1280];
  std::snprintf(
      buf, sizeof(buf),
      "lists: %llu found, %llu replayed (%llu with presence checks), %llu "
      "copies of an interrupted recovery dropped, %llu already recovered "
      "into this DB, %llu of dropped column families; entries: %llu committed, "
      "%llu replayed (%llu bytes), %llu "
      "already in the DB, %llu superseded; %llu SST files (%llu entries), "
      "%llu keys through DB writes; dropped: %llu uncommitted "
      "(version MAX), %llu torn FlintKV batch, %llu above watermark; "
      "watermark: %s %llu; last sequence raised to %llu; time: triage %.3f "
      "s, replay %.3f s, ingest %.3f s, flush %.3f s",
      (unsigned long long)lists_found, (unsigned long long)lists_replayed,
      (unsigned long long)lists_checked,
      (unsigned long long)lists_copies_dropped,
      (unsigned long long)lists_already_recovered,
      (unsigned long long)lists_dropped_cf, (unsigned long long)entries_seen,
      (unsigned long long)entries_replayed, (unsigned long long)bytes_replayed,
      (unsigned long long)entries_present,
      (unsigned long long)entries_superseded, (unsigned long long)sst_files,
      (unsigned long long)sst_entries, (unsigned long long)fallback_keys,
      (unsigned long long)dropped_uncommitted,
      (unsigned long long)dropped_torn_batch,
      (unsigned long long)dropped_above_watermark,
      watermark_used ? "used" : "not used", (unsigned long long)watermark,
      (unsigned long long)sequence_raised_to, triage_seconds,
      replay_seconds - triage_seconds - ingest_seconds, ingest_seconds,
      flush_seconds);
  return buf;
}

namespace {
// The DB's binding with the caller's overrides.
DbBinding BindingFor(const std::string& db_path, const RecoveryOptions& o) {
  DbBinding b = ReadDbBinding(db_path);
  b.allow_foreign_open = o.allow_foreign_open;
  b.accept_incarnation = o.accept_incarnation;
  return b;
}
}  // namespace

rocksdb::Status BeginRecovery(const std::string& db_path,
                              const RecoveryOptions& o) {
  std::shared_ptr<PoolSession> h;
  Status s = PoolSession::OpenExisting(o.pool_dir, &h);
  if (s.ok()) s = h->Claim(BindingFor(db_path, o), /*wrapper=*/false);
  return ToRocks(s);
}

rocksdb::Status DiscardLeftovers(const std::string& pool_dir,
                                 uint64_t incarnation, bool dry_run,
                                 std::vector<std::string>* dropped) {
  std::shared_ptr<PoolSession> h;
  Status s = PoolSession::OpenExisting(pool_dir, &h);
  if (s.ok()) s = h->DiscardLeftovers(incarnation, dry_run, dropped);
  return ToRocks(s);
}

void EndRecovery(const std::string& pool_dir) {
  std::shared_ptr<PoolSession> h;
  if (PoolSession::OpenExisting(pool_dir, &h).ok()) h->ReleaseClaim();
}

rocksdb::Status RecoverInto(
    rocksdb::DB* db,
    const std::vector<rocksdb::ColumnFamilyHandle*>& all_handles,
    const RecoveryOptions& o, RecoveryReport* report) {
  RecoveryReport local;
  RecoveryReport* r = report ? report : &local;
  *r = RecoveryReport();
  // P18: the clock column family a crash left between its import and its
  // drop holds nothing of the user's.
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  for (rocksdb::ColumnFamilyHandle* cf : all_handles) {
    if (!IsLeftoverClock(db, cf)) {
      handles.push_back(cf);
      continue;
    }
    rocksdb::Status ds = db->DropColumnFamily(cf);
    if (!ds.ok()) return ds;
  }
  std::shared_ptr<PoolSession> h;
  Status hs = PoolSession::OpenExisting(o.pool_dir, &h);
  if (!hs.ok()) return ToRocks(hs);
  if (!h->claimed()) {
    return rocksdb::Status::InvalidArgument(
        "flintkv: RecoverInto without a claim on pool " + h->pool()->path() +
        ": call BeginRecovery(db_path, options) before DB::Open");
  }
  auto fail = [&](rocksdb::Status s) {
    h->ReleaseClaim();
    return s;
  };
  pmem::Pool* pool = h->pool();
  Watermark wm(pool);

  std::map<uint32_t, rocksdb::ColumnFamilyHandle*> cf_by_id;
  for (auto* cf : handles) cf_by_id[cf->GetID()] = cf;
  // S3: only the lists the claim found to be this DB's (list_id order).
  std::vector<pmem::ListRoot*> lists = h->ClaimedLists();
  if (!h->claim_note().empty()) Log(o, "flintkv: " + h->claim_note());
  r->lists_found = lists.size();
  // One flipped bit in W dropped acknowledged writes as "above W", and in
  // R every list as "already flushed", silently: a word that fails its
  // check is not read, unless the override that ignores it is given.
  auto damaged = [&](const std::string& what, const std::string& override) {
    return fail(rocksdb::Status::Corruption(
        "flintkv: pool " + pool->path() + ": the pool root's " + what +
        " fails its check (a flipped bit?). Nothing was dropped or "
        "replayed. " +
        override));
  };
  if (!wm.watermark_intact() && o.watermark != WatermarkMode::kOff) {
    return damaged(
        "published watermark (W), which tells the acknowledged writes,",
        "To replay every entry of the pool's lists (a WriteBatch being "
        "written at the crash may then be replayed in part): flintkv_tool "
        "recover --watermark=off (RecoveryOptions::watermark = "
        "WatermarkMode::kOff)");
  }
  if (!wm.record_intact()) {
    if (!o.allow_older_db) {
      return damaged(
          "record of an interrupted recovery (R)",
          "To discard the record and replay the lists (presence checks skip "
          "what the DB already holds): flintkv_tool recover --allow_older_db "
          "(RecoveryOptions::allow_older_db)");
    }
    Log(o, "flintkv: discarding a damaged recovery record (allow_older_db)");
    wm.CancelReset();
  }
  r->watermark_used = wm.enabled() && o.watermark != WatermarkMode::kOff;
  if (o.watermark == WatermarkMode::kOn && !wm.enabled()) {
    return fail(rocksdb::Status::InvalidArgument(
        "flintkv: pool " + pool->path() + " has no watermark"));
  }
  r->watermark = wm.published();

  if (wm.reset_pending() && wm.reset_seq() > db->GetLatestSequenceNumber()) {
    // R is the newest sequence number in the DB's files after a recovery's
    // flush, so this DB, if it is the one that recovery flushed, has
    // reached it. It has not:
    // the record is damaged (one flipped bit made every list "already
    // flushed") or the DB is older than that recovery (restored).
    if (!o.allow_older_db) {
      return fail(rocksdb::Status::Corruption(
          "flintkv: pool " + pool->path() +
          " records an interrupted recovery that flushed up to sequence " +
          std::to_string(wm.reset_seq()) + ", but the DB's last sequence is " +
          std::to_string(db->GetLatestSequenceNumber()) +
          ": the pool's root is damaged, or the DB is older than that "
          "recovery (restored from a backup or checkpoint). Nothing was "
          "dropped or replayed. `flintkv_tool inspect` lists what the pool "
          "holds; to replay its lists into this DB anyway: flintkv_tool "
          "recover --allow_older_db (RecoveryOptions::allow_older_db)"));
    }
    Log(o,
        "flintkv: ignoring a record of an interrupted recovery above the "
        "DB's last sequence (allow_older_db): the lists are replayed");
    wm.CancelReset();
  }
  if (wm.reset_pending()) {
    // A previous recovery flushed everything it replayed and crashed while
    // dropping the lists: they are all in SST files already.
    Log(o,
        "flintkv: finishing an interrupted recovery (replayed data is "
        "already flushed)");
    for (pmem::ListRoot* l : lists) pool->DropList(l);
    wm.FinishReset();
    lists.clear();
  }

  auto start = std::chrono::steady_clock::now();
  // Versions above this are the copies this recovery writes.
  const uint64_t open_seq = db->GetLatestSequenceNumber();
  std::map<uint32_t, CfState> cf_state;
  for (auto& [id, cf] : cf_by_id) cf_state[id] = StateOf(db, cf);
  std::string recorded;  // the DB's record file, read once
  std::set<std::string> done;
  if (!lists.empty()) {  // before Triage marks anything in the pool
    recorded = ReadRecordFile(db);
    done = RecordedLines(recorded);
    bool memtable_entries = false;
    for (auto& [id, st] : cf_state) memtable_entries |= st.memtable_entries;
    rocksdb::Status ds =
        RefuseWalRangeDeletes(db, handles, memtable_entries, o);
    if (!ds.ok()) return fail(ds);
    // A flush above moved WAL replay into SST files: look again.
    if (memtable_entries) {
      for (auto& [id, cf] : cf_by_id) cf_state[id] = StateOf(db, cf);
    }
    // S9: the lives' empty lists tell their families too.
    std::vector<pmem::ListRoot*> evidence = lists;
    for (pmem::ListRoot* l : h->ClaimedEmptyLists()) evidence.push_back(l);
    ds = RefuseOlderDb(db, evidence, cf_by_id, o);
    if (!ds.ok()) return fail(ds);
    ds =
        RefuseRecoveredAlready(pool, lists, h->claim_recovered_upto(), done, o);
    if (!ds.ok()) return fail(ds);
  }
  Triage(pool, &lists, o, r);
  // After Triage, which drops the copies an interrupted recovery left by
  // comparing them with the originals.
  if (!lists.empty()) {
    std::vector<pmem::ListRoot*> left;
    for (pmem::ListRoot* l : lists) {
      if (done.count(RecordLine(pool, l)) == 0) {
        left.push_back(l);
        continue;
      }
      Log(o, "flintkv: list " + std::to_string(l->list_id) +
                 " was recovered into this DB already (this pool is a copy "
                 "of the one recovered, or the recovery that replayed it "
                 "stopped before dropping it): dropped, not replayed");
      r->lists_already_recovered++;
      pool->DropList(l);
    }
    lists.swap(left);
  }
  // Validate, and close the copy spans interrupted recoveries left open,
  // before anything is written.
  std::vector<pmem::ListRoot*> to_drop;
  std::vector<pmem::ListRoot*> replay;
  std::map<uint64_t, replay::CopyRange> copy_range;
  for (pmem::ListRoot* l : lists) {
    rocks::MemtableMeta* meta = rocks::MutableMetaOf(l);
    if (l->kind != pmem::kListMemtable ||
        meta->magic != rocks::kMemtableMetaMagic) {
      return fail(rocksdb::Status::Corruption(
          "flintkv: list " + std::to_string(l->list_id) +
          " is not a RocksDB memtable list"));
    }
    auto cf = cf_by_id.find(meta->column_family_id);
    if (cf == cf_by_id.end()) {
      r->lists_dropped_cf++;
      Log(o, "flintkv: list " + std::to_string(l->list_id) +
                 " belongs to column family id " +
                 std::to_string(meta->column_family_id) +
                 ", which the DB does not have (dropped): discarded");
      to_drop.push_back(l);
      continue;
    }
    replay::CopyRange& copies = copy_range[l->list_id];
    for (int k = 0; k < rocks::kMaxCopySpans; k++) {
      uint64_t* span = &meta->copy_spans[2 * k];
      if (span[0] == 0) break;
      // A recovery that died replaying this list wrote its last copy before
      // this one opened the DB (P11): close its span there.
      if (span[1] == 0) PersistCopyBound(&span[1], open_seq);
      copies.spans.emplace_back(span[0] - 1, span[1] - 1);
    }
    if (copies.spans.size() == rocks::kMaxCopySpans) {
      MergeCopySpans(meta, &copies);
    }
    replay.push_back(l);
  }
  // Per list: presence checks and the copy spans that never supersede.
  std::vector<ListPlan> plans;
  for (size_t i = 0; i < replay.size(); i++) {
    pmem::ListRoot* l = replay[i];
    ListPlan p;
    p.list = l;
    p.cf = cf_by_id[rocks::MetaOf(l)->column_family_id];
    p.copies = copy_range[l->list_id];
    // Presence checks cost a DB lookup per key; skip them when nothing in
    // the DB can hold an entry of this list: no SST sequence reaches its
    // first entry, WAL replay left nothing, and no earlier recovery copied
    // it.
    const CfState& st = cf_state[p.cf->GetID()];
    p.check = p.copies.valid() || st.memtable_entries;
    if (!p.check && st.file_seq > 0) {
      uint64_t first = 0;
      bool any = false;
      Status s = replay::MinSeq(pool, l, p.cf->GetComparator(), &first, &any);
      if (!s.ok()) return fail(ToRocks(s));
      p.check = any && st.file_seq >= first;
    }
    for (size_t j = 0; p.check && j <= i; j++) {
      if (rocks::MetaOf(replay[j])->column_family_id != p.cf->GetID()) continue;
      p.older.ranges.push_back(copy_range[replay[j]->list_id]);
    }
    if (p.check) r->lists_checked++;
    plans.push_back(std::move(p));
  }
  // A damaged entry (bit rot: a per-key checksum that does not match)
  // fails the recovery before anything is written (replay::CheckList).
  for (const ListPlan& p : plans) {
    rocksdb::Status cs = replay::CheckList(
        pool, p.list, db->GetOptions(p.cf).memtable_protection_bytes_per_key);
    if (!cs.ok()) return fail(cs);
  }
  r->triage_seconds = Seconds(start);
  // The SST path is tested with block-based tables only; any other table
  // format (PlainTable, CuckooTable) takes the memtable path.
  bool block_based = true;
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    auto tf = db->GetOptions(h).table_factory;
    block_based = block_based && tf && tf->IsInstanceOf("BlockBasedTable");
  }
  uint64_t max_seq = 0;
  rocksdb::Status rs =
      o.ingest_sst && block_based
          ? ReplayIntoSst(db, pool, handles, plans, o, r, &max_seq)
          : ReplayIntoMemtables(db, pool, plans, o, r, &max_seq);
  if (!rs.ok()) return fail(rs);
  // P18: no later write may reuse the number of a write acknowledged
  // before the crash (with the wrapper, those are at most W).
  if (r->watermark_used) max_seq = std::max(max_seq, r->watermark);
  if (max_seq > db->GetLatestSequenceNumber()) {
    r->sequence_raised_to = max_seq;
    rs = RaiseLastSequence(db, max_seq, replay::SstDir(db));
    if (!rs.ok()) return fail(rs);
  }
  for (const ListPlan& p : plans) to_drop.push_back(p.list);
  r->replay_seconds = Seconds(start);

  start = std::chrono::steady_clock::now();
  if (!to_drop.empty()) {
    rocksdb::FlushOptions fo;
    fo.wait = true;
    fo.allow_write_stall = true;
    rocksdb::Status s = db->Flush(fo, handles);
    if (!s.ok()) return fail(s);
    FLINTKV_TEST_CRASH_POINT("recovery_after_flush");
    if (!plans.empty()) {  // nothing to add for dropped column families
      for (const ListPlan& p : plans) recorded += RecordLine(pool, p.list);
      s = RecordRecoveredLists(db, recorded);
      if (!s.ok()) return fail(s);
    }
    FLINTKV_TEST_CRASH_POINT("recovery_after_record");
    // The replayed data is in SST files and the MANIFEST (Flush waits for
    // the install). Record that before dropping anything, so that a crash
    // in between neither replays twice nor trusts a stale watermark. R is
    // the newest sequence number in the DB's files, which a reopen's last
    // sequence always reaches: LastSequence here can be higher when the
    // flush dropped the newest replayed entries (a SingleDelete pair), and
    // a reopen would then see R above it and refuse a normal restart as a
    // damaged record (BitRotTest.FlippedRecoveryRecordIsRefusedNotTrusted,
    // AcknowledgedWritesTest.RecoveryKilledWhileDroppingListsRestarts).
    wm.BeginReset(NewestFileSeq(db));
    FLINTKV_TEST_CRASH_POINT("recovery_after_reset_begin");
    for (pmem::ListRoot* l : to_drop) pool->DropList(l);
    wm.FinishReset();
  } else if (wm.enabled()) {
    wm.SetPublished(db->GetLatestSequenceNumber());
  }
  r->flush_seconds = Seconds(start);
  replay::RemoveSstDir(db);
  // S3: the life this recovery begins builds on the DB as it is now. Not
  // LastSequence, which a reopen may not reach (a WAL-replayed write to a
  // column family dropped since counts there and nowhere durable): the
  // newest sequence number in its files, which a reopen reaches, or the
  // clock's import, which is durable.
  h->FinishRecovery(std::max(NewestFileSeq(db), r->sequence_raised_to));
  if (!plans.empty()) {
    // S8: the DB's OPTIONS file records, with the DB, which lists are in
    // it now (a backup or checkpoint does not take the record file). An
    // unchanged option rewrites the file; if that fails, the record file
    // still protects the DB where it stays.
    const std::string jobs =
        std::to_string(db->GetDBOptions().max_background_jobs);
    rocksdb::Status os = db->SetDBOptions({{"max_background_jobs", jobs}});
    if (!os.ok()) {
      Log(o,
          "flintkv: recording the recovered lists in the DB's OPTIONS "
          "file failed: " +
              os.ToString());
    }
  }
  Log(o, "flintkv: recovery: " + r->ToString());
  return rocksdb::Status::OK();
}

rocksdb::Status RecoverDB(const rocksdb::Options& db_options,
                          const std::string& db_path,
                          std::vector<rocksdb::ColumnFamilyDescriptor> cfs,
                          const RecoveryOptions& o, RecoveryReport* report) {
  rocksdb::Status s = BeginRecovery(db_path, o);
  if (!s.ok()) return s;
  auto fail = [&](rocksdb::Status st) {
    EndRecovery(o.pool_dir);
    return st;
  };
  {
    // This open only replays and closes: exempt from the space rule.
    std::shared_ptr<PoolSession> h;
    if (PoolSession::OpenExisting(o.pool_dir, &h).ok()) {
      h->MarkOfflineRecovery();
    }
  }
  std::vector<std::string> names;
  s = rocksdb::DB::ListColumnFamilies(db_options, db_path, &names);
  if (!s.ok()) return fail(s);
  if (cfs.empty()) {
    for (auto& n : names) {
      if (n == kClockColumnFamily) continue;  // AddListedClock below
      cfs.emplace_back(n, rocksdb::ColumnFamilyOptions(db_options));
    }
  }
  // P18: the clock family is opened if the MANIFEST has it (a kill inside
  // its import) and left out if not, whatever an OPTIONS file written
  // between its two edits says.
  if (std::count(names.begin(), names.end(), kClockColumnFamily) == 0) {
    cfs.erase(std::remove_if(
                  cfs.begin(), cfs.end(),
                  [](const auto& cf) { return cf.name == kClockColumnFamily; }),
              cfs.end());
  }
  AddListedClock(names, &cfs);
  std::shared_ptr<rocksdb::MemTableRepFactory> factory;
  s = NewMemTableRepFactory(FactoryOptions(o), &factory);
  if (!s.ok()) return fail(s);
  for (auto& cf : cfs) {
    cf.options.memtable_factory = factory;
    cf.options.disable_auto_compactions = true;  // keep SST seqnos (Triage)
  }
  rocksdb::DBOptions dbo(db_options);
  dbo.create_if_missing = false;
  dbo.avoid_flush_during_shutdown = false;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::Open(dbo, db_path, cfs, &handles, &db);
  if (!s.ok()) return fail(s);
  s = RecoverInto(db, handles, o, report);
  if (s.ok()) {
    // Offline recovery ends the wrapper's epoch: a plain user of the pool
    // must not be filtered by a watermark it never publishes.
    std::shared_ptr<PoolSession> h;
    if (PoolSession::OpenExisting(o.pool_dir, &h).ok()) {
      Watermark(h->pool()).Disable();
    }
  }
  for (auto* cf : handles) db->DestroyColumnFamilyHandle(cf);
  rocksdb::Status cs = db->Close();
  delete db;
  if (s.ok()) s = cs;
  return s;
}

rocksdb::Status OpenDB(const rocksdb::DBOptions& db_options,
                       const std::string& name,
                       const std::vector<rocksdb::ColumnFamilyDescriptor>& cfs,
                       std::vector<rocksdb::ColumnFamilyHandle*>* handles,
                       rocksdb::DB** dbptr, const RecoveryOptions& o,
                       RecoveryReport* report) {
  *dbptr = nullptr;
  if (db_options.two_write_queues) {
    // With two write queues RocksDB's latest sequence number is not the
    // published one the watermark must bound.
    return rocksdb::Status::NotSupported(
        "flintkv::OpenDB: option two_write_queues is not supported (the "
        "watermark needs LastSequence to cover only finished write groups)");
  }
  // The pool (created for a new DB), claimed for this DB: the wrapper
  // recovers its leftovers at every open (S3 checks they are its own).
  std::shared_ptr<PoolSession> h;
  Status hs = PoolSession::Open(o.pool_dir, o.pool_size, o.chunk_size, &h);
  if (hs.ok()) hs = h->Claim(BindingFor(name, o), /*wrapper=*/true);
  if (!hs.ok()) return ToRocks(hs);
  const bool recover = !h->ClaimedLists().empty();
  std::shared_ptr<rocksdb::MemTableRepFactory> factory;
  rocksdb::Status s = NewMemTableRepFactory(FactoryOptions(o), &factory);
  std::vector<rocksdb::ColumnFamilyDescriptor> descs(cfs);
  for (auto& cf : descs) {
    cf.options.memtable_factory = factory;
    // No compaction may rewrite what the presence checks look for.
    if (recover) cf.options.disable_auto_compactions = true;
  }
  // P18: a crash inside the clock's import left its column family.
  std::vector<std::string> names;
  if (rocksdb::DB::ListColumnFamilies(db_options, name, &names).ok()) {
    AddListedClock(names, &descs);
  }
  rocksdb::DB* db = nullptr;
  if (s.ok()) s = rocksdb::DB::Open(db_options, name, descs, handles, &db);
  if (s.ok()) s = RecoverInto(db, *handles, o, report);
  if (s.ok() && handles->size() > cfs.size()) {  // the clock's, now dropped
    db->DestroyColumnFamilyHandle(handles->back()).PermitUncheckedError();
    handles->pop_back();
  }
  for (size_t i = 0; s.ok() && recover && i < handles->size(); i++) {
    if (!cfs[i].options.disable_auto_compactions) {
      s = db->SetOptions((*handles)[i],
                         {{"disable_auto_compactions", "false"}});
    }
  }
  if (!s.ok()) {
    h->ReleaseClaim();
    if (db) {
      for (auto* cf : *handles) db->DestroyColumnFamilyHandle(cf);
      handles->clear();
      delete db;
    }
    return s;
  }
  // New epoch: entries of this run have seq > LastSequence now.
  Watermark wm(h->pool());
  wm.SetPublished(db->GetLatestSequenceNumber());
  wm.Enable();
  *dbptr = NewFlintDB(db, h, factory, *handles);
  return rocksdb::Status::OK();
}

}  // namespace flintkv

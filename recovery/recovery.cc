// Recovery of unflushed FlintKV memtables into RocksDB (flintkv/recovery.h,
// docs/rocksdb_recovery.md): RecoverInto runs the phases in order (root
// words, an interrupted reset, the refusals, triage, replay, flush and
// drop), and RecoverDB is the offline recovery around it. The pool claim
// is recovery/pool_claim.cc; OpenDB is recovery/open_db.cc.
// Thread safety: as flintkv/recovery.h (no writes to the DB meanwhile).
#include "flintkv/recovery.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "flintkv/rocksdb_memtable.h"
#include "memtable/rocksdb/recovery_port.h"
#include "recovery/pool_claim.h"
#include "recovery/progress.h"
#include "recovery/recovered_lists.h"
#include "recovery/refusals.h"
#include "recovery/replay_driver.h"
#include "recovery/root_words.h"
#include "recovery/sequence_clock.h"
#include "recovery/sst_ingest.h"
#include "recovery/triage.h"
#include "rocksdb_common/crash_point.h"
#include "rocksdb_common/watermark.h"

namespace flintkv {

using rocks::OpenKind;
using rocks::RecoveryPort;

namespace recovery {
namespace {

// Before Triage marks anything in the pool: the refusals
// (recovery/refusals.h), on the DB as RocksDB's open left it. *cf_state
// is taken again when a flush moved WAL replay into SST files.
rocksdb::Status RefuseUnsafeReplay(
    rocksdb::DB* db, RecoveryPort* port,
    const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const std::map<uint32_t, rocksdb::ColumnFamilyHandle*>& cf_by_id,
    const std::vector<pmem::ListRoot*>& lists,
    const std::set<std::string>& done, const RecoveryOptions& o,
    std::map<uint32_t, CfState>* cf_state) {
  bool memtable_entries = false;
  for (auto& [id, st] : *cf_state) memtable_entries |= st.memtable_entries;
  rocksdb::Status ds = RefuseWalRangeDeletes(db, handles, memtable_entries, o);
  if (!ds.ok()) return ds;
  // A flush above moved WAL replay into SST files: look again.
  if (memtable_entries) {
    for (auto& [id, cf] : cf_by_id) (*cf_state)[id] = StateOf(db, cf);
  }
  // S9: the lives' empty lists tell their families too.
  std::vector<pmem::ListRoot*> evidence = lists;
  for (pmem::ListRoot* l : port->ClaimedEmptyLists()) evidence.push_back(l);
  ds = RefuseOlderDb(db, evidence, cf_by_id, o);
  if (!ds.ok()) return ds;
  ds = RefuseRecoveredAlready(port->pool(), lists, port->claim_recovered_upto(),
                              done, o);
  if (!ds.ok()) return ds;
  return rocksdb::Status::OK();
}

// Flushes what was replayed, records the replayed lists (P11a) and drops
// every list in to_drop, R set around the drops (a crash in between
// finishes them at the next recovery); with nothing to drop, publishes the
// DB's last sequence as W. recorded: the record file's content.
rocksdb::Status FlushAndDrop(
    rocksdb::DB* db, pmem::Pool* pool, Watermark* wm,
    const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const std::vector<ListPlan>& plans,
    const std::vector<pmem::ListRoot*>& to_drop, std::string recorded) {
  if (to_drop.empty()) {
    if (wm->enabled()) wm->SetPublished(db->GetLatestSequenceNumber());
    return rocksdb::Status::OK();
  }
  rocksdb::FlushOptions fo;
  fo.wait = true;
  fo.allow_write_stall = true;
  rocksdb::Status s = db->Flush(fo, handles);
  if (!s.ok()) return s;
  FLINTKV_TEST_CRASH_POINT("recovery_after_flush");
  if (!plans.empty()) {  // nothing to add for dropped column families
    for (const ListPlan& p : plans) recorded += RecordLine(pool, p.list);
    s = RecordRecoveredLists(db, recorded);
    if (!s.ok()) return s;
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
  wm->BeginReset(NewestFileSeq(db));
  FLINTKV_TEST_CRASH_POINT("recovery_after_reset_begin");
  for (pmem::ListRoot* l : to_drop) pool->DropList(l);
  wm->FinishReset();
  return rocksdb::Status::OK();
}

// Ends the recovery: the claim becomes the life it begins.
void FinishLife(rocksdb::DB* db, RecoveryPort* port, bool replayed,
                const RecoveryOptions& o, const RecoveryReport& r) {
  // S3: the life this recovery begins builds on the DB as it is now. Not
  // LastSequence, which a reopen may not reach (a WAL-replayed write to a
  // column family dropped since counts there and nowhere durable): the
  // newest sequence number in its files, which a reopen reaches, or the
  // clock's import, which is durable.
  port->FinishRecovery(std::max(NewestFileSeq(db), r.sequence_raised_to));
  if (replayed) {
    // S8: the DB's OPTIONS file records, with the DB, which lists are in
    // it now (a backup or checkpoint does not take the record file). An
    // unchanged option rewrites the file; if that fails, the record file
    // still protects the DB where it stays.
    const std::string jobs =
        std::to_string(db->GetDBOptions().max_background_jobs);
    rocksdb::Status os = db->SetDBOptions({{"max_background_jobs", jobs}});
    if (!os.ok()) {
      LogWarn(o,
              "flintkv: recording the recovered lists in the DB's OPTIONS "
              "file failed: " +
                  os.ToString());
    }
  }
}

// RecoverInto on a pool claimed for db; handles: without a leftover clock.
rocksdb::Status RecoverClaimed(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    RecoveryPort* port, const RecoveryOptions& o, RecoveryReport* r) {
  pmem::Pool* pool = port->pool();
  Watermark wm(pool);
  std::map<uint32_t, rocksdb::ColumnFamilyHandle*> cf_by_id;
  for (auto* cf : handles) cf_by_id[cf->GetID()] = cf;
  // S3: only the lists the claim found to be this DB's (list_id order).
  std::vector<pmem::ListRoot*> lists = port->ClaimedLists();
  if (!port->claim_note().empty()) LogInfo(o, "flintkv: " + port->claim_note());
  r->lists_found = lists.size();
  rocksdb::Status s = CheckRootWords(pool, &wm, o, r);
  if (s.ok()) s = FinishInterruptedReset(db, pool, &wm, o, &lists);
  if (!s.ok()) return s;

  auto start = std::chrono::steady_clock::now();
  // Versions above this are the copies this recovery writes.
  const uint64_t open_seq = db->GetLatestSequenceNumber();
  std::map<uint32_t, CfState> cf_state;
  for (auto& [id, cf] : cf_by_id) cf_state[id] = StateOf(db, cf);
  std::string recorded;  // the DB's record file, read once
  std::set<std::string> done;
  if (!lists.empty()) {
    recorded = ReadRecordFile(db);
    done = RecordedLines(recorded);
    s = RefuseUnsafeReplay(db, port, handles, cf_by_id, lists, done, o,
                           &cf_state);
    if (!s.ok()) return s;
  }
  Triage(pool, &lists, o, r);
  DropRecovered(pool, done, &lists, o, r);
  std::vector<ListPlan> plans;
  std::vector<pmem::ListRoot*> to_drop;
  s = PlanReplay(db, pool, lists, cf_by_id, cf_state, open_seq, o, r, &plans,
                 &to_drop);
  if (!s.ok()) return s;
  r->triage_seconds = Seconds(start);
  s = ReplayPlans(db, pool, handles, plans, o, r);
  if (!s.ok()) return s;
  for (const ListPlan& p : plans) to_drop.push_back(p.list);
  r->replay_seconds = Seconds(start);

  start = std::chrono::steady_clock::now();
  s = FlushAndDrop(db, pool, &wm, handles, plans, to_drop, std::move(recorded));
  if (!s.ok()) return s;
  r->flush_seconds = Seconds(start);
  replay::RemoveSstDir(db);
  FinishLife(db, port, !plans.empty(), o, *r);
  LogInfo(o, "flintkv: recovery: " + r->ToString());
  return rocksdb::Status::OK();
}

}  // namespace
}  // namespace recovery

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
  RecoveryPort port;
  rocksdb::Status s = RecoveryPort::OpenExisting(o.memtable.pool_dir, &port);
  if (!s.ok()) return s;
  if (!port.claimed()) {
    return rocksdb::Status::InvalidArgument(
        "flintkv: RecoverInto without a claim on pool " + port.pool()->path() +
        ": call BeginRecovery(db_path, options) before DB::Open");
  }
  s = recovery::RecoverClaimed(db, handles, &port, o, r);
  if (!s.ok()) port.ReleaseClaim();
  return s;
}

rocksdb::Status RecoverDB(const rocksdb::Options& db_options,
                          const std::string& db_path,
                          std::vector<rocksdb::ColumnFamilyDescriptor> cfs,
                          const RecoveryOptions& o, RecoveryReport* report) {
  // This open only replays and closes: exempt from the space rule.
  rocksdb::Status s =
      recovery::ClaimExisting(db_path, o, OpenKind::kReplayAndClose);
  if (!s.ok()) return s;
  auto fail = [&](rocksdb::Status st) {
    EndRecovery(o.memtable.pool_dir);
    return st;
  };
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
  s = NewMemTableRepFactory(o.memtable, &factory);
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
    RecoveryPort port;
    if (RecoveryPort::OpenExisting(o.memtable.pool_dir, &port).ok()) {
      Watermark(port.pool()).Disable();
    }
  }
  for (auto* cf : handles) db->DestroyColumnFamilyHandle(cf);
  rocksdb::Status cs = db->Close();
  delete db;
  if (s.ok()) s = cs;
  return s;
}

}  // namespace flintkv

#include "recovery/replay_driver.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "memtable/list_walk.h"
#include "recovery/copy_spans.h"
#include "recovery/internal_key_cmp.h"
#include "recovery/progress.h"
#include "recovery/sequence_clock.h"
#include "recovery/sst_ingest.h"
#include "rocksdb/table.h"
#include "rocksdb_common/crash_point.h"
#include "rocksdb_common/status_convert.h"

namespace flintkv {
namespace recovery {
namespace {

using rocks::ToRocks;

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

rocksdb::Status ReplayPlans(
    rocksdb::DB* db, pmem::Pool* pool,
    const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const std::vector<ListPlan>& plans, const RecoveryOptions& o,
    RecoveryReport* r) {
  // The SST path is tested with block-based tables only; any other table
  // format (PlainTable, CuckooTable) takes the memtable path.
  bool block_based = true;
  for (rocksdb::ColumnFamilyHandle* cf : handles) {
    auto tf = db->GetOptions(cf).table_factory;
    block_based = block_based && tf && tf->IsInstanceOf("BlockBasedTable");
  }
  uint64_t max_seq = 0;
  rocksdb::Status rs =
      o.ingest_sst && block_based
          ? ReplayIntoSst(db, pool, handles, plans, o, r, &max_seq)
          : ReplayIntoMemtables(db, pool, plans, o, r, &max_seq);
  if (!rs.ok()) return rs;
  // P18: no later write may reuse the number of a write acknowledged
  // before the crash (with the wrapper, those are at most W).
  if (r->watermark_used) max_seq = std::max(max_seq, r->watermark);
  if (max_seq > db->GetLatestSequenceNumber()) {
    r->sequence_raised_to = max_seq;
    rs = RaiseLastSequence(db, max_seq, replay::SstDir(db));
  }
  return rs;
}

}  // namespace recovery
}  // namespace flintkv

#include "recovery/root_words.h"

#include <string>

#include "recovery/progress.h"

namespace flintkv {
namespace recovery {

rocksdb::Status CheckRootWords(pmem::Pool* pool, Watermark* wm,
                               const RecoveryOptions& o, RecoveryReport* r) {
  // One flipped bit in W dropped acknowledged writes as "above W", and in
  // R every list as "already flushed", silently: a word that fails its
  // check is not read, unless the override that ignores it is given.
  auto damaged = [&](const std::string& what, const std::string& override) {
    return rocksdb::Status::Corruption(
        "flintkv: pool " + pool->path() + ": the pool root's " + what +
        " fails its check (a flipped bit?). Nothing was dropped or "
        "replayed. " +
        override);
  };
  if (!wm->watermark_intact() && o.watermark != WatermarkMode::kOff) {
    return damaged(
        "published watermark (W), which tells the acknowledged writes,",
        "To replay every entry of the pool's lists (a WriteBatch being "
        "written at the crash may then be replayed in part): flintkv_tool "
        "recover --watermark=off (RecoveryOptions::watermark = "
        "WatermarkMode::kOff)");
  }
  if (!wm->record_intact()) {
    if (!o.allow_older_db) {
      return damaged(
          "record of an interrupted recovery (R)",
          "To discard the record and replay the lists (presence checks skip "
          "what the DB already holds): flintkv_tool recover --allow_older_db "
          "(RecoveryOptions::allow_older_db)");
    }
    LogWarn(o,
            "flintkv: discarding a damaged recovery record (allow_older_db)");
    wm->CancelReset();
  }
  r->watermark_used = wm->enabled() && o.watermark != WatermarkMode::kOff;
  if (o.watermark == WatermarkMode::kOn && !wm->enabled()) {
    return rocksdb::Status::InvalidArgument("flintkv: pool " + pool->path() +
                                            " has no watermark");
  }
  r->watermark = wm->published();
  return rocksdb::Status::OK();
}

rocksdb::Status FinishInterruptedReset(rocksdb::DB* db, pmem::Pool* pool,
                                       Watermark* wm, const RecoveryOptions& o,
                                       std::vector<pmem::ListRoot*>* lists) {
  if (wm->reset_pending() && wm->reset_seq() > db->GetLatestSequenceNumber()) {
    // R is the newest sequence number in the DB's files after a recovery's
    // flush, so this DB, if it is the one that recovery flushed, has
    // reached it. It has not:
    // the record is damaged (one flipped bit made every list "already
    // flushed") or the DB is older than that recovery (restored).
    if (!o.allow_older_db) {
      return rocksdb::Status::Corruption(
          "flintkv: pool " + pool->path() +
          " records an interrupted recovery that flushed up to sequence " +
          std::to_string(wm->reset_seq()) + ", but the DB's last sequence is " +
          std::to_string(db->GetLatestSequenceNumber()) +
          ": the pool's root is damaged, or the DB is older than that "
          "recovery (restored from a backup or checkpoint). Nothing was "
          "dropped or replayed. `flintkv_tool inspect` lists what the pool "
          "holds; to replay its lists into this DB anyway: flintkv_tool "
          "recover --allow_older_db (RecoveryOptions::allow_older_db)");
    }
    LogWarn(o,
            "flintkv: ignoring a record of an interrupted recovery above the "
            "DB's last sequence (allow_older_db): the lists are replayed");
    wm->CancelReset();
  }
  if (wm->reset_pending()) {
    // A previous recovery flushed everything it replayed and crashed while
    // dropping the lists: they are all in SST files already.
    LogInfo(o,
            "flintkv: finishing an interrupted recovery (replayed data is "
            "already flushed)");
    for (pmem::ListRoot* l : *lists) pool->DropList(l);
    wm->FinishReset();
    lists->clear();
  }
  return rocksdb::Status::OK();
}

}  // namespace recovery
}  // namespace flintkv

#include "memtable/rocksdb/recovery_port.h"

#include "memtable/rocksdb/db_binding.h"
#include "memtable/rocksdb/flintkv_factory.h"
#include "memtable/rocksdb/option_checks.h"
#include "memtable/rocksdb/pool_session.h"
#include "rocksdb_common/status_convert.h"

namespace flintkv {
namespace rocks {

rocksdb::Status RecoveryPort::OpenExisting(const std::string& pool_dir,
                                           RecoveryPort* out) {
  return ToRocks(PoolSession::OpenExisting(pool_dir, &out->session_));
}

rocksdb::Status RecoveryPort::Open(const MemTableOptions& options,
                                   RecoveryPort* out) {
  return ToRocks(PoolSession::Open(options.pool_dir, options.pool_size,
                                   options.chunk_size, &out->session_));
}

std::string RecoveryPort::PoolPath(const std::string& pool_dir) {
  return PoolSession::PoolPath(pool_dir);
}

pmem::Pool* RecoveryPort::pool() const { return session_->pool(); }

rocksdb::Status RecoveryPort::Claim(const std::string& db_path, OpenKind kind,
                                    const ClaimOverrides& overrides) {
  DbBinding b = ReadDbBinding(db_path);
  b.allow_foreign_open = overrides.allow_foreign_open;
  b.accept_incarnation = overrides.accept_incarnation;
  return ToRocks(session_->Claim(b, kind));
}

bool RecoveryPort::claimed() const { return session_->claimed(); }

std::vector<pmem::ListRoot*> RecoveryPort::ClaimedLists() const {
  return session_->ClaimedLists();
}

std::vector<pmem::ListRoot*> RecoveryPort::ClaimedEmptyLists() const {
  return session_->ClaimedEmptyLists();
}

std::string RecoveryPort::claim_note() const { return session_->claim_note(); }

uint64_t RecoveryPort::claim_recovered_upto() const {
  return session_->claim_recovered_upto();
}

void RecoveryPort::FinishRecovery(uint64_t life_start) {
  session_->FinishRecovery(life_start);
}

void RecoveryPort::ReleaseClaim() { session_->ReleaseClaim(); }

std::set<uint64_t> RecoveryPort::LeftoverIds() const {
  return session_->LeftoverIds();
}

rocksdb::Status RecoveryPort::DiscardLeftovers(
    uint64_t incarnation, bool dry_run, std::vector<std::string>* dropped) {
  return ToRocks(session_->DiscardLeftovers(incarnation, dry_run, dropped));
}

rocksdb::Status RecoveryPort::CheckOptions(
    const rocksdb::DBOptions& db, const rocksdb::ColumnFamilyOptions& cf,
    OpenKind kind) const {
  OptionContext ctx;
  ctx.pool = session_.get();
  ctx.recovers_at_open = kind == OpenKind::kRecoverEveryOpen;
  ctx.replay_only = kind == OpenKind::kReplayAndClose;
  return rocks::CheckOptions(db, cf, ctx);
}

void RecoveryPort::RangeTombstonesFlushed(
    const rocksdb::MemTableRepFactory& factory, uint64_t seq) {
  OnRangeTombstonesFlushed(factory, seq);
}

}  // namespace rocks
}  // namespace flintkv

#include "recovery/pool_claim.h"

namespace flintkv {

using rocks::OpenKind;
using rocks::RecoveryPort;

namespace recovery {

rocks::ClaimOverrides OverridesOf(const RecoveryOptions& o) {
  rocks::ClaimOverrides v;
  v.allow_foreign_open = o.allow_foreign_open;
  v.accept_incarnation = o.accept_incarnation;
  return v;
}

rocksdb::Status ClaimExisting(const std::string& db_path,
                              const RecoveryOptions& o, OpenKind kind) {
  RecoveryPort port;
  rocksdb::Status s = RecoveryPort::OpenExisting(o.memtable.pool_dir, &port);
  if (s.ok()) s = port.Claim(db_path, kind, OverridesOf(o));
  return s;
}

}  // namespace recovery

rocksdb::Status BeginRecovery(const std::string& db_path,
                              const RecoveryOptions& o) {
  return recovery::ClaimExisting(db_path, o, OpenKind::kReplayThenWrite);
}

rocksdb::Status DiscardLeftovers(const std::string& pool_dir,
                                 uint64_t incarnation, bool dry_run,
                                 std::vector<std::string>* dropped) {
  RecoveryPort port;
  rocksdb::Status s = RecoveryPort::OpenExisting(pool_dir, &port);
  if (s.ok()) s = port.DiscardLeftovers(incarnation, dry_run, dropped);
  return s;
}

void EndRecovery(const std::string& pool_dir) {
  RecoveryPort port;
  if (RecoveryPort::OpenExisting(pool_dir, &port).ok()) port.ReleaseClaim();
}

}  // namespace flintkv

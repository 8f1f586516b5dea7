#include "recovery/pool_claim.h"

#include <memory>

#include "memtable/rocksdb/pool_session.h"
#include "memtable/rocksdb/status_convert.h"

namespace flintkv {

using rocks::PoolSession;
using rocks::ToRocks;

namespace recovery {

rocks::DbBinding BindingFor(const std::string& db_path,
                            const RecoveryOptions& o) {
  rocks::DbBinding b = rocks::ReadDbBinding(db_path);
  b.allow_foreign_open = o.allow_foreign_open;
  b.accept_incarnation = o.accept_incarnation;
  return b;
}

}  // namespace recovery

rocksdb::Status BeginRecovery(const std::string& db_path,
                              const RecoveryOptions& o) {
  std::shared_ptr<PoolSession> h;
  Status s = PoolSession::OpenExisting(o.memtable.pool_dir, &h);
  if (s.ok()) s = h->Claim(recovery::BindingFor(db_path, o), /*wrapper=*/false);
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

}  // namespace flintkv

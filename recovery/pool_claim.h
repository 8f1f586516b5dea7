// Claiming a pool's leftovers for a DB before it is opened: BeginRecovery,
// EndRecovery and DiscardLeftovers of flintkv/recovery.h, and the claims
// RecoverDB and OpenDB make for their own kind of open.
// Thread safety: as flintkv/recovery.h (a claim is its thread's).
#pragma once

#include <string>

#include "flintkv/recovery.h"
#include "memtable/rocksdb/recovery_port.h"

namespace flintkv {
namespace recovery {

// The caller's overrides of the claim's identity checks.
rocks::ClaimOverrides OverridesOf(const RecoveryOptions& o);

// Claims the leftovers of o.memtable.pool_dir's pool (it must exist) for
// the DB at db_path, for an open of this kind.
rocksdb::Status ClaimExisting(const std::string& db_path,
                              const RecoveryOptions& o, rocks::OpenKind kind);

}  // namespace recovery
}  // namespace flintkv

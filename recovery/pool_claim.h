// Claiming a pool for a DB before it is opened (BeginRecovery, EndRecovery,
// DiscardLeftovers of flintkv/recovery.h), and the DB binding that
// RecoverDB and OpenDB derive from RecoveryOptions.
// Thread safety: as flintkv/recovery.h (a claim is its thread's).
#pragma once

#include <string>

#include "flintkv/recovery.h"
#include "memtable/rocksdb/db_binding.h"

namespace flintkv {
namespace recovery {

// The DB's binding with the caller's overrides.
rocks::DbBinding BindingFor(const std::string& db_path,
                            const RecoveryOptions& o);

}  // namespace recovery
}  // namespace flintkv

// Claiming a pool for a DB before it is opened (BeginRecovery, EndRecovery,
// DiscardLeftovers of flintkv/recovery.h), and the factory options and DB
// binding that RecoverDB and OpenDB derive from RecoveryOptions.
// Thread safety: as flintkv/recovery.h (a claim is its thread's).
#pragma once

#include <string>

#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "memtable/rocksdb/db_binding.h"

namespace flintkv {
namespace recovery {

// The memtable options of the factory every column family gets.
MemTableOptions FactoryOptions(const RecoveryOptions& o);

// The DB's binding with the caller's overrides.
rocks::DbBinding BindingFor(const std::string& db_path,
                            const RecoveryOptions& o);

}  // namespace recovery
}  // namespace flintkv

// What the RocksDB adapter keeps in a memtable list's ListRoot::user area
// (part of the pool format, see docs/nvm_layout.md).
#pragma once

#include <cstdint>

#include "pmem/layout.h"

namespace flintkv {
namespace rocks {

constexpr uint64_t kMemtableMetaMagic = 0x314154454d544e46ull;  // "FNTMETA1"
// MemtableMeta::recovery_state: a recovery found this list's data missing
// from the SST files and will replay it (recovery/recovery.cc).
constexpr uint32_t kReplayPending = 1;

struct MemtableMeta {
  uint64_t magic;
  uint32_t column_family_id;
  uint32_t recovery_state;  // 0, or kReplayPending (set by flintkv recovery)
  uint64_t created_micros;  // wall clock, for `flintkv_tool inspect`
  // P11: a recovery replaying this list gives its copies sequence numbers
  // in (copy_first, copy_last]; it persists copy_first + 1 before writing
  // the first copy and copy_last + 1 after the last (0: not set; an unset
  // copy_last with a set copy_first means "died while replaying").
  uint64_t copy_first_plus1;
  uint64_t copy_last_plus1;
  uint64_t reserved[11];
};
static_assert(sizeof(MemtableMeta) <= sizeof(pmem::ListRoot::user),
              "MemtableMeta must fit the user area");

inline const MemtableMeta* MetaOf(const pmem::ListRoot* root) {
  return reinterpret_cast<const MemtableMeta*>(root->user);
}
inline MemtableMeta* MutableMetaOf(pmem::ListRoot* root) {
  return reinterpret_cast<MemtableMeta*>(root->user);
}

}  // namespace rocks
}  // namespace flintkv

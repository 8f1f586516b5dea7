// Which user comparator orders a memtable (rocksdb::MemTable::KeyComparator,
// db/memtable.h, not a public header).
//
// MemTableRep::KeyComparator does not say which user comparator it applies,
// and the index's prefix fast path (memtable/key_comparator.h) is sound only
// for the bytewise order. The comparator RocksDB hands every rep is a
// MemTable::KeyComparator: its vtable pointer, then an InternalKeyComparator
// (a vtable pointer, then UserComparatorWrapper, whose one member is the user
// comparator's pointer). That layout is identical in RocksDB 7.8.3, 9.10.0
// and 9.11.2. The dynamic type is checked first, against the vtable symbol
// (weak: a RocksDB without it just gets no fast path), so another
// KeyComparator is never read past its end; and only RocksDB's own
// BytewiseComparator() singleton enables the fast path (not a reverse, a
// timestamp-aware or a user-written comparator, whatever its name).
#pragma once

#include <cstdint>
#include <cstring>

#include "rocksdb/comparator.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb_common/rocksdb_version_gate.h"

static_assert(FLINTKV_ROCKSDB_CHECKED,
              "unchecked RocksDB version: check rocksdb::MemTable::"
              "KeyComparator's layout (db/memtable.h, db/dbformat.h, "
              "util/user_comparator_wrapper.h), then "
              "rocksdb_common/rocksdb_version_gate.h");

// vtable for rocksdb::MemTable::KeyComparator (Itanium C++ ABI).
extern "C" const char flintkv_memtable_key_comparator_vtable[] __asm__(
    "_ZTVN7rocksdb8MemTable13KeyComparatorE") __attribute__((weak));

namespace flintkv {
namespace rocks {

// False if this RocksDB does not export the vtable symbol (a build with
// hidden visibility): the fast path is then never on.
inline bool MemTableComparatorRecognised() {
  return flintkv_memtable_key_comparator_vtable != nullptr;
}

// True if cmp is RocksDB's memtable comparator over BytewiseComparator().
inline bool OrdersByBytewiseUserKey(
    const rocksdb::MemTableRep::KeyComparator& cmp) {
  if (flintkv_memtable_key_comparator_vtable == nullptr) return false;
  struct Layout {
    const void* vptr;             // MemTable::KeyComparator
    const void* icmp_vptr;        // InternalKeyComparator
    const void* user_comparator;  // UserComparatorWrapper's member
  };
  const char* obj = reinterpret_cast<const char*>(&cmp);
  const void* vptr;
  std::memcpy(&vptr, obj + offsetof(Layout, vptr), sizeof(vptr));
  // An object's vtable pointer is the vtable's address point: past its
  // offset-to-top and type-info entries.
  if (vptr != flintkv_memtable_key_comparator_vtable + 2 * sizeof(void*)) {
    return false;
  }
  const void* ucmp;
  std::memcpy(&ucmp, obj + offsetof(Layout, user_comparator), sizeof(ucmp));
  return ucmp == rocksdb::BytewiseComparator();
}

}  // namespace rocks
}  // namespace flintkv

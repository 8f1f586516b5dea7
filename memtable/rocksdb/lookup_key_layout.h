// rocksdb::LookupKey's layout (db/lookup_key.h, not a public header).
//
// MemTableRep::Get takes a LookupKey, and the default Get leaks an iterator
// per call, so FlintRep overrides it and needs the memtable key. The first
// member is that key (varint32 length + internal key), unchanged since
// LevelDB and identical in RocksDB 7.8.3, 9.10.0 and 9.11.2.
#pragma once

#include "rocksdb/memtablerep.h"
#include "rocksdb_common/rocksdb_version_gate.h"

static_assert(FLINTKV_ROCKSDB_CHECKED,
              "unchecked RocksDB version: check rocksdb::LookupKey's layout "
              "(db/lookup_key.h), then rocksdb_common/rocksdb_version_gate.h");

namespace flintkv {
namespace rocks {

struct LookupKeyLayout {
  const char* start;   // varint32 length + internal key
  const char* kstart;  // internal key
  const char* end;
};

inline const char* MemtableKeyOf(const rocksdb::LookupKey& k) {
  return reinterpret_cast<const LookupKeyLayout*>(&k)->start;
}

}  // namespace rocks
}  // namespace flintkv

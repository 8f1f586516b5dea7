// A RocksDB memtable entry as a memtable list's node holds it (the bytes
// RocksDB hands MemTableRep::Insert, kept as they are), decoded.
// Thread safety: stateless. Persistence: reads only.
#pragma once

#include <cstdint>
#include <cstring>

#include "memtable/coding.h"
#include "pmem/layout.h"
#include "rocksdb/slice.h"
#include "rocksdb_common/rocksdb_version_gate.h"

static_assert(FLINTKV_ROCKSDB_CHECKED,
              "unchecked RocksDB version: check the memtable value types "
              "(ValueType in db/dbformat.h) and the TimedPut value packing "
              "(db/seqno_to_time_mapping.cc), then "
              "rocksdb_common/rocksdb_version_gate.h");

namespace flintkv {
namespace rocks {

// RocksDB value types that can appear in a memtable rep (db/dbformat.h).
constexpr uint8_t kTypeDeletion = 0x0;
constexpr uint8_t kTypeValue = 0x1;
constexpr uint8_t kTypeMerge = 0x2;
constexpr uint8_t kTypeSingleDeletion = 0x7;
constexpr uint8_t kTypeWideColumnEntity = 0x16;
// RocksDB 9's TimedPut: the value is followed by its fixed64 unix write time
// (PackValueAndWriteTime, db/seqno_to_time_mapping.cc).
constexpr uint8_t kTypeValuePreferredSeqno = 0x18;

// The widths RocksDB accepts for memtable_protection_bytes_per_key.
inline bool IsProtectionWidth(size_t w) {
  return w == 0 || w == 1 || w == 2 || w == 4 || w == 8;
}

// One decoded entry, pointing into the pool.
struct MemtableEntry {
  rocksdb::Slice user_key;
  uint64_t seq;
  uint8_t type;
  rocksdb::Slice value;
  // RocksDB's per-key checksum bytes (memtable_protection_bytes_per_key:
  // 0, 1, 2, 4 or 8 of them).
  rocksdb::Slice protection;
};

// varint32 ikey_len | user key | fixed64 (seq << 8 | type) | varint32 vlen
// | value [| checksum]. False if the node does not hold such an entry (also
// if the bytes after the value are not a protection width). The checksum
// is not checked here.
inline bool DecodeMemtableEntry(const pmem::NvmNode* n, MemtableEntry* e) {
  const char* p = n->data();
  const char* end = p + n->data_size;
  uint32_t ikey_len;
  const char* k = memtable::DecodeVarint32(p, end, &ikey_len);
  if (!k || ikey_len < 8 || ikey_len > static_cast<uint64_t>(end - k)) {
    return false;
  }
  uint64_t packed;
  std::memcpy(&packed, k + ikey_len - 8, 8);  // little-endian (x86)
  e->user_key = rocksdb::Slice(k, ikey_len - 8);
  e->seq = packed >> 8;
  e->type = static_cast<uint8_t>(packed & 0xff);
  uint32_t vlen;
  const char* v = memtable::DecodeVarint32(k + ikey_len, end, &vlen);
  if (!v || vlen > static_cast<uint64_t>(end - v)) return false;
  e->value = rocksdb::Slice(v, vlen);
  e->protection = rocksdb::Slice(v + vlen, end - (v + vlen));
  return IsProtectionWidth(e->protection.size());
}

}  // namespace rocks
}  // namespace flintkv

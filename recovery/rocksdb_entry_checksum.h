// RocksDB's per-key memtable checksum (memtable_protection_bytes_per_key),
// recomputed so that recovery and `flintkv_tool verify` can check the
// entries a crashed process left in the pool.
//
// Mirrors RocksDB 7.8.3 (and 9.10.0, 9.11.2: unchanged), which computes it in
// MemTable::Add via MemTable::UpdateEntryChecksum and checks it in
// MemTable::VerifyEntryChecksum (db/memtable.cc), as
//   ProtectionInfo64().ProtectKVO(user_key, value, type).ProtectS(seq)
// (db/kv_checksum.h): the XOR of NPHash64 over the user key (seed kSeedK),
// the value (kSeedV), the one-byte ValueType (kSeedO) and the 8-byte
// sequence number in host order (kSeedS). NPHash64 is rocksdb::Hash64
// (util/hash.h, XXPH3), an internal function that librocksdb exports. The
// entry keeps the low `width` bytes of the checksum, little-endian
// (EncodeFixed16/32/64), right after the value; width 0: protection off.
// These are internals: the version check makes a RocksDB upgrade revisit
// this file, and tests/recovery/rocksdb_bitrot_test.cc checks it against
// entries a real DB wrote.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rocksdb/slice.h"
#include "rocksdb_common/memtable_entry.h"
#include "rocksdb_common/rocksdb_version_gate.h"

static_assert(FLINTKV_ROCKSDB_CHECKED,
              "unchecked RocksDB version: check MemTable::UpdateEntryChecksum "
              "(db/memtable.cc), ProtectionInfo (db/kv_checksum.h) and "
              "NPHash64 (util/hash.h), then "
              "rocksdb_common/rocksdb_version_gate.h");

namespace rocksdb {
// util/hash.h: not a public header; defined in librocksdb (util/hash.cc).
uint64_t Hash64(const char* data, size_t n, uint64_t seed);
}  // namespace rocksdb

namespace flintkv {
namespace replay {

using rocks::IsProtectionWidth;

// ProtectionInfo64().ProtectKVO(user_key, value, type).ProtectS(seq).
inline uint64_t EntryChecksum(const rocksdb::Slice& user_key,
                              const rocksdb::Slice& value, uint8_t type,
                              uint64_t seq) {
  // ProtectionInfo<T>::kSeedK, kSeedV, kSeedO, kSeedS.
  constexpr uint64_t kSeedK = 0;
  constexpr uint64_t kSeedV = 0xD28AAD72F49BD50B;
  constexpr uint64_t kSeedO = 0xA5155AE5E937AA16;
  constexpr uint64_t kSeedS = 0x77A00858DDD37F21;
  const char op = static_cast<char>(type);  // ValueType : unsigned char
  return rocksdb::Hash64(user_key.data(), user_key.size(), kSeedK) ^
         rocksdb::Hash64(value.data(), value.size(), kSeedV) ^
         rocksdb::Hash64(&op, 1, kSeedO) ^
         rocksdb::Hash64(reinterpret_cast<const char*>(&seq), sizeof(seq),
                         kSeedS);
}

// True if `stored` (the bytes after the value, 0/1/2/4/8 of them) is the
// entry's checksum as RocksDB stored it; always true for width 0.
inline bool ChecksumMatches(const rocksdb::Slice& user_key,
                            const rocksdb::Slice& value, uint8_t type,
                            uint64_t seq, const rocksdb::Slice& stored) {
  if (stored.empty()) return true;
  const uint64_t c = EntryChecksum(user_key, value, type, seq);
  for (size_t i = 0; i < stored.size(); i++) {
    if (static_cast<uint8_t>(stored[i]) != static_cast<uint8_t>(c >> (8 * i))) {
      return false;
    }
  }
  return true;
}

}  // namespace replay
}  // namespace flintkv

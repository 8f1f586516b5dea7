// Varint32 length prefixes: the key format shared with RocksDB's memtable
// entries ("prefix_len_key"), so one comparator interface serves both the
// standalone store and the RocksDB adapter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flintkv {
namespace memtable {

constexpr size_t kMaxVarint32Bytes = 5;

inline size_t VarintLength(uint64_t v) {
  size_t n = 1;
  while (v >= 128) {
    v >>= 7;
    n++;
  }
  return n;
}

inline char* EncodeVarint32(char* dst, uint32_t v) {
  auto* p = reinterpret_cast<uint8_t*>(dst);
  while (v >= 128) {
    *p++ = static_cast<uint8_t>(v | 128);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return reinterpret_cast<char*>(p);
}

// Decodes a varint32 from [p, limit). Returns the byte after it, or nullptr
// if the encoding is truncated or too long (corrupt input never overreads).
inline const char* DecodeVarint32(const char* p, const char* limit,
                                  uint32_t* v) {
  uint32_t result = 0;
  for (uint32_t shift = 0; shift <= 28 && p < limit; shift += 7) {
    uint32_t byte = static_cast<uint8_t>(*p++);
    result |= (byte & 127) << shift;
    if (!(byte & 128)) {
      *v = result;
      return p;
    }
  }
  return nullptr;
}

// The key bytes of a trusted length-prefixed key.
inline std::string_view PrefixedKey(const char* p) {
  uint32_t len = static_cast<uint8_t>(*p);
  if (len < 128) return std::string_view(p + 1, len);  // keys < 128 bytes
  const char* k = DecodeVarint32(p, p + kMaxVarint32Bytes, &len);
  return k ? std::string_view(k, len) : std::string_view();
}

}  // namespace memtable
}  // namespace flintkv

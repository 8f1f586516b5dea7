// Key order of a durable skiplist.
//
// Keys are varint32-length-prefixed byte strings (RocksDB's memtable key
// format). Implementations must be a strict weak order, thread-safe and
// must not allocate: they run on every step of every traversal.
//
// The index's fast path: a comparator whose order is, first, the unsigned
// bytes of all but a fixed-size trailer of each key (bytewise; RocksDB's
// internal keys under BytewiseComparator, whose 8-byte trailer is the
// sequence and type) declares so with SetBytewisePrefix. Then OrderPrefix(a)
// < OrderPrefix(b) implies Compare(a, b) < 0, every index node keeps its
// key's prefix in DRAM beside its links, and a search calls Compare only
// when two prefixes tie (memtable/durable_skiplist.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "memtable/coding.h"

namespace flintkv {
namespace memtable {

class KeyComparator {
 public:
  virtual ~KeyComparator() = default;
  // <0, 0, >0 as a orders before, equal to, after b.
  virtual int Compare(const char* a, const char* b) const = 0;

  bool prefix_ordered() const { return prefix_ordered_; }
  // The first 8 bytes of the key without its trailer, big-endian and
  // zero-padded. Sound for the bytewise order: if two prefixes differ, the
  // keys differ within their first 8 bytes and the first difference orders
  // both alike, a shorter key's zero pad included (a key orders before every
  // longer key it begins). Equal prefixes tell nothing.
  uint64_t OrderPrefix(const char* key) const {
    uint32_t len = static_cast<uint8_t>(*key);
    const char* p = key + 1;
    if (len >= 128) {
      p = DecodeVarint32(key, key + kMaxVarint32Bytes, &len);
      if (!p) return 0;  // malformed: PrefixedKey reads it as empty too
    }
    // A key shorter than the trailer is all byte-ordered (InternalKeyCmp's
    // rule for malformed keys), so the prefix agrees with Compare there too.
    const uint32_t n = len >= trailer_ ? len - trailer_ : len;
    uint64_t v = 0;
    if (n >= 8) {
      std::memcpy(&v, p, sizeof(v));
      return __builtin_bswap64(v);
    }
    for (uint32_t i = 0; i < n; i++) {
      v |= uint64_t{static_cast<uint8_t>(p[i])} << (56 - 8 * i);
    }
    return v;
  }
  // What an index node keeps of its key: OrderPrefix, or 0 without one.
  uint64_t IndexPrefix(const char* key) const {
    return prefix_ordered_ ? OrderPrefix(key) : 0;
  }
  // Compare(a, b) for keys whose IndexPrefix are pa and pb: the prefixes
  // decide unless they tie (the one key order of every index over keys).
  int CompareWithPrefix(const char* a, uint64_t pa, const char* b,
                        uint64_t pb) const {
    if (prefix_ordered_ && pa != pb) return pa < pb ? -1 : 1;
    return Compare(a, b);
  }

 protected:
  void SetBytewisePrefix(uint32_t trailer) {
    prefix_ordered_ = true;
    trailer_ = trailer;
  }

 private:
  bool prefix_ordered_ = false;
  uint32_t trailer_ = 0;
};

// Lexicographic unsigned-byte order (the standalone store's order).
// Final: a subclass changing Compare would keep the bytewise prefix.
class BytewiseKeyComparator final : public KeyComparator {
 public:
  BytewiseKeyComparator() { SetBytewisePrefix(0); }
  int Compare(const char* a, const char* b) const override {
    return PrefixedKey(a).compare(PrefixedKey(b));
  }
};

}  // namespace memtable
}  // namespace flintkv

// Key order of a durable skiplist.
//
// Keys are varint32-length-prefixed byte strings (RocksDB's memtable key
// format). Implementations must be a strict weak order, thread-safe and
// must not allocate: they run on every step of every traversal.
#pragma once

#include <cstring>

#include "memtable/coding.h"

namespace flintkv {
namespace memtable {

class KeyComparator {
 public:
  virtual ~KeyComparator() = default;
  // <0, 0, >0 as a orders before, equal to, after b.
  virtual int Compare(const char* a, const char* b) const = 0;
};

// Lexicographic unsigned-byte order (the standalone store's order).
class BytewiseKeyComparator : public KeyComparator {
 public:
  int Compare(const char* a, const char* b) const override {
    return PrefixedKey(a).compare(PrefixedKey(b));
  }
};

}  // namespace memtable
}  // namespace flintkv

// InternalKeyCmp: the order of a RocksDB memtable list, for walking it
// outside RocksDB (recovery, flintkv_tool inspect/verify).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "memtable/key_comparator.h"
#include "rocksdb/comparator.h"
#include "rocksdb/slice.h"

namespace flintkv {

// The memtable's order: user key ascending, then (seq << 8 | type)
// descending (RocksDB's InternalKeyComparator on memtable keys).
class InternalKeyCmp : public memtable::KeyComparator {
 public:
  explicit InternalKeyCmp(const rocksdb::Comparator* ucmp) : ucmp_(ucmp) {
    // The index may order by the user key's first bytes (key_comparator.h).
    if (ucmp == rocksdb::BytewiseComparator()) SetBytewisePrefix(8);
  }
  int Compare(const char* a, const char* b) const override {
    std::string_view ka = memtable::PrefixedKey(a);
    std::string_view kb = memtable::PrefixedKey(b);
    uint64_t pa = 0, pb = 0;
    if (ka.size() >= 8) {
      std::memcpy(&pa, ka.data() + ka.size() - 8, 8);
      ka.remove_suffix(8);
    }
    if (kb.size() >= 8) {
      std::memcpy(&pb, kb.data() + kb.size() - 8, 8);
      kb.remove_suffix(8);
    }
    int c = ucmp_->Compare(rocksdb::Slice(ka.data(), ka.size()),
                           rocksdb::Slice(kb.data(), kb.size()));
    if (c != 0) return c;
    return pa > pb ? -1 : (pa < pb ? 1 : 0);
  }

 private:
  const rocksdb::Comparator* ucmp_;
};

}  // namespace flintkv

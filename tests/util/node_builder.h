// Builds one sealed node (length-prefixed key, then value) in a
// DurableSkipList's arena, for tests that insert below the Store API.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "flintkv/status.h"
#include "memtable/coding.h"
#include "pmem/layout.h"

namespace flintkv {
namespace test {

// A key as the list stores and looks it up: varint length, then the bytes.
inline std::string PrefixKey(std::string_view key) {
  std::string pk(memtable::VarintLength(key.size()), '\0');
  memtable::EncodeVarint32(&pk[0], static_cast<uint32_t>(key.size()));
  pk.append(key);
  return pk;
}

// List: any DurableSkipList<P>. flags: e.g. pmem::kNodeTombstone.
template <class List>
Status BuildNode(List* list, std::string_view key, std::string_view value,
                 uint32_t flags, pmem::NvmNode** out) {
  size_t klen = memtable::VarintLength(key.size()) + key.size();
  pmem::NvmNode* node = nullptr;
  Status s = list->AllocateNode(klen + value.size(), &node);
  if (!s.ok()) return s;
  char* p =
      memtable::EncodeVarint32(node->data(), static_cast<uint32_t>(key.size()));
  std::memcpy(p, key.data(), key.size());
  std::memcpy(p + key.size(), value.data(), value.size());
  List::SealNode(node, static_cast<uint32_t>(klen), flags);
  *out = node;
  return Status::OK();
}

}  // namespace test
}  // namespace flintkv

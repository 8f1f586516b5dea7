// WalkList: validated traversal of a persistent sorted list (recovery and
// `flintkv_tool verify`).
//
// Every node reached is checked before it is trusted (P7): 16-byte aligned,
// inside the region (and inside a chunk of the list when chunks are given:
// W1; Recover always gives them), a valid header check, a well-formed
// length-prefixed key, keys in ascending order, and within one key's run
// the committed versions strictly descending. A node whose version is still MAX
// (never made durable; rule R1 drops it) is exempt from the version order: with
// weak durability (P16) two unfenced versions of one key, or a durable newer
// version ahead of an older one still MAX, are a legal crash state. A cycle is
// therefore caught by Brent's algorithm on node offsets (W2): a walk over n
// distinct nodes ends within 3n steps whatever the pool size. The first
// violation ends the walk with Corruption naming the list, the node's index and
// its offset. Single-threaded; reads only, except where the visitor drops a
// node: then the walker unlinks it (*link = node->next) and calls on_unlink
// so the caller can flush the changed pointer. A caller that must not
// change a pool it then refuses (Recover) keeps every node and repairs
// after the walk succeeded (W3).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "flintkv/status.h"
#include "memtable/coding.h"
#include "memtable/key_comparator.h"
#include "pmem/layout.h"
#include "pmem/region.h"

namespace flintkv {
namespace memtable {

struct ChunkRange {
  uint64_t offset;
  uint64_t len;
};

enum class WalkDecision { kKeep, kDrop };

inline bool KeyWellFormed(const pmem::NvmNode* n) {
  uint32_t len;
  const char* k = DecodeVarint32(n->data(), n->data() + n->key_size, &len);
  return k != nullptr &&
         static_cast<uint64_t>(k - n->data()) + len == n->key_size;
}

// visit(const NvmNode*) -> WalkDecision; on_unlink(uint64_t* link).
// cmp == nullptr: the list's order is unknown (a RocksDB column family with
// a comparator this process does not have): every other check is made.
template <class Visit, class OnUnlink>
Status WalkList(const pmem::Region& region, pmem::ListRoot* root,
                const KeyComparator* cmp, const std::vector<ChunkRange>* chunks,
                Visit visit, OnUnlink on_unlink) {
  uint64_t* link = &root->head.next;
  const pmem::NvmNode* prev = nullptr;
  // Smallest committed version seen in the current key's run (MAX: none).
  uint64_t run_version = pmem::kUncommittedVersion;
  uint64_t count = 0;
  // Brent's cycle detection: `mark` is the offset seen at the last power of
  // two steps; meeting it again means a cycle of length <= `power`.
  uint64_t mark = 0, power = 1, since_mark = 0;
  while (*link != 0) {
    uint64_t off = *link;
    auto where = [&](const char* what) {
      return Status::Corruption("list " + std::to_string(root->list_id) +
                                ": node #" + std::to_string(count) +
                                " at offset " + std::to_string(off) + ": " +
                                what);
    };
    if (off % pmem::kNodeAlign != 0 ||
        !region.InBounds(off, sizeof(pmem::NvmNode))) {
      return where("pointer out of bounds or misaligned");
    }
    auto* n = region.FromOffset<pmem::NvmNode>(off);
    if (!n->HeaderValid()) return where("bad node header");
    uint64_t size = pmem::NvmNode::AllocSize(n->data_size);
    if (!region.InBounds(off, size)) return where("node overruns the pool");
    if (chunks) {
      auto it = std::upper_bound(
          chunks->begin(), chunks->end(), off,
          [](uint64_t o, const ChunkRange& c) { return o < c.offset; });
      if (it == chunks->begin() ||
          off + size > std::prev(it)->offset + std::prev(it)->len) {
        return where("node is not inside a chunk of this list");
      }
    }
    if (!KeyWellFormed(n)) return where("malformed key");
    if (off == mark) return where("list has a cycle");
    if (++since_mark == power) {
      mark = off;
      power *= 2;
      since_mark = 0;
    }
    if (cmp) {
      int c = prev ? cmp->Compare(prev->data(), n->data()) : -1;
      if (c > 0) return where("list is not sorted (or has a cycle)");
      if (c < 0) run_version = pmem::kUncommittedVersion;
      if (n->version != pmem::kUncommittedVersion) {
        if (n->version >= run_version) {
          return where("versions of a key not descending (or a cycle)");
        }
        run_version = n->version;
      }
    }
    prev = n;
    count++;
    if (visit(n) == WalkDecision::kDrop) {
      *link = n->next;
      on_unlink(link);
    } else {
      link = &n->next;
    }
  }
  return Status::OK();
}

template <class Visit, class OnUnlink>
Status WalkList(const pmem::Region& region, pmem::ListRoot* root,
                const KeyComparator& cmp, const std::vector<ChunkRange>* chunks,
                Visit visit, OnUnlink on_unlink) {
  return WalkList(region, root, &cmp, chunks, visit, on_unlink);
}

}  // namespace memtable
}  // namespace flintkv

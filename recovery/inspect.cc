// InspectPool: what a pool holds, checked with the validated walker
// (flintkv_tool inspect / verify).
#include <sys/stat.h>

#include <cstring>

#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "memtable/list_walk.h"
#include "memtable/rocksdb/memtable_meta.h"
#include "memtable/rocksdb/pool_handle.h"
#include "recovery/internal_key_cmp.h"
#include "memtable/rocksdb/watermark.h"
#include "rocksdb/comparator.h"

namespace flintkv {

rocksdb::Status InspectPool(const std::string& pool_dir, PoolSummary* out) {
  std::string path = rocks::PoolHandle::PoolPath(pool_dir);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return rocksdb::Status::NotFound("flintkv: no pool at " + path);
  }
  std::shared_ptr<rocks::PoolHandle> h;
  Status s = rocks::PoolHandle::Get(pool_dir, 1ull << 30,
                                    MemTableOptions().chunk_size, &h);
  if (!s.ok()) {
    return rocksdb::Status::Corruption("flintkv: " + s.message());
  }
  pmem::Pool* pool = h->pool();
  Watermark wm(pool);
  *out = PoolSummary();
  out->path = pool->path();
  out->size = pool->size();
  out->is_pmem = pool->is_pmem();
  out->bytes_in_use = pool->BytesInUse();
  out->watermark_enabled = wm.enabled();
  out->watermark = wm.published();
  std::string first_error;
  const auto& left = h->leftover_lists();
  for (pmem::ListRoot* l : pool->Lists()) {
    ListSummary ls;
    ls.list_id = l->list_id;
    ls.kind = l->kind;
    ls.state = l->state;
    ls.batch_mode = l->batch_mode != 0;
    ls.commit_version = l->commit_version;
    ls.leftover = std::binary_search(left.begin(), left.end(), l->list_id);
    bool memtable = l->kind == pmem::kListMemtable;
    if (memtable) {
      const rocks::MemtableMeta* m = rocks::MetaOf(l);
      if (m->magic != rocks::kMemtableMetaMagic) {
        ls.error = "memtable list without a valid MemtableMeta";
      }
      ls.column_family_id = m->column_family_id;
      ls.created_micros = m->created_micros;
    }
    std::vector<memtable::ChunkRange> chunks;
    for (const pmem::ChunkInfo& c : pool->ChunksOf(l->list_id)) {
      chunks.push_back({c.offset, c.len});
      ls.chunks++;
      ls.chunk_bytes += c.len;
    }
    InternalKeyCmp icmp(rocksdb::BytewiseComparator());
    memtable::BytewiseKeyComparator bcmp;
    const memtable::KeyComparator& cmp =
        memtable ? static_cast<const memtable::KeyComparator&>(icmp) : bcmp;
    bool first = true;
    Status ws = memtable::WalkList(
        *pool, l, cmp, &chunks,
        [&](const pmem::NvmNode* n) {
          if (n->version == pmem::kUncommittedVersion) {
            ls.uncommitted++;
            return memtable::WalkDecision::kKeep;
          }
          ls.entries++;
          uint64_t seq = n->version;
          if (memtable) {
            uint32_t ikey_len;
            const char* k = memtable::DecodeVarint32(
                n->data(), n->data() + n->key_size, &ikey_len);
            if (k && ikey_len >= 8) {
              uint64_t packed;
              std::memcpy(&packed, k + ikey_len - 8, 8);
              seq = packed >> 8;
            } else if (ls.error.empty()) {
              ls.error = "memtable node without an internal key";
            }
          }
          if (first || seq < ls.min_seq) ls.min_seq = seq;
          if (first || seq > ls.max_seq) ls.max_seq = seq;
          first = false;
          return memtable::WalkDecision::kKeep;
        },
        [](uint64_t*) {});
    if (!ws.ok() && ls.error.empty()) ls.error = ws.message();
    if (!ls.error.empty() && first_error.empty()) {
      first_error =
          ls.error.rfind("list ", 0) == 0
              ? ls.error
              : "list " + std::to_string(l->list_id) + ": " + ls.error;
    }
    out->lists.push_back(ls);
  }
  if (!first_error.empty()) {
    return rocksdb::Status::Corruption("flintkv: " + path + ": " + first_error);
  }
  return rocksdb::Status::OK();
}

}  // namespace flintkv

// ListDbSync: ListDB's staging tier (DICL/listdb: DBClient::Put in
// db_client.h, PmemLog in core/pmem_log.h, lockfree_skiplist in
// index/lockfree_skiplist.h) as the FlintKV paper benchmarks it, "ListDB(sync)"
// (§7.2, Appendix A): the original write path with its two durability bugs
// fixed. Used by flintkv_bench (--impl=listdb) and tests only.
//
// PUT (per call, no lock except at a log chunk switch):
//   1. reserve the record in the shared PMEM log: one fetch_add (PmemLog);
//   2. write the record (FlintKV node layout: header with next = offset of
//      the following record, version = "not valid", then key and value),
//      flush it, fence                                          (LD1);
//   3. write the validity mark (version = Mark(list, offset)), flush it,
//      fence -- the flush ListDB omits before returning          (LD2);
//   4. link a DRAM index node (key copy + record pointer) into the lock-free
//      skiplist; return.
// Two fences per put; the put is visible (step 4) only once durable.
//
// Invariants (docs/baselines.md):
//  LD1 a record's header, key and value are durable before its mark is
//      written, so a marked record is whole.
//  LD2 a record is durable and marked before the put returns or becomes
//      visible.
//  LD3 (the Appendix A fix, in recovery) every marked record is replayed,
//      whatever lies before it: a record whose writer has not finished (or
//      never began writing) is skipped -- by its size when its header is
//      whole, else 16 bytes at a time -- instead of ending the log. ListDB
//      stops at the first invalid record, so a crash while an earlier
//      reservation is still unwritten loses later acknowledged puts.
// Options.stop_at_invalid and Options.no_final_fence restore the original's
// behaviour for the crash tests (tests/crash/baseline_crash_test.cc), which
// must then fail.
//
// Thread safety: Put may run concurrently with Put and the readers.
#pragma once

#include <cstring>
#include <string_view>

#include "memtable/coding.h"
#include "pmem/layout.h"
#include "tools/baselines/concurrent_index.h"
#include "tools/baselines/pmem_log.h"

namespace flintkv {
namespace baselines {

struct ListDbOptions {
  bool stop_at_invalid = false;  // original recovery (Appendix A bug)
  bool no_final_fence = false;   // original: the mark is not fenced (LD2)
};

template <class P>
class ListDbSync {
 public:
  ListDbSync(const memtable::KeyComparator* cmp, pmem::Region* region,
             uint64_t list_id, const ListDbOptions& options = {})
      : options_(options), log_(region, list_id), index_(cmp) {}

  static uint64_t Mark(uint64_t list_id, uint64_t offset) {
    uint64_t m = Mix64(Mix64(0x4c495354444253ull, list_id), offset);
    return m == pmem::kUncommittedVersion ? 1 : m;
  }

  Status Put(std::string_view key, std::string_view value) {
    pmem::NvmNode* rec = nullptr;
    Status s = Reserve(key.size(), value.size(), &rec);
    if (!s.ok()) return s;
    return Commit(rec, key, value);
  }

  // Put in two halves, so that tests can interleave them (Appendix A).
  Status Reserve(size_t key_size, size_t value_size, pmem::NvmNode** rec) {
    size_t data = memtable::VarintLength(key_size) + key_size + value_size;
    if (data > UINT32_MAX) return Status::InvalidArgument("entry too large");
    char* p = nullptr;
    Status s = log_.Reserve(pmem::NvmNode::AllocSize(data), &p);
    if (!s.ok()) return s;
    *rec = reinterpret_cast<pmem::NvmNode*>(p);
    (*rec)->data_size = static_cast<uint32_t>(data);
    return Status::OK();
  }

  Status Commit(pmem::NvmNode* rec, std::string_view key,
                std::string_view value) {
    const uint64_t off = log_.region()->ToOffset(rec);
    char* p = memtable::EncodeVarint32(rec->data(),
                                       static_cast<uint32_t>(key.size()));
    std::memcpy(p, key.data(), key.size());
    std::memcpy(p + key.size(), value.data(), value.size());
    const uint32_t klen = static_cast<uint32_t>(p + key.size() - rec->data());
    rec->next = off + pmem::NvmNode::AllocSize(rec->data_size);  // the chain
    rec->version = pmem::kUncommittedVersion;                    // not valid
    rec->key_size = klen;
    rec->flags = 0;
    rec->check = pmem::NvmNode::HeaderCheck(rec->data_size, klen, 0);
    P::Flush(rec, sizeof(pmem::NvmNode) + rec->data_size);
    P::Fence();  // LD1: the record is whole before it is marked
    rec->version = Mark(log_.list_id(), off);
    P::Flush(&rec->version, sizeof(rec->version));
    if (!options_.no_final_fence) P::Fence();  // LD2: durable before return
    IndexNode* in = memtable::NewIndexNode(rec, rec->data(), klen,
                                           memtable::RandomIndexHeight(), 0);
    if (!in) return Status::NoSpace("out of DRAM for the index");
    index_.Insert(in);
    return Status::OK();
  }

  const ConcurrentIndex& index() const { return index_; }

  // Recovery's scan of one log chunk [begin, begin + len) (offsets): calls
  // fn(record) for every record it replays (LD3; Options.stop_at_invalid:
  // the original's scan).
  template <class Fn>
  static void ScanChunk(const pmem::Region& region, uint64_t list_id,
                        uint64_t begin, uint64_t len,
                        const ListDbOptions& options, Fn fn) {
    const uint64_t end = begin + len;
    uint64_t off = begin;
    while (off + sizeof(pmem::NvmNode) <= end) {
      const auto* r = region.FromOffset<pmem::NvmNode>(off);
      const uint64_t n = pmem::NvmNode::AllocSize(r->data_size);
      const bool whole_header = r->HeaderValid() && r->key_size > 0 &&
                                n <= end - off && r->next == off + n;
      if (whole_header && r->version == Mark(list_id, off)) {
        fn(r);
        off += n;
      } else if (options.stop_at_invalid) {
        return;
      } else {
        off += whole_header ? n : pmem::kNodeAlign;
      }
    }
  }

 private:
  const ListDbOptions options_;
  PmemLog log_;
  ConcurrentIndex index_;
};

}  // namespace baselines
}  // namespace flintkv

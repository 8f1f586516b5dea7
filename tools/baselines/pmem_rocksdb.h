// PmemRocksDbStaging: the staging tier of PMemRocksDB (pmem/pmem-rocksdb:
// RocksDB with the WAL on PMEM and key-value separation) in the configuration
// of the FlintKV paper (§7.2): pipelined write, concurrent memtable writes,
// values in PMEM. Used by flintkv_bench (--impl=pmemrocksdb) and tests only.
//
// WRITE (a Put is a batch of one):
//   1. the writer encodes its batch into a per-thread DRAM buffer (RocksDB's
//      WriteBatch rep) and joins the write queue (WriteThread, one CAS);
//   2. the WAL group leader assigns sequence numbers, reserves the group's
//      records contiguously in the PMEM log, copies every writer's records
//      there (FlintKV node layout; header next = sequence number, version =
//      checksum of list, offset, sequence and data, as RocksDB's per-record
//      CRC), flushes the whole range and fences once               (PR1);
//   3. the next WAL group may start; meanwhile every writer of the group
//      inserts its own records into the concurrent DRAM skiplist (index node:
//      key copy + pointer to the record, whose value stays in PMEM: the
//      key-value separation);
//   4. the last writer to finish publishes the group's last sequence and
//      completes the group; each writer returns.
// One fence per group; no lock on the path (CAS queues, parallel inserts).
//
// Invariants (docs/baselines.md):
//  PR1 every record of a group is durable before any writer of the group
//      returns or its records become visible (the published sequence).
//  PR2 (recovery) a log chunk is a prefix of whole groups, then possibly one
//      torn group: the next group is written only after the previous one's
//      fence. Recovery replays each chunk up to its first record that fails
//      its checksum, as RocksDB's WAL recovery stops at the first corrupt
//      record (kPointInTimeRecovery).
//
// Thread safety: Write may run concurrently with Write and the readers.
#pragma once

#include <cstring>
#include <string>
#include <string_view>

#include "memtable/coding.h"
#include "pmem/layout.h"
#include "tools/baselines/concurrent_index.h"
#include "tools/baselines/pmem_log.h"
#include "tools/baselines/write_thread.h"

namespace flintkv {
namespace baselines {

template <class P>
class PmemRocksDbStaging {
 public:
  PmemRocksDbStaging(const memtable::KeyComparator* cmp, pmem::Region* region,
                     uint64_t list_id)
      : log_(region, list_id), index_(cmp) {}

  static uint64_t Checksum(uint64_t list_id, uint64_t offset,
                           const pmem::NvmNode* r) {
    uint64_t h =
        Mix64(Mix64(Mix64(0x504d454d524f43ull, list_id), offset), r->next);
    h = Mix64(h, uint64_t{r->data_size} << 32 | r->key_size);
    h = HashBytes(h, r->data(), r->data_size);
    return h == pmem::kUncommittedVersion ? 1 : h;
  }

  // An atomic batch of n puts (n = 1: a Put). Durable and visible on return.
  Status Write(const std::string_view* keys, const std::string_view* values,
               size_t n) {
    if (n == 0) return Status::OK();
    // 1. The WriteBatch rep: varint key length, key, varint value length,
    //    value per record (reused per thread, as db_bench reuses its batch).
    static thread_local std::string rep;
    rep.clear();
    size_t log_bytes = 0;
    for (size_t i = 0; i < n; i++) {
      char buf[5];
      size_t kl =
          memtable::EncodeVarint32(buf, static_cast<uint32_t>(keys[i].size())) -
          buf;
      rep.append(buf, kl).append(keys[i]);
      size_t vl = memtable::EncodeVarint32(
                      buf, static_cast<uint32_t>(values[i].size())) -
                  buf;
      rep.append(buf, vl).append(values[i]);
      log_bytes +=
          pmem::NvmNode::AllocSize(kl + keys[i].size() + values[i].size());
    }
    WriteThread::Writer w;
    w.bytes = log_bytes;
    w.count = static_cast<uint32_t>(n);
    w.batch = &rep;
    Status status;
    uint32_t state = write_thread_.JoinBatchGroup(&w);
    if (state == WriteThread::kGroupLeader) {
      WriteThread::WriteGroup wal_group;
      write_thread_.EnterAsBatchGroupLeader(&w, &wal_group);
      status = WriteGroupToLog(&wal_group);
      // (an error would have to be handed to every writer of the group; the
      // benchmark stops at the first error anyway)
      write_thread_.ExitAsBatchGroupLeader(&wal_group);
      state = w.state.load(std::memory_order_acquire);
    }
    WriteThread::WriteGroup mem_group;
    if (state == WriteThread::kMemtableWriterLeader) {
      write_thread_.EnterAsMemTableWriter(&w, &mem_group);
      if (mem_group.size > 1) {
        write_thread_.LaunchParallelMemTableWriters(&mem_group);
        state = w.state.load(std::memory_order_acquire);
      } else {
        InsertIntoIndex(&w, &status);
        Publish(mem_group.last_sequence);
        write_thread_.ExitAsMemTableWriter(&mem_group);
        state = WriteThread::kCompleted;
      }
    }
    if (state == WriteThread::kParallelMemtableWriter) {
      InsertIntoIndex(&w, &status);
      if (write_thread_.CompleteParallelMemTableWriter(&w)) {
        Publish(w.write_group->last_sequence);
        write_thread_.ExitAsMemTableWriter(w.write_group);
      }
    }
    if (!log_status_ok_.load(std::memory_order_acquire)) {
      return Status::IOError("PMEM log is full");
    }
    return status;
  }

  // Newest published sequence number: entries up to it are visible.
  uint64_t LastSequence() const {
    return last_sequence_.load(std::memory_order_acquire);
  }
  const ConcurrentIndex& index() const { return index_; }

  // Recovery's scan of one log chunk [begin, begin + len): calls fn(record)
  // for each record up to the first that fails its checksum (PR2).
  template <class Fn>
  static void ScanChunk(const pmem::Region& region, uint64_t list_id,
                        uint64_t begin, uint64_t len, Fn fn) {
    const uint64_t end = begin + len;
    for (uint64_t off = begin; off + sizeof(pmem::NvmNode) <= end;) {
      const auto* r = region.FromOffset<pmem::NvmNode>(off);
      const uint64_t n = pmem::NvmNode::AllocSize(r->data_size);
      if (!r->HeaderValid() || r->key_size == 0 || n > end - off ||
          r->version != Checksum(list_id, off, r)) {
        return;
      }
      fn(r);
      off += n;
    }
  }

 private:
  // Leader only (one at a time): the group's records into the log, PR1.
  Status WriteGroupToLog(WriteThread::WriteGroup* group) {
    size_t total = 0;
    uint64_t seq = next_sequence_;
    group->ForEach([&](WriteThread::Writer* w) {
      w->sequence = seq;
      seq += w->count;
      total += w->bytes;
    });
    next_sequence_ = seq;
    char* p = nullptr;
    Status s = log_.Reserve(total, &p);
    if (!s.ok()) {
      log_status_ok_.store(false, std::memory_order_release);
      return s;
    }
    char* const begin = p;
    pmem::Region* region = log_.region();
    group->ForEach([&](WriteThread::Writer* w) {
      w->log_pos = p;
      const std::string& rep = *static_cast<const std::string*>(w->batch);
      const char* q = rep.data();
      const char* const end = q + rep.size();
      uint64_t s2 = w->sequence;
      while (q < end) {
        uint32_t kl = 0, vl = 0;
        const char* k = memtable::DecodeVarint32(q, end, &kl);
        const char* v = memtable::DecodeVarint32(k + kl, end, &vl);
        auto* r = reinterpret_cast<pmem::NvmNode*>(p);
        const uint32_t klen = static_cast<uint32_t>(k + kl - q);
        r->next = s2++;
        r->data_size = klen + vl;
        r->key_size = klen;
        r->flags = 0;
        r->check = pmem::NvmNode::HeaderCheck(r->data_size, klen, 0);
        std::memcpy(r->data(), q, klen);  // the length-prefixed key
        std::memcpy(r->data() + klen, v, vl);
        r->version = Checksum(log_.list_id(), region->ToOffset(r), r);
        p += pmem::NvmNode::AllocSize(r->data_size);
        q = v + vl;
      }
    });
    P::Flush(begin, static_cast<size_t>(p - begin));
    P::Fence();  // PR1: the group is durable before any of it is acked
    return Status::OK();
  }

  // Each writer's own records into the DRAM index (key-value separation:
  // the index node points to the record holding the value).
  void InsertIntoIndex(WriteThread::Writer* w, Status* status) {
    if (!w->log_pos) return;  // the log write failed
    char* p = w->log_pos;
    for (uint32_t i = 0; i < w->count; i++) {
      auto* r = reinterpret_cast<pmem::NvmNode*>(p);
      IndexNode* in = memtable::NewIndexNode(
          r, r->data(), r->key_size, memtable::RandomIndexHeight(), r->next);
      if (!in) {
        *status = Status::NoSpace("out of DRAM for the index");
        return;
      }
      index_.Insert(in);
      p += pmem::NvmNode::AllocSize(r->data_size);
    }
  }

  void Publish(uint64_t seq) {
    last_sequence_.store(seq, std::memory_order_release);
  }

  PmemLog log_;
  ConcurrentIndex index_;
  WriteThread write_thread_;
  uint64_t next_sequence_ = 1;  // WAL leader only
  std::atomic<uint64_t> last_sequence_{0};
  std::atomic<bool> log_status_ok_{true};
};

}  // namespace baselines
}  // namespace flintkv

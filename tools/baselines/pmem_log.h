// PmemLog: the append-only PMEM log of the benchmark baselines, in chunks
// of a FlintKV region (a Pool, or the simulated domain in tests), so that all
// implementations draw PMEM from the same pool and chunk allocator.
//
// Reserve is ListDB's PmemLog::Block::Allocate: one fetch_add on the current
// chunk's tail (lock-free); a reservation that runs past the chunk's end is
// abandoned (its bytes stay zero) and the caller retries after the chunk is
// replaced under a mutex (ListDB's block_init_mu_). Reservations are 16-byte
// aligned (pmem::kNodeAlign), as FlintKV's nodes are.
//
// Records use FlintKV's node layout (pmem::NvmNode: 32-byte header, then the
// length-prefixed key and the value); what `next` and `version` hold is up
// to each baseline (listdb_sync.h, pmem_rocksdb.h).
//
// Thread safety: Reserve may be called concurrently.
// Persistence: chunks are created atomically naming their owner list (P8,
// Region::NewChunk) and start zeroed; the log itself flushes nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "flintkv/status.h"
#include "pmem/layout.h"
#include "pmem/region.h"

namespace flintkv {
namespace baselines {

class PmemLog {
 public:
  // Chunks are the region's chunk size (larger for a larger reservation).
  PmemLog(pmem::Region* region, uint64_t list_id)
      : region_(region), list_id_(list_id) {}
  PmemLog(const PmemLog&) = delete;
  PmemLog& operator=(const PmemLog&) = delete;

  // [*out, *out + n) of fresh log space (n a multiple of kNodeAlign).
  Status Reserve(size_t n, char** out) {
    while (true) {
      Block* b = current_.load(std::memory_order_acquire);
      if (b) {
        size_t before = b->used.fetch_add(n, std::memory_order_relaxed);
        if (before + n <= b->len) {
          *out = b->base + before;
          return Status::OK();
        }
      }
      Status s = NextBlock(b, n);
      if (!s.ok()) return s;
    }
  }

  uint64_t list_id() const { return list_id_; }
  pmem::Region* region() const { return region_; }

 private:
  struct Block {
    char* base;
    size_t len;
    std::atomic<size_t> used{0};
  };

  // Replaces `full` (the block the caller saw) by a fresh chunk unless
  // another thread already did.
  Status NextBlock(Block* full, size_t need) {
    std::lock_guard<std::mutex> g(mu_);
    if (current_.load(std::memory_order_relaxed) != full) return Status::OK();
    char* begin = nullptr;
    size_t len = 0;
    Status s = region_->NewChunk(list_id_, need, pmem::ChunkFit::kAtLeast,
                                 false, &begin, &len);
    if (!s.ok()) return s;
    auto b = std::make_unique<Block>();
    b->base = begin;
    b->len = len;
    current_.store(b.get(), std::memory_order_release);
    blocks_.push_back(std::move(b));
    return Status::OK();
  }

  pmem::Region* const region_;
  const uint64_t list_id_;
  std::atomic<Block*> current_{nullptr};
  std::mutex mu_;                               // chunk switch
  std::vector<std::unique_ptr<Block>> blocks_;  // under mu_
};

// A 64-bit mix of the words given: validity marks and record checksums.
inline uint64_t Mix64(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h;
}

// Checksum of n bytes (RocksDB checksums each WAL record with CRC32C; this
// plays its part at a similar cost).
inline uint64_t HashBytes(uint64_t h, const char* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, p + i, 8);
    h = Mix64(h, w);
  }
  uint64_t tail = n;
  for (; i < n; i++) tail = (tail << 8) | static_cast<unsigned char>(p[i]);
  return Mix64(h, tail);
}

}  // namespace baselines
}  // namespace flintkv

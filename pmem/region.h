// Region: the persistent address space a durable skiplist lives in, and the
// source of the chunks its node arena carves nodes from.
//
// Implemented by Pool (a libpmemobj pool file) and by the simulated
// persistence domain in tests. Offsets are relative to base(); 0 is null.
// Thread safety: NewChunk may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flintkv/status.h"

namespace flintkv {
namespace pmem {

// How NewChunk sizes a chunk.
enum class ChunkFit {
  kAtLeast,  // max(the region's chunk size, min_len)
  kExact,    // min_len, rounded up only to what the region would allocate
             // anyway (a Pool: a normal chunk, or whole 256 KiB units)
};

struct ChunkInfo {
  uint64_t offset;  // of the first usable byte (after ChunkHeader)
  uint64_t len;     // usable bytes
};

class Region {
 public:
  virtual ~Region() = default;
  char* base() const { return base_; }
  uint64_t size() const { return size_; }

  // Returns [*begin, *begin + *len) of fresh persistent memory owned by
  // list_id, *len >= min_len, sized per fit. NoSpace when the region is
  // full; use_reserve lets the caller dip into space held back for
  // in-flight writes.
  virtual Status NewChunk(uint64_t list_id, size_t min_len, ChunkFit fit,
                          bool use_reserve, char** begin, size_t* len) = 0;

  // Chunks owned by list_id, sorted by offset (recovery of free space, P14).
  virtual std::vector<ChunkInfo> ChunksOf(uint64_t list_id) const = 0;

  uint64_t ToOffset(const void* p) const {
    return p ? static_cast<uint64_t>(static_cast<const char*>(p) - base_) : 0;
  }
  template <class T>
  T* FromOffset(uint64_t off) const {
    return off ? reinterpret_cast<T*>(base_ + off) : nullptr;
  }
  // True if [off, off+len) lies inside the region (overflow-safe).
  bool InBounds(uint64_t off, uint64_t len) const {
    return off <= size_ && len <= size_ - off;
  }

 protected:
  char* base_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace pmem
}  // namespace flintkv

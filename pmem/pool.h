// Pool: a FlintKV pool file (libpmemobj) on fsdax PMEM or emulated PMEM.
//
// Thread safety: all methods are thread-safe (libpmemobj allocation is).
// Persistence: list creation, chunk allocation and list retirement are
// crash-consistent through libpmemobj's atomic allocation API: an object
// is fully initialised (constructor) before it becomes enumerable, so a
// crash leaves either no chunk or a chunk that names its owner list.
// Invariants: P7 — Open() verifies the pmemobj header (layout), PoolRoot
// magic/format and every ListRoot/ChunkHeader, and returns Corruption or
// InvalidArgument with the path and reason instead of crashing.
#pragma once

#include <libpmemobj.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flintkv/options.h"
#include "flintkv/status.h"
#include "pmem/layout.h"
#include "pmem/region.h"

namespace flintkv {
namespace pmem {

class Pool : public Region {
 public:
  // Creates (if allowed and missing) or opens the pool at options.path.
  static Status Open(const PoolOptions& options, std::unique_ptr<Pool>* out);
  ~Pool() override;

  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  const std::string& path() const { return path_; }
  bool is_pmem() const { return is_pmem_; }
  uint64_t chunk_size() const { return chunk_size_; }

  // Creates an empty list (head.next = 0, versions 0, batch_mode 0) whose
  // user area starts with user[0, user_len) (atomically: the list is never
  // enumerable without it).
  Status CreateList(ListKind kind, ListRoot** out, const void* user = nullptr,
                    size_t user_len = 0);
  // All lists in the pool, in list_id order.
  std::vector<ListRoot*> Lists() const;
  // Chunks owned by list_id, sorted by offset.
  std::vector<ChunkInfo> ChunksOf(uint64_t list_id) const override;
  // Persists a state transition of the list (P6: Retired is durable before
  // any space is freed).
  void SetListState(ListRoot* list, ListState state);
  // Marks the list retired, then frees its chunks and the list itself.
  // Idempotent across crashes: a retired list found on open is freed again.
  void DropList(ListRoot* list);
  // Bytes of pool space held by chunks and lists.
  uint64_t BytesInUse() const;
  // Lists retired (flushed) but not yet dropped: space on its way back.
  size_t RetiredLists() const;
  // Pool bytes that no object holds, less libpmemobj's own metadata (its
  // lanes and heap headers: 3.75 MiB at every pool size below one heap zone
  // with PMDK 1.12, measured; counted as 4 MiB): what all new chunks
  // together could take at most. Unlike ApproxFreeBytes (which counts 1/16
  // of the pool as metadata) an upper bound for small pools too. O(objects).
  uint64_t UnheldBytes() const;
  // Pool bytes (libpmemobj object size) of the chunk NewChunk(min_len,
  // kExact) allocates: whole 256 KiB units for a large request.
  uint64_t ExactChunkBytes(size_t min_len) const;
  // Whether NewChunk(list, min_len, kExact, use_reserve=true) would find
  // its block now: libpmemobj reserves one (in DRAM only, nothing is
  // persisted) and the reservation is cancelled. Free bytes do not tell:
  // a chunk is one contiguous block, and libpmemobj's metadata is 3.75 MiB
  // at every pool size, not a share of it.
  bool HasRoomForChunk(size_t min_len);
  // Bytes of the chunks that lists other than list_id own: what dropping
  // every other list could free.
  uint64_t ChunkBytesOutside(uint64_t list_id) const;
  // Pool bytes not yet handed out as chunks or lists (cheap estimate).
  uint64_t ApproxFreeBytes() const {
    uint64_t used = used_bytes_.load(std::memory_order_relaxed);
    return used >= size_ ? 0 : size_ - used;
  }
  // Bytes NewChunk keeps back for writers already past a full check: normal
  // allocations fail with NoSpace once less than this is free, so the
  // RocksDB adapter can switch memtables while in-flight writes still fit.
  void set_reserve_bytes(uint64_t n) { reserve_bytes_ = n; }
  uint64_t reserve_bytes() const { return reserve_bytes_; }

  Status NewChunk(uint64_t list_id, size_t min_len, ChunkFit fit,
                  bool use_reserve, char** begin, size_t* len) override;

  // PoolRoot::user words: kPoolRootUserWords 8-byte words of the root line
  // owned by the pool's user (the RocksDB adapter's sequence watermark, see
  // docs/nvm_layout.md). Zero in a new pool; persist what you write.
  uint64_t* root_user_words() const { return root_->user; }
  // libpmemobj's pool id (the low half of its UUID, made at creation): the
  // same for a byte copy of the pool file, different for any other pool.
  uint64_t pool_uuid_lo() const;
  // What Open repaired, one line each (a list state word with one flipped
  // bit, corrected): `flintkv_tool verify` reports these.
  const std::vector<std::string>& open_repairs() const { return repairs_; }
  // Marks a format-1 pool as the current format (persisted, logged) before
  // the caller writes its first checked word (a DB open does: it creates
  // lists; flintkv_tool inspect and verify never do).
  void UseCurrentFormat();

 private:
  Pool() = default;
  Status Init(const PoolOptions& options);
  Status CheckObjects();
  uint64_t ChunkUsable(size_t min_len, ChunkFit fit) const;
  // Calls f(object, oid) for each object of pmemobj type `type` (a T:
  // ListRoot or ChunkHeader), under EnumMutex.
  template <class T, class F>
  void ForEachOf(uint64_t type, F&& f) const;
  void UseSharedArena();  // under EnumMutex, before every allocation
  void Log(const std::string& msg) const;

  PMEMobjpool* pop_ = nullptr;
  PoolRoot* root_ = nullptr;
  std::string path_;
  // A pool being created lives at this temporary name until its root is
  // durable; PublishCreated links it to path_ (P8b).
  std::string creating_;
  Status PublishCreated();
  uint64_t chunk_size_ = 0;
  bool is_pmem_ = false;
  bool per_thread_arenas_ = true;  // libpmemobj's assignment at open
  bool arena_warned_ = false;      // under EnumMutex
  uint64_t reserve_bytes_ = 0;
  std::atomic<uint64_t> used_bytes_{0};
  std::vector<std::string> repairs_;  // written by Open only
  std::mutex format_mu_;
  std::atomic<bool> current_format_{false};
  std::function<void(const std::string&)> info_log_;
};

// fsyncs directory `dir`, so that the names created in it (a new pool, a
// WAL file) survive a power failure.
Status SyncDirectory(const std::string& dir);

}  // namespace pmem
}  // namespace flintkv

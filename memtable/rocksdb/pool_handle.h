// PoolHandle: one open pool shared by every factory (and memtable) in the
// process that names the same pool_dir; libpmemobj allows one open per
// file. Thread safety: Get() and all members are thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "flintkv/status.h"
#include "pmem/pool.h"

namespace flintkv {
namespace rocks {

class PoolHandle {
 public:
  // Opens pool_dir/flintkv.pool (creating dir and pool if missing), or
  // returns the handle already open in this process.
  static Status Get(const std::string& pool_dir, uint64_t pool_size,
                    uint64_t chunk_size, std::shared_ptr<PoolHandle>* out);
  static std::string PoolPath(const std::string& pool_dir) {
    return pool_dir + "/flintkv.pool";
  }

  pmem::Pool* pool() const { return pool_.get(); }
  // Largest write_buffer_size seen in any column family using this pool;
  // the memtable reports at least this much usage under pool pressure.
  std::atomic<uint64_t> write_buffer_size_hint{64ull << 20};

  // Memtable lists that already held entries when this process opened the
  // pool: unflushed memtables of an earlier run (a crash, or a close with
  // avoid_flush_during_shutdown). Sorted by list_id. Lists this process
  // creates are never in here.
  const std::vector<uint64_t>& leftover_lists() const { return leftovers_; }
  // kPending: leftovers exist and nobody has taken charge of them; the
  // factory then refuses DB::Open (P6: new writes would reuse the lost
  // sequence numbers and a later replay would resurrect older values).
  // flintkv recovery sets kClaimed before it opens the DB, kDone after.
  enum LeftoverState : int { kNone = 0, kPending, kClaimed, kDone };
  std::atomic<int> leftover_state{kNone};
  // Set by flintkv::OpenDB before it opens a DB on this pool: the wrapper
  // publishes the watermark and recovers leftovers at every open, so a
  // memtable destroyed unflushed (avoid_flush_during_shutdown) stays in the
  // pool. Plain factory use drops such lists (see FlintRep::~FlintRep).
  std::atomic<bool> wrapper_owned{false};

  // Lists backing a live memtable (FlintRep) of this process.
  void AddLive(uint64_t list_id);
  void RemoveLive(uint64_t list_id);
  // Retakes the leftover snapshot: memtable lists holding entries that no
  // live memtable of this process owns. Used by recovery when the handle
  // outlived an earlier DB of this process (its snapshot is then stale:
  // lists kept unflushed by that DB's Close are leftovers now).
  void RescanLeftovers();

 private:
  std::mutex live_mu_;
  std::set<uint64_t> live_;
  std::vector<uint64_t> leftovers_;
  std::unique_ptr<pmem::Pool> pool_;
};

}  // namespace rocks
}  // namespace flintkv

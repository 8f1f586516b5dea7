// PoolHandle: one open pool shared by every factory (and memtable) in the
// process that names the same pool_dir; libpmemobj allows one open per
// file. Thread safety: Get() and all members are thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>

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

 private:
  std::unique_ptr<pmem::Pool> pool_;
};

}  // namespace rocks
}  // namespace flintkv

#include "memtable/rocksdb/pool_handle.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "memtable/rocksdb/watermark.h"

namespace flintkv {
namespace rocks {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::weak_ptr<PoolHandle>>& Registry() {
  static auto* r = new std::map<std::string, std::weak_ptr<PoolHandle>>();
  return *r;
}

Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = dir.find('/', pos + 1);
    std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IOError("cannot create " + part + ": " +
                             std::strerror(errno));
    }
  }
  return Status::OK();
}

}  // namespace

Status PoolHandle::Get(const std::string& pool_dir, uint64_t pool_size,
                       uint64_t chunk_size, std::shared_ptr<PoolHandle>* out) {
  if (pool_dir.empty()) {
    return Status::InvalidArgument("flintkv: pool_dir is not set");
  }
  std::string path = PoolPath(pool_dir);
  std::lock_guard<std::mutex> g(RegistryMutex());
  if (auto h = Registry()[path].lock()) {
    *out = h;
    return Status::OK();
  }
  Status s = MakeDirs(pool_dir);
  if (!s.ok()) return s;
  PoolOptions po;
  po.path = path;
  po.size = pool_size;
  po.chunk_size = chunk_size;
  auto h = std::make_shared<PoolHandle>();
  s = pmem::Pool::Open(po, &h->pool_);
  if (!s.ok()) return s;
  // Hold back ~3% (at least 8 chunks) for writes already past the full
  // check while RocksDB switches memtables.
  h->pool_->set_reserve_bytes(
      std::max<uint64_t>(h->pool_->size() / 32, 8 * chunk_size));
  for (pmem::ListRoot* l : h->pool_->Lists()) {
    if (l->kind == pmem::kListMemtable && l->head.next != 0) {
      h->leftovers_.push_back(l->list_id);
    }
  }
  if (!h->leftovers_.empty()) {
    h->leftover_state = kPending;
  } else {
    // No leftover memtable holds an entry, so a watermark left enabled by a
    // wrapper that crashed with empty memtables filters nothing that exists;
    // a plain-factory run that follows never publishes it, and recovery
    // would drop that run's writes as "above W" (issue 8b). An unfinished
    // recovery epoch (R set) is finished the same way: nothing is left.
    Watermark wm(h->pool_.get());
    if (wm.reset_pending()) wm.FinishReset();
    if (wm.enabled()) wm.Disable();
  }
  Registry()[path] = h;
  *out = h;
  return Status::OK();
}

void PoolHandle::AddLive(uint64_t list_id) {
  std::lock_guard<std::mutex> g(live_mu_);
  live_.insert(list_id);
}

void PoolHandle::RemoveLive(uint64_t list_id) {
  std::lock_guard<std::mutex> g(live_mu_);
  live_.erase(list_id);
}

void PoolHandle::RescanLeftovers() {
  std::lock_guard<std::mutex> g(live_mu_);
  leftovers_.clear();
  for (pmem::ListRoot* l : pool_->Lists()) {
    if (l->kind == pmem::kListMemtable && l->head.next != 0 &&
        !live_.count(l->list_id)) {
      leftovers_.push_back(l->list_id);
    }
  }
}

}  // namespace rocks
}  // namespace flintkv

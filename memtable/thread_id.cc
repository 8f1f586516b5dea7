#include "memtable/thread_id.h"

#include <mutex>
#include <vector>

namespace flintkv {
namespace memtable {
namespace {

// Never destroyed: threads that outlive static destruction (RocksDB joins
// its background threads from its own static destructors, after ours) still
// return their ids through these at exit.
std::mutex& Mu() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::vector<int>& FreeIds() {
  static auto* ids = new std::vector<int>();
  return *ids;
}

}  // namespace

// Returns the id when its thread exits. thread_locals constructed before it
// are destroyed after it and may still write (RocksDB does): the thread is
// marked exited first, so they take the overflow path instead of sharing
// the id with the thread that gets it next.
struct ThreadIdReleaser {
  int id = -1;
  ~ThreadIdReleaser() {
    ThreadId::tls_id_ = ThreadId::kExited;
    if (id < 0) return;
    std::lock_guard<std::mutex> g(Mu());
    FreeIds().push_back(id);
    ThreadId::free_count_.fetch_add(1, std::memory_order_relaxed);
  }
};

namespace {
thread_local ThreadIdReleaser tls_releaser;
}  // namespace

thread_local int ThreadId::tls_id_ = ThreadId::kNone;
std::atomic<int> ThreadId::high_water_{0};
std::atomic<int> ThreadId::free_count_{0};

int ThreadId::Acquire() {
  // Threads beyond the limit call this on every operation: skip the lock
  // while nothing is free (a stale answer only delays the next attempt).
  if (free_count_.load(std::memory_order_relaxed) == 0 &&
      high_water_.load(std::memory_order_relaxed) >= kMaxThreads) {
    return -1;
  }
  std::lock_guard<std::mutex> g(Mu());
  int id;
  if (!FreeIds().empty()) {
    // Lowest free id keeps the combiner's scan short.
    auto& ids = FreeIds();
    auto it = ids.begin();
    for (auto i = ids.begin(); i != ids.end(); ++i) {
      if (*i < *it) it = i;
    }
    id = *it;
    ids.erase(it);
    free_count_.fetch_sub(1, std::memory_order_relaxed);
  } else {
    id = high_water_.load(std::memory_order_relaxed);
    if (id >= kMaxThreads) return -1;
    high_water_.store(id + 1, std::memory_order_release);
  }
  tls_id_ = id;
  tls_releaser.id = id;
  return id;
}

}  // namespace memtable
}  // namespace flintkv

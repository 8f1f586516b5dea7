#include "memtable/thread_id.h"

#include <mutex>
#include <vector>

namespace flintkv {
namespace memtable {
namespace {

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
std::vector<int>& FreeIds() {
  static std::vector<int> ids;
  return ids;
}

// Returns the id when its thread exits.
struct Releaser {
  int id = -1;
  ~Releaser() {
    if (id < 0) return;
    std::lock_guard<std::mutex> g(Mu());
    FreeIds().push_back(id);
  }
};
thread_local Releaser tls_releaser;

}  // namespace

thread_local int ThreadId::tls_id_ = -1;
std::atomic<int> ThreadId::high_water_{0};

int ThreadId::Acquire() {
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

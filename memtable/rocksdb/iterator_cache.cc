#include "memtable/rocksdb/iterator_cache.h"

#include <new>
#include <vector>

namespace flintkv {
namespace rocks {
namespace {

constexpr size_t kMaxCached = 64;

struct Cache {
  std::vector<void*> free;    // reusable now
  std::vector<void*> parked;  // released by a destructor still on the stack
  void Settle() {
    // Every parked block's destructor has returned by the time this thread
    // calls back into the cache.
    for (void* b : parked) {
      if (free.size() < kMaxCached) {
        free.push_back(b);
      } else {
        ::operator delete(b, std::align_val_t(16));
      }
    }
    parked.clear();
  }
  ~Cache() {
    Settle();
    for (void* b : free) ::operator delete(b, std::align_val_t(16));
  }
};

thread_local Cache cache;

}  // namespace

void* AcquireIteratorBlock() {
  cache.Settle();
  if (!cache.free.empty()) {
    void* b = cache.free.back();
    cache.free.pop_back();
    return b;
  }
  return ::operator new(kIteratorBlockSize, std::align_val_t(16));
}

void ReleaseIteratorBlock(void* block) {
  // Settle first so that parked stays short even if this thread never
  // creates iterators (e.g. a thread that only destroys them).
  if (cache.parked.size() >= kMaxCached) cache.Settle();
  cache.parked.push_back(block);
}

}  // namespace rocks
}  // namespace flintkv

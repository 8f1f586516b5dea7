#include "memtable/rocksdb/iterator_cache.h"

#include <new>
#include <vector>

namespace flintkv {
namespace rocks {
namespace {

constexpr size_t kMaxCached = 64;

// Set when this thread's cache is destroyed: a memtable iterator can still be
// created or destroyed later in the thread's exit (RocksDB's pthread-key
// cleanups run after C++ thread_local destructors) and must not touch it.
thread_local bool cache_gone = false;

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
    cache_gone = true;
    Settle();
    for (void* b : free) ::operator delete(b, std::align_val_t(16));
  }
};

thread_local Cache cache;

}  // namespace

void* AcquireIteratorBlock() {
  if (cache_gone) {
    return ::operator new(kIteratorBlockSize, std::align_val_t(16));
  }
  cache.Settle();
  if (!cache.free.empty()) {
    void* b = cache.free.back();
    cache.free.pop_back();
    return b;
  }
  return ::operator new(kIteratorBlockSize, std::align_val_t(16));
}

void ReleaseIteratorBlock(void* block) {
  // The destructor that calls this is still running on the block, so it
  // cannot be freed here; after the cache is gone the block is left alone
  // (at most one per iterator destroyed during this thread's exit).
  if (cache_gone) return;
  // Settle first so that parked stays short even if this thread never
  // creates iterators (e.g. a thread that only destroys them).
  if (cache.parked.size() >= kMaxCached) cache.Settle();
  cache.parked.push_back(block);
}

}  // namespace rocks
}  // namespace flintkv

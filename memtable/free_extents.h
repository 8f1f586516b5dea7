// FreeExtents: the reusable PMEM of one list's node arena (version GC).
//
// A best-fit set of free byte ranges inside the list's chunks, coalescing
// neighbours. Volatile by design: nothing about free space is ever written
// to PMEM. After a crash, recovery derives it afresh as "every chunk byte
// that no node reachable from the head occupies" (P14), so no crash can
// leave free-space metadata that disagrees with the list.
//
// Thread safety: all methods may be called concurrently (one mutex);
// Bytes() is a lock-free estimate so that an empty set costs callers one
// relaxed load.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace flintkv {
namespace memtable {

class FreeExtents {
 public:
  // [p, p + n) is free. It must not overlap a free or allocated range.
  void Add(char* p, size_t n);
  // Takes n bytes from the smallest free range that holds them (its front;
  // the rest stays free). False if none does.
  bool Take(size_t n, char** out);
  size_t Bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  void InsertLocked(char* p, size_t n);
  void EraseLocked(std::map<char*, size_t>::iterator it);

  std::mutex mu_;
  std::map<char*, size_t> by_addr_;             // start -> length
  std::set<std::pair<size_t, char*>> by_size_;  // (length, start)
  std::atomic<size_t> bytes_{0};
};

}  // namespace memtable
}  // namespace flintkv

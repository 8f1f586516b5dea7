#include "memtable/free_extents.h"

namespace flintkv {
namespace memtable {

void FreeExtents::InsertLocked(char* p, size_t n) {
  by_addr_.emplace(p, n);
  by_size_.emplace(n, p);
}

void FreeExtents::EraseLocked(std::map<char*, size_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  by_addr_.erase(it);
}

void FreeExtents::Add(char* p, size_t n) {
  if (n == 0) return;
  std::lock_guard<std::mutex> g(mu_);
  bytes_.fetch_add(n, std::memory_order_relaxed);
  auto next = by_addr_.lower_bound(p);
  if (next != by_addr_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == p) {  // merge with the range before
      p = prev->first;
      n += prev->second;
      EraseLocked(prev);
    }
  }
  if (next != by_addr_.end() && p + n == next->first) {  // and after
    n += next->second;
    EraseLocked(next);
  }
  InsertLocked(p, n);
}

bool FreeExtents::Take(size_t n, char** out) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = by_size_.lower_bound({n, nullptr});
  if (it == by_size_.end()) return false;
  char* p = it->second;
  size_t len = it->first;
  by_size_.erase(it);
  by_addr_.erase(p);
  if (len > n) InsertLocked(p + n, len - n);
  bytes_.fetch_sub(n, std::memory_order_relaxed);
  *out = p;
  return true;
}

}  // namespace memtable
}  // namespace flintkv

#include "memtable/reclaim.h"

#include <algorithm>
#include <new>

namespace flintkv {
namespace memtable {

Reclaimer::Reclaimer(const std::atomic<uint64_t>* visible)
    : visible_(visible) {}

Reclaimer::~Reclaimer() = default;

Reclaimer::Slot* Reclaimer::SlotOf(int tid) { return pages_.Get(tid); }

template <class Fn>
void Reclaimer::ForEachSlot(Fn fn) const {
  pages_.ForEach(fn);
}

Reclaimer::Guard::Guard(Reclaimer* r, bool read) : r_(r) {
  int tid = ThreadId::Get();
  slot_ = tid >= 0 ? r->SlotOf(tid) : nullptr;
  if (!slot_) {  // no id: the pin path
    pin_ = r->AddPin(read ? kCurrent : kNoVersion, true, &version_);
    return;
  }
  // G1: announce, then check that no GC pass bumped the generation since
  // it was read; otherwise announce again with a fresh version.
  uint64_t g = r->gen_.load(std::memory_order_seq_cst);
  while (true) {
    version_ = read ? r->visible_->load(std::memory_order_acquire) : kNoVersion;
    // release: a GC that reads this version also sees the end of this
    // thread's previous operation (whose generation it may still read).
    slot_->version.store(version_, std::memory_order_release);
    slot_->gen.store(g, std::memory_order_seq_cst);
    uint64_t g2 = r->gen_.load(std::memory_order_seq_cst);
    if (g2 == g) break;
    g = g2;
  }
}

Reclaimer::Guard::~Guard() {
  if (slot_) {
    // release: every read of this operation happens before a GC that sees
    // the slot idle frees anything (G3).
    slot_->gen.store(0, std::memory_order_release);
  } else {
    r_->RemovePin(pin_);
  }
}

uint64_t Reclaimer::AddPin(uint64_t version, bool memory, uint64_t* pinned) {
  // Under the mutex that Horizon/MinActiveGeneration also take after their
  // bump: a pin added after their scan reads the bumped generation and a
  // version >= their bound.
  std::lock_guard<std::mutex> g(pins_mu_);
  if (version == kCurrent) {
    version = visible_->load(std::memory_order_seq_cst);
  }
  if (pinned) *pinned = version;
  uint64_t id = next_pin_++;
  pins_[id] = {memory ? gen_.load(std::memory_order_seq_cst) : 0, version};
  return id;
}

void Reclaimer::RemovePin(uint64_t id) {
  std::lock_guard<std::mutex> g(pins_mu_);
  pins_.erase(id);
}

uint64_t Reclaimer::Horizon(uint64_t bound) {
  gen_.fetch_add(1, std::memory_order_seq_cst);  // G1's other side
  uint64_t h = bound;
  // Slots first, then pins: a reader that pins and then leaves its slot is
  // seen in one or the other.
  ForEachSlot([&h](const Slot& s) {
    if (s.gen.load(std::memory_order_seq_cst) != 0) {
      h = std::min(h, s.version.load(std::memory_order_acquire));
    }
  });
  std::lock_guard<std::mutex> g(pins_mu_);
  for (const auto& kv : pins_) h = std::min(h, kv.second.version);
  return h;
}

void Reclaimer::Retire(std::vector<IndexNode*> nodes) {
  if (nodes.empty()) return;
  retired_count_ += nodes.size();
  // Tagged with the generation during which they were unlinked.
  retired_.push_back({gen_.load(std::memory_order_relaxed), std::move(nodes)});
}

uint64_t Reclaimer::MinActiveGeneration() {
  // G3: readers that enter from now on cannot reach what is retired.
  gen_.fetch_add(1, std::memory_order_seq_cst);
  uint64_t m = UINT64_MAX;
  ForEachSlot([&m](const Slot& s) {
    // seq_cst, as in Horizon: the other half of G1's store-then-load
    // handshake (a reader stores its slot's generation, then loads gen_).
    // With acquire here, the C++ model lets this load miss the reader's
    // store while the reader's load misses the bump above (a Dekker
    // pattern needs seq_cst on both sides; x86 would hide the difference,
    // ARM/POWER would not).
    uint64_t g = s.gen.load(std::memory_order_seq_cst);
    if (g != 0) m = std::min(m, g);
  });
  std::lock_guard<std::mutex> g(pins_mu_);
  for (const auto& kv : pins_) {
    if (kv.second.gen != 0) m = std::min(m, kv.second.gen);
  }
  return m;
}

}  // namespace memtable
}  // namespace flintkv

// Reclaimer: safe memory reclamation and the snapshot horizon for the
// version GC of the standalone store (docs/gc.md).
//
// Design: epoch-based reclamation with an unbounded epoch counter
// ("generation"), as MVCC engines do (Hekaton, RocksDB's SuperVersion
// pinning, Silo's epochs): readers pay one seq_cst store and two loads per
// operation, no per-node work (hazard pointers would need a fence per
// traversed node; reference counts would make every traversal write shared
// memory). Because a reader announces a generation rather than "the" epoch,
// one long-lived reader (an iterator) delays only the reuse of nodes
// unlinked after it started, never the unlinking itself.
//
// Every read also announces the version it reads at, in the same slot, so
// that the GC never unlinks a version a running read still needs (G1-G3,
// with their tests in docs/invariants.md):
//  - G1 an operation (Guard) publishes {generation g, version v} in its
//    thread's slot and re-reads the generation; it proceeds only when the
//    generation did not move, else it re-reads v and repeats. So either a
//    GC pass's slot scan sees it, or it read v after that pass's
//    generation bump, and then v >= the pass's visible bound.
//  - G2 the GC's horizon is min(visible version read before its bump,
//    every announced version, every pinned version) (Horizon()).
//  - G3 a node unlinked while the generation is g is freed only once no
//    slot or pin announces a generation <= g (Reclaim() bumps the
//    generation first so that new readers do not hold it back).
// Long-lived holders (iterators: memory + version; snapshots: version) and
// threads without a ThreadId take a Pin under a mutex instead of a slot.
//
// Thread safety: Guard and pins from any threads; Horizon/Retire/Reclaim
// by one GC thread at a time (the caller serialises them).
// Memory orderings: explicit below; the G1 handshake is seq_cst on both
// sides (store-then-load in a reader against store-then-load in the GC:
// the bump and the slot loads of Horizon and MinActiveGeneration alike).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "memtable/index_node.h"
#include "memtable/slot_pages.h"
#include "memtable/thread_id.h"

namespace flintkv {
namespace memtable {

class Reclaimer {
 public:
  static constexpr uint64_t kNoVersion = UINT64_MAX;    // holds no version
  static constexpr uint64_t kCurrent = UINT64_MAX - 1;  // pin: visible now

  // `visible` is the list's published version (read by readers).
  explicit Reclaimer(const std::atomic<uint64_t>* visible);
  ~Reclaimer();
  Reclaimer(const Reclaimer&) = delete;
  Reclaimer& operator=(const Reclaimer&) = delete;

  struct Slot;

  // One short operation of the calling thread. A reader (read == true)
  // reads at version(); a writer only needs the memory it traverses.
  class Guard {
   public:
    Guard(Reclaimer* r, bool read);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    uint64_t version() const { return version_; }

   private:
    Reclaimer* const r_;
    Slot* slot_;
    uint64_t pin_ = 0;
    uint64_t version_;
  };

  // A long-lived hold. version: a version to keep readable, kCurrent (the
  // visible version now; returned in *pinned), or kNoVersion. memory: also
  // keep every node the holder may reach from now on.
  uint64_t AddPin(uint64_t version, bool memory, uint64_t* pinned);
  void RemovePin(uint64_t id);

  // GC side. The newest version whose older versions no reader can see:
  // min(bound, announced versions, pinned versions) (G2). bound must have
  // been read before this call and be <= the visible version.
  uint64_t Horizon(uint64_t bound);
  // nodes were unlinked (and their unlink made durable) since Horizon().
  void Retire(std::vector<IndexNode*> nodes);
  // Calls free_fn(node) for every retired node no reader can hold (G3).
  // force: every retired node (the owner is shutting down, no readers).
  template <class F>
  size_t Reclaim(F free_fn, bool force = false);
  size_t RetiredCount() const { return retired_count_; }

 private:
  Slot* SlotOf(int tid);
  template <class Fn>
  void ForEachSlot(Fn fn) const;
  uint64_t MinActiveGeneration();

  const std::atomic<uint64_t>* const visible_;
  alignas(64) std::atomic<uint64_t> gen_{1};  // 0 marks an idle slot
  static constexpr int kSlotsPerPage = 32;
  SlotPages<Slot, kSlotsPerPage> pages_;
  struct PinEntry {
    uint64_t gen;  // 0: holds no memory
    uint64_t version;
  };
  std::mutex pins_mu_;
  std::map<uint64_t, PinEntry> pins_;  // id -> entry
  uint64_t next_pin_ = 1;
  struct Batch {
    uint64_t gen;
    std::vector<IndexNode*> nodes;
  };
  std::deque<Batch> retired_;  // GC thread only
  size_t retired_count_ = 0;
};

struct alignas(64) Reclaimer::Slot {
  std::atomic<uint64_t> gen{0};  // 0: idle
  std::atomic<uint64_t> version{kNoVersion};
};

template <class F>
size_t Reclaimer::Reclaim(F free_fn, bool force) {
  uint64_t min_gen = force ? UINT64_MAX : MinActiveGeneration();
  size_t n = 0;
  while (!retired_.empty() && retired_.front().gen < min_gen) {
    for (IndexNode* x : retired_.front().nodes) free_fn(x);
    n += retired_.front().nodes.size();
    retired_.pop_front();
  }
  retired_count_ -= n;
  return n;
}

}  // namespace memtable
}  // namespace flintkv

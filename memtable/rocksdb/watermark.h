// Watermark: the published-sequence commit point of flintkv::OpenDB's
// wrapper, kept in the pool root's user words (docs/nvm_layout.md):
//   user[0]  W      highest RocksDB sequence number whose Write returned
//   user[1]  kWatermarkEnabled while a wrapper owns the pool, else 0
//   user[2]  R + 1  recovery flushed everything up to sequence R and is
//                   dropping the replayed lists (0: no recovery under way)
// Thread safety: Publish is lock-free and may run from any thread; the
// other members run during open/recovery/close only.
// Persistence: every store is followed by CLWB/CLFLUSHOPT + SFENCE (P10).
#pragma once

#include <cstdint>

#include "pmem/persist.h"
#include "pmem/pool.h"

namespace flintkv {

constexpr uint64_t kWatermarkEnabled = 0x314b524d54544e46ull;  // "FNTTMRK1"

class Watermark {
 public:
  explicit Watermark(pmem::Pool* pool) : w_(pool->root_user_words()) {}

  bool enabled() const { return Load(1) == kWatermarkEnabled; }
  uint64_t published() const { return Load(0); }
  bool reset_pending() const { return Load(2) != 0; }

  // W = max(W, seq), durable on return. A thread that loses the race still
  // writes the line back: the value in it is >= seq.
  void Publish(uint64_t seq) {
    uint64_t cur = __atomic_load_n(&w_[0], __ATOMIC_RELAXED);
    while (cur < seq &&
           !__atomic_compare_exchange_n(&w_[0], &cur, seq, true,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
    pmem::PmemPersist::Persist(&w_[0], sizeof(uint64_t));  // P10
  }
  void SetPublished(uint64_t seq) { Store(0, seq); }
  void Enable() { Store(1, kWatermarkEnabled); }
  void Disable() { Store(1, 0); }

  // Recovery: everything replayed is flushed and LastSequence is seq. Until
  // FinishReset, a restart drops leftover lists without replaying them.
  void BeginReset(uint64_t seq) { Store(2, seq + 1); }
  // R (valid while reset_pending()).
  uint64_t reset_seq() const { return Load(2) - 1; }
  // Forgets a reset record that cannot be this DB's (see RecoverInto).
  void CancelReset() { Store(2, 0); }
  void FinishReset() {
    uint64_t r = Load(2);
    if (r != 0) Store(0, r - 1);  // the new epoch starts at LastSequence
    Store(2, 0);
  }

 private:
  uint64_t Load(int i) const {
    return __atomic_load_n(&w_[i], __ATOMIC_ACQUIRE);
  }
  void Store(int i, uint64_t v) {
    __atomic_store_n(&w_[i], v, __ATOMIC_RELEASE);
    // P10 (user[0]) / P6 (user[2], the recovery epoch): durable on return.
    pmem::PmemPersist::Persist(&w_[i], sizeof(uint64_t));
  }
  uint64_t* w_;
};

}  // namespace flintkv

// Watermark: the record of published sequence numbers and of an unfinished
// recovery, kept in the pool root's user words (part of the pool format,
// docs/nvm_layout.md):
//   user[0]  W      highest RocksDB sequence number whose Write returned
//   user[1]  kWatermarkEnabled while the pool's DB publishes W, else 0
//   user[2]  R + 1  recovery flushed everything up to sequence R and is
//                   dropping the replayed lists (0: no recovery under way)
//   user[3]  kRootWordsChecked once W and R + 1 are written as checked
//            sequence words (below), else 0 (pools of older FlintKV)
// A checked sequence word holds the value (< 2^56, as every RocksDB
// sequence number) in bits 0-55 and bit 63 set over 7 parity bits of the
// value in bits 56-62, so every one-bit flip is found: one flipped bit in
// W or R made recovery drop acknowledged writes or every list, silently
// (BitRotTest.FlippedRootWordsAreRefused). 0 stays 0 ("none").
// Thread safety: Publish is lock-free and may run from any thread; the
// other members run during open/recovery/close only.
// Persistence: every store is followed by CLWB/CLFLUSHOPT + SFENCE (P10).
#pragma once

#include <cstdint>
#include <string>

#include "flintkv/status.h"
#include "pmem/persist.h"
#include "pmem/pool.h"

namespace flintkv {

constexpr uint64_t kWatermarkEnabled = 0x314b524d54544e46ull;  // "FNTTMRK1"
constexpr uint64_t kRootWordsChecked = 0x314b434857544e46ull;  // "FNTWCHK1"

// Parity of the value bits i with i % 7 == k, as bit k: one flipped value
// bit flips exactly one of them.
inline uint64_t SeqWordParity(uint64_t v) {
  uint64_t p = 0;
  for (int i = 0; i < 56; i++) p ^= ((v >> i) & 1) << (i % 7);
  return p;
}
inline uint64_t EncodeSeqWord(uint64_t v) {
  v &= (uint64_t{1} << 56) - 1;
  return v == 0 ? 0 : v | (0x80 | SeqWordParity(v)) << 56;
}

class Watermark {
 public:
  explicit Watermark(pmem::Pool* pool)
      : pool_(pool), w_(pool->root_user_words()) {}

  // Whether the words pass their checks: the watermark (W, its switch and
  // the checked-words mark) and the recovery record (R + 1 and the mark).
  // Read nothing else of a word that fails.
  // A W nobody reads (the switch off: after a clean close) is not checked;
  // it is rewritten before the switch is turned on again (Enable).
  bool watermark_intact() const {
    uint64_t v;
    return MarkIntact() && (Load(1) == 0 || (Load(1) == kWatermarkEnabled &&
                                             Decode(Load(0), &v)));
  }
  bool record_intact() const {
    uint64_t v;
    return MarkIntact() && Decode(Load(2), &v);
  }
  // OK, or Corruption naming what fails its check (for verify).
  Status Check() const {
    if (!watermark_intact()) return Damaged("published watermark (W)");
    if (!record_intact()) return Damaged("recovery record (R)");
    return Status::OK();
  }

  bool enabled() const { return Load(1) == kWatermarkEnabled; }
  uint64_t published() const { return Value(0); }
  bool reset_pending() const { return Value(2) != 0; }

  // W = max(W, seq), durable on return. A thread that loses the race still
  // writes the line back: the value in it is >= seq.
  void Publish(uint64_t seq) {
    MarkChecked();
    uint64_t cur = __atomic_load_n(&w_[0], __ATOMIC_RELAXED);
    uint64_t v = 0;
    while ((!Decode(cur, &v) || v < seq) &&
           !__atomic_compare_exchange_n(&w_[0], &cur, EncodeSeqWord(seq), true,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
    pmem::PmemPersist::Persist(&w_[0], sizeof(uint64_t));  // P10
  }
  void SetPublished(uint64_t seq) { StoreSeq(0, seq); }
  // From now on W and R + 1 are checked (every DB open: then a flipped bit
  // in R is found also in pools never switched on). P8a: bare words are
  // rewritten checked before the mark is written (a crash between leaves
  // checked words, which decode either way), and the pool is marked as the
  // current format first.
  void MarkChecked() {
    if (__atomic_load_n(&w_[3], __ATOMIC_ACQUIRE) == kRootWordsChecked) return;
    pool_->UseCurrentFormat();
    for (int i : {0, 2}) {
      uint64_t raw = Load(i);
      // A CAS: a concurrent Publish may have written a newer checked W.
      if (raw >> 56 == 0 && raw != 0 &&
          __atomic_compare_exchange_n(&w_[i], &raw, EncodeSeqWord(raw), false,
                                      __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
        pmem::PmemPersist::Persist(&w_[i], sizeof(uint64_t));
      }
    }
    __atomic_store_n(&w_[3], kRootWordsChecked, __ATOMIC_RELEASE);
    pmem::PmemPersist::Persist(&w_[3], sizeof(uint64_t));
  }
  // Turns the switch on; W must be written first (SetPublished).
  void Enable() { Store(1, kWatermarkEnabled); }
  void Disable() { Store(1, 0); }

  // Recovery: everything replayed is flushed and LastSequence is seq. Until
  // FinishReset, a restart drops leftover lists without replaying them.
  void BeginReset(uint64_t seq) { StoreSeq(2, seq + 1); }
  // R (valid while reset_pending()).
  uint64_t reset_seq() const { return Value(2) - 1; }
  // Forgets a reset record without finishing it (damaged, or not this DB's:
  // R above its last sequence).
  void CancelReset() { Store(2, 0); }
  void FinishReset() {
    uint64_t r = Value(2);
    if (r != 0) StoreSeq(0, r - 1);  // the new epoch starts at LastSequence
    Store(2, 0);
  }

 private:
  // A word written before kRootWordsChecked (bare, bits 56-63 zero) is
  // accepted only while the mark is unset.
  bool Decode(uint64_t raw, uint64_t* v) const {
    *v = raw & ((uint64_t{1} << 56) - 1);
    if (raw >> 56 == 0) return raw == 0 || !MarkSet();
    return raw == EncodeSeqWord(*v);
  }
  // The mark, read within three flipped bits of 0 or of kRootWordsChecked
  // (they differ in 32): one flipped bit of it must not make both words'
  // overrides necessary. MarkChecked rewrites a flipped mark.
  bool MarkSet() const {
    return __builtin_popcountll(Load(3) ^ kRootWordsChecked) <= 3;
  }
  bool MarkIntact() const {
    return MarkSet() || __builtin_popcountll(Load(3)) <= 3;
  }
  uint64_t Value(int i) const {
    uint64_t v;
    return Decode(Load(i), &v) ? v : 0;  // after Check(): always decodes
  }
  Status Damaged(const char* what) const {
    return Status::Corruption("flintkv: pool " + pool_->path() +
                              ": the pool root's " + what +
                              " fails its check (a flipped bit?)");
  }
  void StoreSeq(int i, uint64_t v) {
    MarkChecked();
    Store(i, EncodeSeqWord(v));
  }
  uint64_t Load(int i) const {
    return __atomic_load_n(&w_[i], __ATOMIC_ACQUIRE);
  }
  void Store(int i, uint64_t v) {
    __atomic_store_n(&w_[i], v, __ATOMIC_RELEASE);
    // P10 (user[0]) / P6 (user[2], the recovery epoch): durable on return.
    pmem::PmemPersist::Persist(&w_[i], sizeof(uint64_t));
  }
  pmem::Pool* pool_;
  uint64_t* w_;
};

}  // namespace flintkv

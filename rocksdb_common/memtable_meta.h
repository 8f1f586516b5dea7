// MemtableMeta: the record a RocksDB memtable's list keeps in its
// ListRoot::user area (part of the pool format, see docs/nvm_layout.md):
// the DB life and column family that wrote the list, and its recovery state.
#pragma once

#include <cstdint>

#include "pmem/layout.h"
#include "pmem/persist.h"

namespace flintkv {
namespace rocks {

constexpr uint64_t kMemtableMetaMagic = 0x314154454d544e46ull;  // "FNTMETA1"
// MemtableMeta::recovery_state: a recovery found this list's data missing
// from the SST files and will replay it.
constexpr uint32_t kReplayPending = 1;
// MemtableMeta::recovery_state of a memtable created with a live life's
// info Logger after its DB::Open finished, for a column family that life
// already has a mutable memtable of (S6): a read-only or secondary
// instance sharing the primary's Logger, or the primary's next memtable,
// which RocksDB creates just before it seals the current one on the same
// thread. The seal confirms it (state 0); until then it holds nothing of
// the primary's, and a list still in this state is never a leftover: it is
// dropped, never replayed.
constexpr uint32_t kOwnerPending = 2;
// MemtableMeta::recovery_state of a list whose column family its life
// dropped (S7), set before the drop's MANIFEST edit: recovery into a DB
// that still has that family refuses (the DB is older than the drop: a
// restored copy); into the DB that dropped it, the list is discarded with
// its family.
constexpr uint32_t kFamilyDropped = 3;
// MemtableMeta::incarnation of a read-only or secondary instance's
// memtable: WAL replay only, never recovered.
constexpr uint64_t kUnownedIncarnation = ~0ull;
// Interrupted recoveries of one list whose copies recovery can recognise.
constexpr int kMaxCopySpans = 4;

struct MemtableMeta {
  uint64_t magic;
  uint32_t column_family_id;
  // 0, kReplayPending, kOwnerPending or kFamilyDropped, as a
  // pmem::CheckedWord (salt kRecoveryStateSalt); bare in lists of pool
  // format 1.
  uint32_t recovery_state;
  uint64_t created_micros;  // creation time, microseconds since the epoch
  // P11: each recovery that replays this list gives its copies sequence
  // numbers in one span (first, last], stored as first + 1, last + 1 in the
  // next free pair; it persists first before writing the first copy and
  // last after the last one (0: not set; a set first with an unset last
  // means that recovery died while replaying the list, and the next one
  // closes the span at the sequence number it opens the DB with).
  uint64_t copy_spans[2 * kMaxCopySpans];
  // S3: the DB life that wrote the list, its family (the first life of an
  // unbroken chain of lives each of which recovered the one before) and a
  // hash of the DB's IDENTITY (0: unknown, the plain factory is never told
  // its DB). All 0 in lists written before these fields existed (they were
  // reserved, zero).
  uint64_t incarnation;
  uint64_t family;
  uint64_t db_id_hash;
  // A sequence number the DB's MANIFEST had reached before the list was
  // created or while it was live (a flush of the list's life installed an
  // SST file holding an entry this new, or the recovery that began the life
  // left the DB there): the DB that wrote the list has a last sequence at
  // least this large, and a copy of it taken before that point lacks writes
  // the list builds on (0: none known, or a list older than the field).
  uint64_t flushed_floor;
  // MetaCheck of the fields fixed at creation (magic, column family, time,
  // incarnation, family, DB identity hash); 0 in lists of pool format 1,
  // which are not checked. A flipped bit there would replay the list into
  // another column family, discard it as a dropped family's, or leave it
  // as another DB's.
  uint64_t check;
};
static_assert(sizeof(MemtableMeta) <= sizeof(pmem::ListRoot::user),
              "MemtableMeta must fit the user area");

constexpr uint32_t kRecoveryStateSalt = 0x59524345;  // "ECRY"

inline uint64_t MetaCheck(const MemtableMeta& m) {
  return pmem::FieldsCheck(
      0x46544e4d45544143ull,
      {m.magic, uint64_t{m.column_family_id}, m.created_micros, m.incarnation,
       m.family, m.db_id_hash});
}

// Completes a new list's meta: recovery mark clear (or kOwnerPending),
// check set.
inline void SealMeta(MemtableMeta* m, uint32_t state = 0) {
  m->recovery_state = pmem::CheckedWord(state, kRecoveryStateSalt);
  m->check = MetaCheck(*m);
}

// Writes the list's recovery word (0, kReplayPending, kOwnerPending or
// kFamilyDropped) and persists it: each caller's invariant needs it durable
// before the writes it orders (P11 for a recovery's mark, S6 for a
// confirmed successor, S7 for a dropped family).
inline void PersistRecoveryState(MemtableMeta* m, uint32_t state) {
  m->recovery_state = pmem::CheckedWord(state, kRecoveryStateSalt);
  pmem::PmemPersist::Persist(&m->recovery_state, sizeof(m->recovery_state));
}

// The recovery mark (corrected if one bit flipped), or false if it
// is damaged beyond correction.
inline bool DecodeRecoveryState(const MemtableMeta& m, uint32_t* state) {
  bool corrected;
  return pmem::DecodeCheckedWord(m.recovery_state, kRecoveryStateSalt, 0,
                                 kFamilyDropped, state, &corrected);
}

// "" if the meta is intact (or from pool format 1, unchecked), else what is
// damaged.
inline const char* MetaDamage(const MemtableMeta& m) {
  uint32_t state = 0;
  if (!DecodeRecoveryState(m, &state)) {
    return "its recovery mark fails its check";
  }
  if (m.check != 0 && m.check != MetaCheck(m)) {
    return "its column family, creation time or DB life fail their check";
  }
  return "";
}

// Whether the list's owner was never confirmed (kOwnerPending).
inline bool OwnerPending(const MemtableMeta& m) {
  uint32_t state = 0;
  return DecodeRecoveryState(m, &state) && state == kOwnerPending;
}
// Whether the list's life dropped its column family (kFamilyDropped).
inline bool FamilyDropped(const MemtableMeta& m) {
  uint32_t state = 0;
  return DecodeRecoveryState(m, &state) && state == kFamilyDropped;
}
// Whether a recovery marked the list (after MetaDamage found nothing).
inline bool ReplayPending(const MemtableMeta& m) {
  uint32_t state = 0;
  return DecodeRecoveryState(m, &state) && state == kReplayPending;
}

inline const MemtableMeta* MetaOf(const pmem::ListRoot* root) {
  return reinterpret_cast<const MemtableMeta*>(root->user);
}
inline MemtableMeta* MutableMetaOf(pmem::ListRoot* root) {
  return reinterpret_cast<MemtableMeta*>(root->user);
}

// "" if a memtable list's metadata is intact, else what is damaged. A
// memtable list never has a batch record or a durable cut (its entries are
// inserted one at a time, each durably), so a set one is a flipped bit:
// read as an unfinished batch, it made recovery drop every entry.
inline const char* MemtableListDamage(const pmem::ListRoot& l) {
  if (l.batch_mode != 0 || l.commit_version != 0 || l.durable_cut != 0) {
    return "its batch record or durable cut is set, which a memtable list "
           "never sets";
  }
  return MetaDamage(*MetaOf(&l));
}

}  // namespace rocks
}  // namespace flintkv

// The copy spans of a list's meta (invariant P11, docs/invariants.md): the
// sequence range each recovery gives its copies of the list, persisted
// before the first copy is written, so that a later recovery recognises
// copies that reached SST files and never replays twice.
// Thread safety: none needed; recovery owns the pool while it runs.
#pragma once

#include <cstdint>

#include "pmem/layout.h"
#include "recovery/replay.h"
#include "rocksdb_common/memtable_meta.h"

namespace flintkv {
namespace recovery {

// Persists seq as a span bound (stored plus one: 0 is "not set").
void PersistCopyBound(uint64_t* word, uint64_t seq);

// The spans interrupted recoveries left in a list's meta, read before
// anything is written: the span of one that died replaying the list is
// closed at open_seq, the DB's sequence at this recovery's open, first;
// when every pair is taken they are merged into one (MergeCopySpans).
replay::CopyRange CloseCopySpans(rocks::MemtableMeta* meta, uint64_t open_seq);

// All of a list's copy spans as one, in the first pair, when every pair is
// taken (P11): the merged span covers each, and whatever lies between them
// (copies of the same recoveries, of this list and of other leftovers
// replayed with it, which are replayed again after it), so no copy of an
// interrupted recovery ever supersedes; a write made by another tool
// between two interrupted recoveries, inside the merged span, does not
// either. Crash-safe: the first pair only widens, and a pair is cleared
// last word first, so the spans on PMEM always cover the old ones and a
// half-cleared pair is never taken for a span.
void MergeCopySpans(rocks::MemtableMeta* meta, replay::CopyRange* copies);

// The copy span of this recovery in list l's meta (P11): the next free
// pair (CloseCopySpans merged the spans if none was).
uint64_t* NewSpan(pmem::ListRoot* l, const replay::CopyRange& copies);

}  // namespace recovery
}  // namespace flintkv

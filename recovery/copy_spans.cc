#include "recovery/copy_spans.h"

#include <algorithm>

#include "pmem/persist.h"

namespace flintkv {
namespace recovery {

void PersistCopyBound(uint64_t* word, uint64_t seq) {
  *word = seq + 1;
  pmem::PmemPersist::Persist(word, sizeof(*word));  // P11
}

replay::CopyRange CloseCopySpans(rocks::MemtableMeta* meta, uint64_t open_seq) {
  replay::CopyRange copies;
  for (int k = 0; k < rocks::kMaxCopySpans; k++) {
    uint64_t* span = &meta->copy_spans[2 * k];
    if (span[0] == 0) break;
    // A recovery that died replaying this list wrote its last copy before
    // this one opened the DB (P11): close its span there.
    if (span[1] == 0) PersistCopyBound(&span[1], open_seq);
    copies.spans.emplace_back(span[0] - 1, span[1] - 1);
  }
  if (copies.spans.size() == rocks::kMaxCopySpans) {
    MergeCopySpans(meta, &copies);
  }
  return copies;
}

void MergeCopySpans(rocks::MemtableMeta* meta, replay::CopyRange* copies) {
  uint64_t first = ~0ull, last = 0;
  for (const auto& [f, l] : copies->spans) {
    first = std::min(first, f);
    last = std::max(last, l);
  }
  uint64_t* span = meta->copy_spans;
  PersistCopyBound(&span[1], last);
  PersistCopyBound(&span[0], first);
  for (int k = rocks::kMaxCopySpans - 1; k >= 1; k--) {
    for (int w : {1, 0}) {
      span[2 * k + w] = 0;
      pmem::PmemPersist::Persist(&span[2 * k + w], sizeof(uint64_t));
    }
  }
  copies->spans.assign(1, {first, last});
}

uint64_t* NewSpan(pmem::ListRoot* l, const replay::CopyRange& copies) {
  return &rocks::MutableMetaOf(l)->copy_spans[2 * copies.spans.size()];
}

}  // namespace recovery
}  // namespace flintkv

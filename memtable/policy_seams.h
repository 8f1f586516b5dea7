// Test and benchmark seams of a persistence policy.
//
// The durable skiplist takes its persistence policy P as a template argument
// (pmem/persist.h). A production policy (PmemPersist, NoPersist) declares
// only persistence: kDurable, Flush, Fence, Persist, StoreAndFlush,
// FullFence, ReleaseWithFullFence. A policy written for a test or a benchmark
// may also declare any of the members below; the list reaches them only
// through the functions of this header, which compile to nothing (a
// constant false, an empty call) for a policy that does not declare them.
// So no library, plugin or product binary contains a seam: the product
// policies are checked to declare none (the static_asserts at the end), and
// the tests and benchmarks assert that each seam of their policies is seen
// (Declares).
//
//  Fault (mutants): `static bool Faulty(Fault)` — true drops or misorders one
//    persistence step, so that the crash-injection campaign proves it
//    catches that step's absence (tests/crash/sim_domain.h, SimPersist).
//  Crash-simulator hooks: `static void OnAdvertise()` when a worker
//    advertises; `static bool OnPassStart()` when a combiner took the lock,
//    before it decides whom its pass serves (true: scan every slot).
//  GC race hooks (tests/store/gc_race_concurrency_test.cc):
//    `static void OnBeforePromote(const void* index_node)` between a node's
//    level-0 link and its Promote; `static void OnGcPredFound(const void*
//    index_node, int level)` in the version GC between finding a node's
//    predecessor at `level` and unlinking it there.
//  Measurement probes (tools/bench_policies.h, flintkv_probe_bench only):
//    `static constexpr uint32_t kProbes`, a mask of MeasureProbe bits; each
//    leaves one part of a put out, to measure what that part costs. A
//    probed list breaks the invariants (kNoLinkStore leaves no persistent
//    list; kNoCombining is correct only while its lock is the only path to
//    level 0; kNoNodePersist leaves nodes a crash may tear).
//  Global-lock baseline (flintkv_bench's `globallock`):
//    `static constexpr bool kGlobalLock = true` runs every phase of every
//    update under one mutex, per-put durable (the paper's lock-based
//    comparison point). Not for the version GC (memtable/version_gc.h).
#pragma once

#include <cstdint>
#include <mutex>
#include <type_traits>

#include "pmem/persist.h"

namespace flintkv {
namespace memtable {

// Deliberate faults of the crash-injection campaign's mutants.
enum class Fault {
  kNone = 0,
  kNoNodeFlush,            // prepare: node body not flushed           (P1)
  kNoPrepareFence,         // prepare: successor pointer not fenced    (P1)
  kNoVersionFlush,         // attach: new version not flushed          (P2)
  kNoLinkFlush,            // attach: predecessor pointer not flushed  (P2)
  kBatchModeBeforeCommit,  // batch: batch_mode persisted before commit_version
  kNoMaxRule,              // recovery keeps version-MAX nodes (single fence
                           // optimisation without its recovery rule)
  kPublishBeforeGroupFence,  // group pass: visible + release before P15 fence
  kCutBeforeDrain,        // weak drain: cut cleared under the same fence as the
                          // re-flushed words (P16 ordering fence missing)
  kNoCutRule,             // recovery ignores durable_cut (P17)
  kGcUnlinkNotPersisted,  // version GC: a node's space is reused before its
                          // unlink is durable (no flush/fence)       (P12)
  kGcNoWeakDrain,         // version GC unlinks while weak writes are not yet
                   // durable (no drain first)                     (P12+P16)
  kNoWeakReflush,  // weak drain: the thread that moves the cut fences
                   // without re-flushing the words other threads'
                   // combiners flushed                                (P16)
};

enum class MeasureProbe : uint32_t {
  // PROCESS_PUT neither stores nor flushes the predecessor's PMEM link:
  // what the store into another node's PMEM line costs.
  kNoLinkStore = 1u << 0,
  // ATTACH takes the combiner lock, links its own node, publishes and
  // releases with a plain store: no advertisement, no scan of the slots,
  // no status hand-off. What the combiner costs beyond a plain lock.
  kNoCombining = 1u << 1,
  // PREPARE neither flushes the new node nor fences (P1 left out): what
  // the put pays for its node's write-back before the link, the ceiling
  // of any reordering of P1.
  kNoNodePersist = 1u << 2,
};

// The seams, for Declares<P>() (the tests assert each seam of their
// policies is seen, so none can be compiled away by mistake).
enum class Seam {
  kFaulty,
  kOnAdvertise,
  kOnPassStart,
  kOnBeforePromote,
  kOnGcPredFound,
  kProbes,
  kGlobalLock,
  kCount,  // not a seam: the number of seams, for HasSeams
};

namespace seams_detail {
// A seam is detected by its name; the wrappers below then call it with
// their arguments, so a seam declared with a wrong signature does not
// compile (it is never silently left out).
#define FLINTKV_SEAM_TRAIT(Trait, member) \
  template <class P, class = void>        \
  struct Trait : std::false_type {};      \
  template <class P>                      \
  struct Trait<P, std::void_t<decltype(&P::member)>> : std::true_type {};
FLINTKV_SEAM_TRAIT(HasFaulty, Faulty)
FLINTKV_SEAM_TRAIT(HasOnAdvertise, OnAdvertise)
FLINTKV_SEAM_TRAIT(HasOnPassStart, OnPassStart)
FLINTKV_SEAM_TRAIT(HasOnBeforePromote, OnBeforePromote)
FLINTKV_SEAM_TRAIT(HasOnGcPredFound, OnGcPredFound)
FLINTKV_SEAM_TRAIT(HasProbes, kProbes)
FLINTKV_SEAM_TRAIT(HasGlobalLock, kGlobalLock)
#undef FLINTKV_SEAM_TRAIT

// The global-lock baseline's mutex, or nothing.
struct NoMutex {
  void lock() {}
  void unlock() {}
};
}  // namespace seams_detail

template <class P>
constexpr bool Declares(Seam seam) {
  using namespace seams_detail;  // NOLINT(build/namespaces)
  switch (seam) {
    case Seam::kFaulty:
      return HasFaulty<P>::value;
    case Seam::kOnAdvertise:
      return HasOnAdvertise<P>::value;
    case Seam::kOnPassStart:
      return HasOnPassStart<P>::value;
    case Seam::kOnBeforePromote:
      return HasOnBeforePromote<P>::value;
    case Seam::kOnGcPredFound:
      return HasOnGcPredFound<P>::value;
    case Seam::kProbes:
      return HasProbes<P>::value;
    case Seam::kGlobalLock:
      return HasGlobalLock<P>::value;
    case Seam::kCount:
      break;
  }
  return false;
}

// True if P declares any seam of this header.
template <class P>
constexpr bool HasSeams() {
  for (int s = 0; s < static_cast<int>(Seam::kCount); s++) {
    if (Declares<P>(static_cast<Seam>(s))) return true;
  }
  return false;
}

// The wrappers are constexpr: for a policy without the seam they are
// constant expressions (false, or nothing), even unoptimised.
template <class P>
constexpr bool Faulty(Fault f) {
  if constexpr (seams_detail::HasFaulty<P>::value) {
    return P::Faulty(f);
  } else {
    return false;
  }
}

template <class P>
constexpr void OnAdvertise() {
  if constexpr (seams_detail::HasOnAdvertise<P>::value) P::OnAdvertise();
}

template <class P>
constexpr bool OnPassStart() {
  if constexpr (seams_detail::HasOnPassStart<P>::value) {
    return P::OnPassStart();
  } else {
    return false;
  }
}

template <class P>
constexpr void OnBeforePromote(const void* index_node) {
  if constexpr (seams_detail::HasOnBeforePromote<P>::value) {
    P::OnBeforePromote(index_node);
  }
}

template <class P>
constexpr void OnGcPredFound(const void* index_node, int level) {
  if constexpr (seams_detail::HasOnGcPredFound<P>::value) {
    P::OnGcPredFound(index_node, level);
  }
}

template <class P>
constexpr bool Probing(MeasureProbe probe) {
  if constexpr (seams_detail::HasProbes<P>::value) {
    return (uint32_t{P::kProbes} & static_cast<uint32_t>(probe)) != 0;
  } else {
    return false;
  }
}

template <class P>
constexpr bool GlobalLocked() {
  if constexpr (seams_detail::HasGlobalLock<P>::value) {
    return bool{P::kGlobalLock};
  } else {
    return false;
  }
}

// A std::mutex for the global-lock baseline, an empty type otherwise.
template <class P>
using GlobalMutex =
    std::conditional_t<GlobalLocked<P>(), std::mutex, seams_detail::NoMutex>;

static_assert(!HasSeams<pmem::PmemPersist>() && !HasSeams<pmem::NoPersist>(),
              "a production persistence policy declares a test seam");
static_assert(!Faulty<pmem::PmemPersist>(Fault::kNoNodeFlush) &&
                  !OnPassStart<pmem::PmemPersist>(),
              "the seams are constant expressions for the product");

}  // namespace memtable
}  // namespace flintkv

// Measurement probes: a benchmark-only way to leave one part of a put out
// and so measure what that part costs (tools/probe_policies.h, built only
// into the flintkv_probe_bench target; results in
// docs/results/performance.md, "Where a put's time goes").
//
// A persistence policy may declare `static constexpr uint32_t kProbes`, a
// mask of MeasureProbe bits. The production policies (pmem/persist.h) and
// the crash simulator's declare none, so Probing<P>() is false at compile
// time and every probe branch is compiled out of them: no library, plugin
// or test binary contains a probe. A probed list breaks the invariants
// (kNoLinkStore leaves no persistent list; kNoCombining is correct only
// while its lock is the only path to level 0); nothing but that benchmark
// instantiates one.
#pragma once

#include <cstdint>
#include <type_traits>

namespace flintkv {
namespace memtable {

enum class MeasureProbe : uint32_t {
  // PROCESS_PUT neither stores nor flushes the predecessor's PMEM link:
  // what the store into another node's PMEM line costs.
  kNoLinkStore = 1u << 0,
  // ATTACH takes the combiner lock, links its own node, publishes and
  // releases with a plain store: no advertisement, no scan of the slots,
  // no status hand-off. What the combiner costs beyond a plain lock.
  kNoCombining = 1u << 1,
};

namespace detail {
template <class P, class = void>
struct ProbeMask : std::integral_constant<uint32_t, 0> {};
template <class P>
struct ProbeMask<P, std::void_t<decltype(P::kProbes)>>
    : std::integral_constant<uint32_t, P::kProbes> {};
}  // namespace detail

template <class P>
constexpr bool Probing(MeasureProbe probe) {
  return (detail::ProbeMask<P>::value & static_cast<uint32_t>(probe)) != 0;
}

}  // namespace memtable
}  // namespace flintkv

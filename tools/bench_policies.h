// Benchmark-only persistence policies (never the product): a production
// policy with one of the seams of memtable/policy_seams.h declared.
//
// GlobalLockBaseline<Base> (flintkv_bench's `globallock`): every phase of
// every update under one mutex, per-put durable.
//
// Probed<Base, mask> (flintkv_probe_bench only): the list leaves the parts
// of a put named by memtable::MeasureProbe bits out. What a run without a
// part gains over the same policy with it, in the same round, is what that
// part costs. Impl names: "<base>~<probe>[~<probe>...]", base flintkv
// (PmemPersist, per-put) or volatile (NoPersist), probes:
//   nolink     no store (nor flush) into the predecessor's PMEM line
//   nocombine  Attach is a plain lock around the thread's own link
//   nonodepersist  Prepare neither flushes the node nor fences (no P1)
//   nostats    SkipListOptions::write_stats off (an option, not a probe:
//              the WriteStats counters and their clock reads)
// A probed run's persistent list is not checked (it is not a list with
// nolink): run it with --verify=sample.
#pragma once

#include <cstdint>

#include "memtable/policy_seams.h"
#include "pmem/persist.h"

namespace flintkv {
namespace bench {

template <class Base>
struct GlobalLockBaseline : Base {
  static constexpr bool kGlobalLock = true;
};

template <class Base, uint32_t kMask>
struct Probed : Base {
  static constexpr uint32_t kProbes = kMask;
};

static_assert(memtable::GlobalLocked<GlobalLockBaseline<pmem::PmemPersist>>(),
              "the baseline's lock is seen by the list");
static_assert(memtable::Probing<Probed<pmem::NoPersist, 3>>(
                  memtable::MeasureProbe::kNoLinkStore) &&
                  memtable::Probing<Probed<pmem::NoPersist, 3>>(
                      memtable::MeasureProbe::kNoCombining),
              "the probes are seen by the list");

}  // namespace bench
}  // namespace flintkv

// Measurement-only persistence policies for flintkv_probe_bench (never the
// product, never flintkv_bench): a production policy with some
// memtable::MeasureProbe bits set, so that the list leaves those parts of a
// put out (memtable/measure_probe.h). What a run without a part gains over
// the same policy with it, in the same round, is what that part costs.
//
// Impl names: "<base>~<probe>[~<probe>...]", base flintkv (PmemPersist,
// per-put) or volatile (NoPersist), probes:
//   nolink     no store (nor flush) into the predecessor's PMEM line
//   nocombine  Attach is a plain lock around the thread's own link
//   nostats    SkipListOptions::write_stats off (an option, not a probe:
//              the WriteStats counters and their clock reads)
// A probed run's persistent list is not checked (it is not a list with
// nolink): run it with --verify=sample.
#pragma once

#include <cstdint>

#include "memtable/measure_probe.h"

namespace flintkv {
namespace bench {

template <class Base, uint32_t kMask>
struct Probed : Base {
  static constexpr uint32_t kProbes = kMask;
};

}  // namespace bench
}  // namespace flintkv

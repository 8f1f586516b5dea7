// Crash-injection campaigns on the simulated persistence domain.
//
// A campaign runs a deterministic workload of PUT / DELETE / WRITEBATCH on a
// DurableSkipList<SimPersist> in a SimRegion, captures crash states at fences
// (tests/crash/sim_domain.h), builds crash images (durable image + eviction
// subsets), recovers each image in a fresh list at a different address and
// checks durable linearizability with CheckRecovered():
//  - recovery succeeds, batch_mode is clear afterwards, and the persistent
//    list is well formed (sorted by key asc / version desc, hence acyclic;
//    every node aligned, in bounds, inside a chunk, valid header and key);
//  - visible_version equals the newest recovered version (and is not MAX),
//    every node is visible at it, and the DRAM index shows exactly the
//    newest live version of every key in the list;
//  - the recovered state obeys tests/crash/crash_model.h's rules;
//  - post-recovery writes work: new PUTs get fresh versions, are visible to
//    Get, and keep the list sorted.
// The workload model and the state rules are in tests/crash/crash_model.h (with
// weak ops: a prefix of the commit order and the Persist() guarantee).
// With gc_every, the same checks hold while the GC unlinks and reuses
// versions (it never removes a key's newest version unless a tombstone),
// and the campaign reports how many nodes the GC unlinked and freed.
// Keys are "k<j>.t<thread>", so threads' keys interleave in the list (the
// combiner links neighbours of other threads) while each thread's history
// stays sequential.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "pmem/persist.h"

namespace flintkv {
namespace crashsim {

struct CampaignOptions {
  int threads = 1;
  int ops_per_thread = 120;
  int keys_per_thread = 12;
  uint64_t seed = 1;
  // Eviction subsets per crash point (pmem::EvictionSubsets).
  int exhaustive_max = 4;
  int random_subsets = 3;
  // Single-threaded: capture every fence. Multi-threaded: capture each
  // fence with this probability.
  double capture_probability = 0.05;
  // Multi-threaded: sleep jitter_micros after 1 in jitter_one_in fences
  // (SimDomain::set_jitter) so that combiners attach other threads' ops.
  uint32_t jitter_one_in = 8;
  uint32_t jitter_micros = 100;
  // Also crash recovery itself (at each of its fences) for images whose
  // recovery dropped or unlinked something, and recover again.
  bool crash_recovery = true;
  // Explore only the durable image (no line evicted): isolates what the
  // fences alone guarantee, e.g. that another thread's fence does not drain
  // this thread's flushes.
  bool durable_only = false;
  // Stop exploring after this many failing states.
  int max_failures = 5;
  // Durability modes (docs/durability_modes.md): group commit (P15), and
  // the fraction of ops issued weak (sync=false, P16/P17), checked for a
  // prefix of the commit order instead of acked/in-flight.
  bool group_commit = false;
  double weak_fraction = 0;
  // A thread calls Persist() after every persist_every-th op (0: never).
  int persist_every = 0;
  // SkipListOptions::max_unpersisted_writes (0: the list's default).
  size_t max_unpersisted_writes = 0;
  // Rounds: every thread issues one op per round, and the first combining
  // pass of a round waits until every thread has advertised, so that it
  // serves several advertisements (deterministic multi-advertisement
  // passes). Crash states are then checked at every fence, inline.
  bool lockstep = false;
  // Turns: the threads run one op at a time in a fixed rotation (thread 0's
  // op i, thread 1's op i, ...), each checked at every fence, inline. No
  // two ops overlap, yet consecutive ops run on different threads, each
  // with its own pending flushes (a fence drains only its thread's):
  // deterministic cross-thread persistence, e.g. a Persist() or strong
  // write ending a weak epoch whose words another thread's combiner
  // flushed (P16).
  bool turns = false;
  // Version GC (memtable/version_gc.h) with space reuse: single-threaded, a
  // pass on the worker after every gc_every ops (its fences are crash
  // points like any other); multi-threaded, a GC thread running passes
  // while the workers run. 0: no GC. Recovered lists then also rebuild
  // their free space (P14) before the post-recovery writes.
  int gc_every = 0;
};

struct CampaignResult {
  uint64_t crash_points = 0;     // fences at which a state was captured
  uint64_t states = 0;           // distinct crash images recovered+checked
  uint64_t recovery_states = 0;  // of which crashes during recovery
  uint64_t failures = 0;         // images that failed a check
  std::map<std::string, uint64_t> failed_rules;  // rule -> count
  std::vector<std::string> messages;             // first few failures
  uint64_t fences = 0;          // fences executed by the workload
  uint64_t passes = 0;          // combining passes (WriteStats)
  uint64_t ads_served = 0;      // advertisements they served
  uint64_t advertisements = 0;  // SimPersist::OnAdvertise calls (the seam)
  uint64_t persists = 0;        // Persist() calls of the workload
  uint64_t gc_unlinked = 0, gc_freed = 0;  // gc_every > 0
  std::string Summary() const;
};

// One workload thread per options.threads; single-threaded runs check every
// fence, multi-threaded runs random fences. Faults come from pmem::SimFault.
CampaignResult RunCampaign(const CampaignOptions& options);

}  // namespace crashsim
}  // namespace flintkv

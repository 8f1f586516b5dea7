// The crash campaign has teeth: each deliberate persistence fault
// of memtable::Fault, switched on in the simulated policy only, must make the
// campaign fail, and the unmodified skiplist must pass the same campaign.
// Prints one table row per mutant (docs/crash_injection.md has the table).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <tuple>

#include "tests/crash/crash_campaign.h"
#include "tests/crash/sim_domain.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace crashsim {
namespace {

struct MutantRun {
  CampaignResult single, multi;
  bool caught() const { return single.failures > 0 || multi.failures > 0; }
};

std::string Rules(const CampaignResult& r) {
  std::string s;
  for (const auto& kv : r.failed_rules) s += (s.empty() ? "" : ",") + kv.first;
  return s.empty() ? "-" : s;
}

// The campaign's durability mode: strong per-put (the paper's), group
// commit (P15), or weak ops with Persist() calls and group commit (P16/P17).
enum class Mode { kPerPut, kGroup, kWeak };

void SetMode(Mode mode, CampaignOptions* o) {
  o->group_commit = mode != Mode::kPerPut;
  if (mode == Mode::kWeak) {
    o->weak_fraction = 0.7;
    o->persist_every = 5;
  }
}

const char* ModeName(Mode m) {
  return m == Mode::kPerPut ? "per-put" : m == Mode::kGroup ? "group" : "weak";
}

MutantRun RunMutant(memtable::Fault f, int max_failures,
                    Mode mode = Mode::kPerPut) {
  pmem::SetSimFault(f);
  MutantRun m;
  CampaignOptions st;
  SetMode(mode, &st);
  st.threads = 1;
  st.seed = 7;
  st.ops_per_thread = test::Scaled(80, 4, 2);
  st.max_failures = max_failures;
  m.single = RunCampaign(st);
  CampaignOptions mt;
  SetMode(mode, &mt);
  mt.threads = 4;
  mt.seed = 11;
  mt.ops_per_thread = test::Scaled(120, 3, 2);
  mt.keys_per_thread = 8;
  mt.capture_probability = 0.08;
  mt.max_failures = max_failures;
  m.multi = RunCampaign(mt);
  pmem::SetSimFault(memtable::Fault::kNone);
  std::printf(
      "[mutant] %-24s %-7s single: %-5s (%llu states, rules %s)  "
      "multi: %-5s (%llu states, rules %s)  => %s\n",
      pmem::FaultName(f), ModeName(mode), m.single.failures ? "CAUGHT" : "pass",
      static_cast<unsigned long long>(m.single.states), Rules(m.single).c_str(),
      m.multi.failures ? "CAUGHT" : "pass",
      static_cast<unsigned long long>(m.multi.states), Rules(m.multi).c_str(),
      f == memtable::Fault::kNone ? "clean"
      : m.caught()                ? "caught"
                                  : "MISSED");
  for (const auto& msg : m.single.messages)
    std::printf("    st: %s\n", msg.c_str());
  for (const auto& msg : m.multi.messages)
    std::printf("    mt: %s\n", msg.c_str());
  std::fflush(stdout);
  return m;
}

TEST(MutantTest, UnmutatedSkiplistPasses) {
  for (Mode mode : {Mode::kPerPut, Mode::kGroup, Mode::kWeak}) {
    MutantRun m = RunMutant(memtable::Fault::kNone, 5, mode);
    EXPECT_EQ(m.single.failures, 0u) << m.single.Summary();
    EXPECT_EQ(m.multi.failures, 0u) << m.multi.Summary();
  }
}

// Group commit (P15): publishing visible_version and releasing the waiters
// before the pass's fence lets a reader (and an acknowledged writer) see a
// write that a crash then takes away. Caught by "visible-durable" on one
// thread already (its own pass), and by "acked-present" across threads.
TEST(MutantTest, PublishBeforeGroupFenceIsCaught) {
  MutantRun m =
      RunMutant(memtable::Fault::kPublishBeforeGroupFence, 1, Mode::kGroup);
  EXPECT_GT(m.single.failures, 0u) << m.single.Summary();
  EXPECT_TRUE(m.single.failed_rules.count("visible-durable"))
      << m.single.Summary();
  // In per-put mode the faulty branch is never taken: the same campaign
  // passes (the mutant is specific to the group fence).
  MutantRun p = RunMutant(memtable::Fault::kPublishBeforeGroupFence, 1);
  EXPECT_FALSE(p.caught()) << p.single.Summary() << "; " << p.multi.Summary();
}

// Weak durability (P16/P17): clearing the durable cut under the same fence
// as the re-flushed weak words, or ignoring the cut in recovery, lets a
// crash keep a later weak write without an earlier one.
TEST(MutantTest, WeakPrefixMutantsAreCaught) {
  for (memtable::Fault f :
       {memtable::Fault::kCutBeforeDrain, memtable::Fault::kNoCutRule}) {
    MutantRun m = RunMutant(f, 1, Mode::kWeak);
    EXPECT_GT(m.single.failures, 0u)
        << pmem::FaultName(f) << ": " << m.single.Summary();
    EXPECT_TRUE(m.single.failed_rules.count("prefix"))
        << pmem::FaultName(f) << ": " << m.single.Summary();
  }
}

// The persistence mutants of the per-put design are caught under group
// commit and weak durability too.
class EveryMutantEveryMode
    : public ::testing::TestWithParam<std::tuple<memtable::Fault, Mode>> {};

TEST_P(EveryMutantEveryMode, IsCaught) {
  memtable::Fault f = std::get<0>(GetParam());
  MutantRun m = RunMutant(f, 1, std::get<1>(GetParam()));
  EXPECT_TRUE(m.caught()) << pmem::FaultName(f) << " survived: single "
                          << m.single.Summary() << "; multi "
                          << m.multi.Summary();
}

class EveryMutant : public ::testing::TestWithParam<memtable::Fault> {};

TEST_P(EveryMutant, IsCaught) {
  MutantRun m = RunMutant(GetParam(), 1);
  EXPECT_TRUE(m.caught()) << pmem::FaultName(GetParam())
                          << " survived the campaign: single "
                          << m.single.Summary() << "; multi "
                          << m.multi.Summary();
}

// Without the prepare fence a waiter's node body and successor stay in its
// own pending set: the combiner's fence (another thread) does not drain
// them, yet the waiter returns acknowledged. Caught with no eviction at all,
// i.e. from the fences alone, only with several threads.
TEST(MutantTest, NoPrepareFenceCaughtAcrossThreadsWithoutEviction) {
  pmem::SetSimFault(memtable::Fault::kNoPrepareFence);
  CampaignOptions o;
  o.durable_only = true;
  o.threads = 1;
  o.ops_per_thread = test::Scaled(80, 4, 2);
  o.max_failures = 1;
  CampaignResult single = RunCampaign(o);
  o.threads = 4;
  o.seed = 11;
  o.ops_per_thread = test::Scaled(120, 3, 2);
  o.keys_per_thread = 8;
  o.capture_probability = 0.2;
  CampaignResult multi = RunCampaign(o);
  pmem::SetSimFault(memtable::Fault::kNone);
  std::printf(
      "[mutant] kNoPrepareFence, durable image only: single %s, "
      "multi %s\n",
      single.Summary().c_str(), multi.Summary().c_str());
  for (const auto& msg : multi.messages)
    std::printf("    mt: %s\n", msg.c_str());
  EXPECT_EQ(single.failures, 0u) << "one thread is its own combiner: its "
                                    "link fence drains its prepare flushes";
  EXPECT_GT(multi.failures, 0u) << multi.Summary();
}

// P16's cross-thread re-flush: the thread that ends a weak epoch (Persist,
// or the pass of a strong write) re-flushes the weak words, because its
// fence drains only its own flushes and other threads' combiners flushed
// them. Lockstep campaigns miss its removal: every thread's next Prepare
// fence drains its own flushes before any pass of the next round ends the
// epoch. Turns hand each op to the next thread, so the epoch is ended by a
// thread that did not link the weak writes: caught deterministically.
TEST(MutantTest, NoWeakReflushCaughtByTurns) {
  for (bool group : {false, true}) {
    CampaignOptions o;
    o.threads = 2;
    o.turns = true;
    o.seed = 31;
    o.ops_per_thread = test::Scaled(40, 4, 2);
    o.keys_per_thread = 6;
    o.group_commit = group;
    o.weak_fraction = 0.7;
    o.persist_every = 3;
    o.max_failures = 1;
    CampaignResult clean = RunCampaign(o);
    pmem::SetSimFault(memtable::Fault::kNoWeakReflush);
    CampaignResult mutant = RunCampaign(o);
    pmem::SetSimFault(memtable::Fault::kNone);
    std::printf("[mutant] kNoWeakReflush, turns (%s): clean %s; mutant %s\n",
                group ? "group" : "per-put", clean.Summary().c_str(),
                mutant.Summary().c_str());
    for (const auto& msg : mutant.messages)
      std::printf("    %s\n", msg.c_str());
    EXPECT_EQ(clean.failures, 0u) << clean.Summary();
    EXPECT_GT(mutant.failures, 0u) << mutant.Summary();
  }
}

// A GC mutant: a clean single-threaded GC campaign must pass and reuse
// space; with the fault on, the single-threaded campaign (and, when given,
// a multi-threaded one with a GC thread) must fail somewhere.
void ExpectGcMutantCaught(memtable::Fault fault, CampaignOptions o,
                          const CampaignOptions* multi_options) {
  CampaignResult clean = RunCampaign(o);
  pmem::SetSimFault(fault);
  CampaignResult single = RunCampaign(o);
  CampaignResult multi;
  if (multi_options) multi = RunCampaign(*multi_options);
  pmem::SetSimFault(memtable::Fault::kNone);
  std::printf(
      "[mutant] %-24s single: %-5s (%llu states, rules %s)  "
      "multi: %-5s (%llu states, rules %s)  => %s\n",
      pmem::FaultName(fault), single.failures ? "CAUGHT" : "pass",
      static_cast<unsigned long long>(single.states), Rules(single).c_str(),
      !multi_options   ? "-"
      : multi.failures ? "CAUGHT"
                       : "pass",
      static_cast<unsigned long long>(multi.states), Rules(multi).c_str(),
      single.failures || multi.failures ? "caught" : "MISSED");
  for (const auto& msg : single.messages)
    std::printf("    st: %s\n", msg.c_str());
  EXPECT_EQ(clean.failures, 0u) << clean.Summary();
  EXPECT_GT(clean.gc_freed, 0u) << "the GC must reuse space for the mutant "
                                   "to have something to break";
  EXPECT_GT(single.failures + multi.failures, 0u)
      << "single " << single.Summary() << "; multi " << multi.Summary();
}

CampaignOptions GcCampaign(uint64_t seed) {
  CampaignOptions o;
  o.threads = 1;
  o.seed = seed;
  o.ops_per_thread = test::Scaled(120, 4, 2);
  o.keys_per_thread = 6;
  o.gc_every = 3;
  o.max_failures = 1;
  return o;
}

// The version GC's ordering point (P12): a node's space is reused only
// after the pointer that unlinked it is durable. Without the flush and
// fence, the reused bytes are still reachable in the durable image.
TEST(MutantTest, GcUnlinkNotPersistedIsCaught) {
  CampaignOptions multi = GcCampaign(13);
  multi.threads = 3;
  multi.gc_every = 1;
  multi.capture_probability = 0.1;
  ExpectGcMutantCaught(memtable::Fault::kGcUnlinkNotPersisted, GcCampaign(9),
                       &multi);
}

// The GC with weak writes (P12 + P16/P17): a hold's unlinks become durable
// under its fence, so pending weak writes must be drained first. Without the
// drain the GC unlinks a key's older version against a newer weak one that
// recovery then drops (beyond the durable cut): the key loses its value.
TEST(MutantTest, GcWithoutWeakDrainIsCaught) {
  CampaignOptions o = GcCampaign(17);
  o.weak_fraction = 0.7;
  o.persist_every = 7;
  ExpectGcMutantCaught(memtable::Fault::kGcNoWeakDrain, o, nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    AllFaults, EveryMutant,
    ::testing::Values(
        memtable::Fault::kNoNodeFlush, memtable::Fault::kNoPrepareFence,
        memtable::Fault::kNoVersionFlush, memtable::Fault::kNoLinkFlush,
        memtable::Fault::kBatchModeBeforeCommit, memtable::Fault::kNoMaxRule),
    [](const ::testing::TestParamInfo<memtable::Fault>& i) {
      return std::string(pmem::FaultName(i.param)).substr(1);
    });

INSTANTIATE_TEST_SUITE_P(
    GroupAndWeak, EveryMutantEveryMode,
    ::testing::Combine(
        ::testing::Values(memtable::Fault::kNoNodeFlush,
                          memtable::Fault::kNoVersionFlush,
                          memtable::Fault::kNoLinkFlush,
                          memtable::Fault::kBatchModeBeforeCommit,
                          memtable::Fault::kNoMaxRule),
        ::testing::Values(Mode::kGroup, Mode::kWeak)),
    [](const ::testing::TestParamInfo<std::tuple<memtable::Fault, Mode>>& i) {
      return std::string(pmem::FaultName(std::get<0>(i.param))).substr(1) +
             "_" + (std::get<1>(i.param) == Mode::kGroup ? "group" : "weak");
    });

}  // namespace
}  // namespace crashsim
}  // namespace flintkv

// The weak-prefix checker of the crash campaigns (tests/crash/crash_model.h) on
// hand-built recovered states: it must reject a recovered list that is no
// prefix of the commit (version) order, and a run that lost the version of
// an acknowledged op (which would leave the prefix bounds open).
#include "tests/crash/crash_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

namespace flintkv {
namespace crashsim {
namespace {

std::string K(int t, int j) {
  return "k00" + std::to_string(j) + ".t" + std::to_string(t);
}
std::string V(int t, int op) {
  return "t" + std::to_string(t) + "#" + std::to_string(op) + "#0|x";
}
// A weak Put (or Delete) of key `key` by thread t as its op-th op.
Op WeakOp(bool is_delete, int t, int op, int key) {
  Op o;
  o.kind = is_delete ? Op::kDelete : Op::kPut;
  o.writes.push_back({K(t, key), V(t, op), is_delete});
  o.sync = false;
  return o;
}
Op Put(int t, int op, int key) { return WeakOp(false, t, op, key); }
Op Del(int t, int op, int key) { return WeakOp(true, t, op, key); }

struct World {
  std::vector<std::vector<Op>> ops;
  std::vector<std::vector<State>> prefixes;
  std::vector<std::vector<std::atomic<uint64_t>>> versions;
  explicit World(std::vector<std::vector<Op>> o,
                 const std::vector<std::vector<uint64_t>>& vers)
      : ops(std::move(o)) {
    for (size_t t = 0; t < ops.size(); t++) {
      prefixes.push_back(Prefixes(ops[t]));
      versions.emplace_back(ops[t].size());
      for (size_t i = 0; i < vers[t].size(); i++) versions[t][i] = vers[t][i];
    }
  }
  Expectation Expect(bool gc) const {
    Expectation e;
    e.prefixes = &prefixes;
    e.ops = &ops;
    e.versions = &versions;
    e.weak = true;
    e.gc = gc;
    for (const auto& o : ops) {
      e.acked.push_back(o.size());  // every op returned
      e.floor.push_back(0);         // all weak, no Persist()
    }
    return e;
  }
};

PNode N(int t, int op, int key, uint64_t version) {
  return {K(t, key), V(t, op), version, false};
}

bool Failed(const Verdict& v, const std::string& rule) {
  return std::find(v.rules.begin(), v.rules.end(), rule) != v.rules.end();
}

// Thread 0 deletes k0 at version 5; thread 1 wrote at versions 3 and 4.
// Recovered: k0's whole chain is gone (unlinked with the tombstone) but
// thread 1's write at version 4 is lost: the delete (5) survived while 4
// did not, no prefix. The shape of the kGcNoWeakDrain bug.
World DeleteSurvivesOlderLostWrite(uint64_t delete_version) {
  return World({{Put(0, 0, 0), Put(0, 1, 1), Del(0, 2, 0)},
                {Put(1, 0, 0), Put(1, 1, 1)}},
               {{1, 2, delete_version}, {3, 4}});
}
const std::vector<PNode> kDeleteSurvives = {N(1, 0, 0, 3), N(0, 1, 1, 2)};

// Thread 0: put k0 (1), delete k0 (3), put k1 (5). Thread 1: put (2), put
// (6). Recovered: thread 0 only has k0 (its ops at 3 and 5 are lost) while
// thread 1's op at 6 is there: no prefix (5 <= 6 lost).
World LostWritesAfterDelete(uint64_t delete_version) {
  return World({{Put(0, 0, 0), Del(0, 1, 0), Put(0, 2, 1)},
                {Put(1, 0, 0), Put(1, 1, 1)}},
               {{1, delete_version, 5}, {2, 6}});
}
const std::vector<PNode> kLostWrites = {N(0, 0, 0, 1), N(1, 0, 0, 2),
                                        N(1, 1, 1, 6)};

TEST(CrashModelTest, RejectsNonPrefixStates) {
  for (bool gc : {false, true}) {
    Verdict v1;
    CheckRecoveredState(kDeleteSurvives,
                        DeleteSurvivesOlderLostWrite(5).Expect(gc), &v1);
    EXPECT_TRUE(Failed(v1, "prefix")) << "gc=" << gc << " " << v1.detail;
    Verdict v2;
    CheckRecoveredState(kLostWrites, LostWritesAfterDelete(3).Expect(gc), &v2);
    EXPECT_TRUE(Failed(v2, "prefix")) << "gc=" << gc << " " << v2.detail;
  }
}

// Regression: the campaign recorded an op's version by
// a lookup after the op returned, and with a GC thread a delete's tombstone
// could be collected first: the version was recorded as 0, "not known",
// and the checker then skipped the op for the lower bound and left the
// upper bound open, accepting both states above (the first also with the
// pre-GC rule). The campaign now holds a read guard over the op and its
// lookup (the tombstone cannot be collected) and fails a run whose lookup
// misses; the checker refuses an acknowledged op without a version.
TEST(CrashModelTest, AcknowledgedOpWithoutVersionIsAFailure) {
  for (bool gc : {false, true}) {
    Verdict v1;
    CheckRecoveredState(kDeleteSurvives,
                        DeleteSurvivesOlderLostWrite(0).Expect(gc), &v1);
    EXPECT_TRUE(Failed(v1, "version-recorded")) << v1.detail;
    Verdict v2;
    CheckRecoveredState(kLostWrites, LostWritesAfterDelete(0).Expect(gc), &v2);
    EXPECT_TRUE(Failed(v2, "version-recorded")) << v2.detail;
  }
}

// Control: a state the GC can legitimately leave is accepted. Thread 0's
// newest op, a delete at 3, was collected with k0's older version; the
// newest recovered version is 2 < 3 (the generalised rule's C >= c).
TEST(CrashModelTest, AcceptsCollectedNewestDelete) {
  World w({{Put(0, 0, 0), Put(0, 1, 1), Del(0, 2, 0)}}, {{1, 2, 3}});
  std::vector<PNode> nodes = {N(0, 1, 1, 2)};
  Verdict v;
  CheckRecoveredState(nodes, w.Expect(true), &v);
  EXPECT_TRUE(v.ok()) << v.detail;
}

}  // namespace
}  // namespace crashsim
}  // namespace flintkv

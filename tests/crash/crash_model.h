// The workload model and the checks of the crash campaigns (weak
// durability included): what a recovered image may show.
//
// Per writer thread a deterministic sequence of PUT / DELETE / WRITEBATCH
// ops on keys "k<j>.t<thread>" (threads' keys interleave in the list while
// each thread's history stays sequential). prefixes[t][i] is the state of
// thread t's keys after its first i ops. Values "t<t>#<op>#<pos>|filler"
// name the op that wrote them.
//
// Checks on the recovered list (newest node per key, tombstones hidden):
//  - strong ops only (CheckState): per thread, the state after its acked
//    ops or after those plus the one in flight ("acked-present",
//    "all-or-nothing/nothing-else"); and every write visible at the crash
//    is still there ("visible-durable": nothing is published before its
//    fence, P2/P3/P15);
//  - with weak ops (CheckPrefix): with c the newest recovered version, per
//    thread exactly the ops whose version is <= c (an op whose version was
//    not yet known, i.e. in flight, either way): a prefix of the commit
//    order across threads ("prefix"); and no op below the thread's floor is
//    lost: ops acknowledged before a completed Persist() call began, and
//    acknowledged sync ops ("persist-durable");
//  - both: versions follow each thread's program order, one per op.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tests/crash/crash_campaign.h"

namespace flintkv {
namespace crashsim {

using State = std::map<std::string, std::string>;  // live key -> value

struct Write {
  std::string key;
  std::string value;  // also the tombstone's payload (identifies the op)
  bool is_delete;
};
struct Op {
  enum Kind { kPut, kDelete, kBatch } kind;
  std::vector<Write> writes;
  bool sync = true;  // false: weak (returns once visible)
};

std::vector<Op> MakeOps(const CampaignOptions& o, int t);
// prefix[i] = state of this thread's keys after its first i ops.
std::vector<State> Prefixes(const std::vector<Op>& ops);
std::string Describe(const State& s);

// A node of the recovered persistent list.
struct PNode {
  std::string key, value;
  uint64_t version;
  bool tombstone;
};

// Calls fn(node) for the newest node of each key (the list is ordered by
// key ascending, version descending).
template <class Fn>
void ForNewestPerKey(const std::vector<PNode>& nodes, Fn fn) {
  const std::string* last = nullptr;
  for (const PNode& n : nodes) {
    if (last && n.key == *last) continue;
    last = &n.key;
    fn(n);
  }
}

// What the workload knew at the crash point.
struct Expectation {
  const std::vector<std::vector<State>>* prefixes;  // [thread][i]
  const std::vector<std::vector<Op>>* ops;          // [thread][i]
  // versions[t][i]: version of op i of thread t once it returned (0 until
  // then); read when the check runs.
  const std::vector<std::vector<std::atomic<uint64_t>>>* versions;
  std::vector<uint64_t> acked;  // ops returned per thread
  std::vector<uint64_t> floor;  // ops made durable by a completed Persist()
  bool weak = false;            // the campaign issues weak ops
  bool gc = false;  // the version GC may have unlinked the newest version
  // Strong campaigns: visible_version and the visible state at the crash.
  bool have_visible = false;
  uint64_t visible_version = 0;
  State visible;
};

struct Verdict {
  std::vector<std::string> rules;  // failed rules
  std::string detail;
  void Fail(const std::string& rule, const std::string& why);
  bool ok() const { return rules.empty(); }
};

// The newest version among the recovered nodes (0: none).
uint64_t NewestVersion(const std::vector<PNode>& nodes);

// nodes: the recovered list in order (key asc, version desc).
void CheckRecoveredState(const std::vector<PNode>& nodes, const Expectation& e,
                         Verdict* v);

}  // namespace crashsim
}  // namespace flintkv

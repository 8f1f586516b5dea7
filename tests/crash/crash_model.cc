#include "tests/crash/crash_model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace flintkv {
namespace crashsim {
namespace {

std::string Key(int t, int j) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "k%03d.t%d", j, t);
  return buf;
}

// "t<t>#<op>#<pos>|filler": unique per write, parsed back by the checker.
std::string Value(int t, int op, int pos, std::mt19937_64* rng) {
  std::string v = "t" + std::to_string(t) + "#" + std::to_string(op) + "#" +
                  std::to_string(pos) + "|";
  uint64_t r = (*rng)() % 100;
  size_t filler = r < 85 ? (*rng)() % 80 : 100 + (*rng)() % 300;
  v.append(filler, static_cast<char>('a' + op % 26));
  return v;
}

bool ParseValue(std::string_view v, int* t, int* op) {
  if (v.empty() || v[0] != 't') return false;
  size_t h1 = v.find('#');
  size_t h2 = v.find('#', h1 + 1);
  if (h1 == std::string_view::npos || h2 == std::string_view::npos) {
    return false;
  }
  *t = std::atoi(std::string(v.substr(1, h1 - 1)).c_str());
  *op = std::atoi(std::string(v.substr(h1 + 1, h2 - h1 - 1)).c_str());
  return true;
}

int ThreadOfKey(std::string_view key) {
  size_t p = key.rfind(".t");
  if (p == std::string_view::npos) return -1;
  return std::atoi(std::string(key.substr(p + 2)).c_str());
}

void Apply(const Op& op, State* s) {
  for (const Write& w : op.writes) {
    if (w.is_delete) {
      s->erase(w.key);
    } else {
      (*s)[w.key] = w.value;
    }
  }
}

// Recovered live state per thread.
std::map<int, State> ByThread(const std::vector<PNode>& nodes,
                              const Expectation& e, Verdict* v) {
  std::map<int, State> by_thread;
  ForNewestPerKey(nodes, [&](const PNode& n) {
    if (n.tombstone) return;
    int t = ThreadOfKey(n.key);
    if (t < 0 || t >= static_cast<int>(e.acked.size())) {
      v->Fail("nothing-else", "unknown key " + n.key);
      return;
    }
    by_thread[t][n.key] = n.value;
  });
  return by_thread;
}

// Strong ops only: acked ops present, at most the in-flight one besides.
void CheckAcked(const std::map<int, State>& by_thread, const Expectation& e,
                Verdict* v) {
  for (size_t t = 0; t < e.acked.size(); t++) {
    const auto& pre = (*e.prefixes)[t];
    uint64_t a = std::min<uint64_t>(e.acked[t], pre.size() - 1);
    auto it = by_thread.find(static_cast<int>(t));
    const State got = it == by_thread.end() ? State() : it->second;
    if (got == pre[a]) continue;
    if (a + 1 < pre.size() && got == pre[a + 1]) continue;
    // Classify: an acknowledged write missing vs. something else.
    std::string why = "thread " + std::to_string(t) + " acked " +
                      std::to_string(a) + ": got " + Describe(got) + " want " +
                      Describe(pre[a]);
    bool missing = false;
    for (const auto& kv : pre[a]) {
      auto g = got.find(kv.first);
      if (g == got.end() || g->second != kv.second) {
        // Allowed if the in-flight op changes that key.
        if (a + 1 < pre.size()) {
          auto it2 = pre[a + 1].find(kv.first);
          bool changed = it2 == pre[a + 1].end() || it2->second != kv.second;
          if (changed) continue;
        }
        missing = true;
      }
    }
    v->Fail(missing ? "acked-present" : "all-or-nothing/nothing-else", why);
  }
}

// Strong ops only: what was visible at the crash survives (nothing was
// published before its fence).
void CheckVisible(const std::vector<PNode>& nodes, const Expectation& e,
                  Verdict* v) {
  State got;
  const std::string* last = nullptr;
  for (const PNode& n : nodes) {
    if (n.version > e.visible_version) continue;
    if (last && n.key == *last) continue;  // older version of a seen key
    last = &n.key;
    if (!n.tombstone) got[n.key] = n.value;
  }
  if (got != e.visible) {
    v->Fail("visible-durable", "at visible_version " +
                                   std::to_string(e.visible_version) +
                                   " recovered " + Describe(got) +
                                   " but readers saw " + Describe(e.visible));
  }
}

// Weak ops: a prefix of the commit (version) order, above every floor.
// The cut C is the newest version recovery kept: every op at or below it is
// there, none above. Without GC, C is the newest recovered version c. With
// GC the node that carried C may have been unlinked (an older version, or a
// tombstone with nothing to hide), so C >= c is unknown: the state passes if
// one C >= c explains every thread at once.
void CheckPrefix(const std::vector<PNode>& nodes,
                 const std::map<int, State>& by_thread, const Expectation& e,
                 Verdict* v) {
  const uint64_t c = NewestVersion(nodes);
  constexpr uint64_t kInf = ~uint64_t{0};
  struct Range {
    uint64_t lo, hi;  // C in [lo, hi] explains the thread with j ops
    size_t j;
  };
  std::vector<std::vector<Range>> ok(e.acked.size());
  std::vector<uint64_t> cuts{c};
  for (size_t t = 0; t < e.acked.size(); t++) {
    const auto& pre = (*e.prefixes)[t];
    const auto& ver = (*e.versions)[t];
    const auto& ops = (*e.ops)[t];
    const uint64_t a = std::min<uint64_t>(e.acked[t], ver.size());
    // The op in flight (if any) may be there or not, in any version order
    // with other threads' unacknowledged ops (none was visible).
    const size_t last = a < ver.size() ? a + 1 : a;
    uint64_t floor = t < e.floor.size() ? e.floor[t] : 0;
    for (uint64_t i = 0; i < e.acked[t] && i < ops.size(); i++) {
      if (ops[i].sync) floor = std::max(floor, i + 1);
    }
    auto it = by_thread.find(static_cast<int>(t));
    const State got = it == by_thread.end() ? State() : it->second;
    auto version = [&](size_t i) {  // 0: not acknowledged
      return i < a ? ver[i].load(std::memory_order_acquire) : 0;
    };
    for (size_t i = 0; i < a; i++) {
      if (version(i) == 0) {
        // Without it the bounds below would have a hole: an op of unknown
        // version is skipped for lo and leaves hi open, so non-prefix
        // states would pass (tests/crash/crash_model_test.cc).
        v->Fail("version-recorded", "thread " + std::to_string(t) + " op " +
                                        std::to_string(i) +
                                        ": acknowledged, version not recorded");
        return;
      }
    }
    bool state_seen = false;
    for (size_t j = 0; j <= last && j < pre.size(); j++) {
      if (got != pre[j]) continue;
      state_seen = true;
      if (j < floor) continue;
      // C covers op j-1 (versions increase along a thread) but not op j.
      const size_t applied = std::min<size_t>(j, a);
      uint64_t lo = applied > 0 ? version(applied - 1) : 0;
      uint64_t hi = j < a ? version(j) - 1 : kInf;
      if (lo > hi) continue;
      ok[t].push_back({lo, hi, j});
      cuts.push_back(lo);
    }
    if (ok[t].empty()) {
      v->Fail(state_seen ? "persist-durable" : "prefix",
              "thread " + std::to_string(t) + ": recovered " + Describe(got) +
                  (state_seen ? " is older than its " + std::to_string(floor) +
                                    " durable ops (Persist() returned / sync "
                                    "acked)"
                              : " is no prefix of its " + std::to_string(a) +
                                    " acked ops"));
    }
  }
  if (!v->ok()) return;
  auto explains = [&](uint64_t cut) {
    for (const auto& r : ok) {
      bool any = false;
      for (const Range& x : r) any = any || (x.lo <= cut && cut <= x.hi);
      if (!any) return false;
    }
    return true;
  };
  bool found = false;
  for (uint64_t cut : cuts) {
    if (cut < c || (!e.gc && cut != c)) continue;
    if (explains(cut)) {
      found = true;
      break;
    }
  }
  if (!found) {
    v->Fail("prefix", "no single cut >= " + std::to_string(c) +
                          " of the commit order explains every thread");
  }
}

void CheckVersions(const std::vector<PNode>& nodes, Verdict* v) {
  // Versions follow each thread's program order; a batch has one version.
  std::map<int, std::map<int, std::set<uint64_t>>> versions;  // t -> op
  for (const PNode& n : nodes) {
    int t, op;
    if (!ParseValue(n.value, &t, &op)) {
      v->Fail("nothing-else", "node with foreign value under " + n.key);
      continue;
    }
    versions[t][op].insert(n.version);
  }
  for (const auto& tv : versions) {
    uint64_t prev_max = 0;
    bool have_prev = false;
    for (const auto& ov : tv.second) {
      if (ov.second.size() != 1) {
        v->Fail("version-order", "op " + std::to_string(ov.first) +
                                     " of thread " + std::to_string(tv.first) +
                                     " has several versions");
      }
      if (have_prev && *ov.second.begin() <= prev_max) {
        v->Fail("version-order", "op " + std::to_string(ov.first) +
                                     " of thread " + std::to_string(tv.first) +
                                     " not newer than its predecessor");
      }
      prev_max = *ov.second.rbegin();
      have_prev = true;
    }
  }
}

}  // namespace

std::vector<Op> MakeOps(const CampaignOptions& o, int t) {
  std::mt19937_64 rng(o.seed * 1000003 + t);
  std::mt19937_64 weak_rng(o.seed * 7919 + t);
  std::vector<Op> ops;
  for (int i = 0; i < o.ops_per_thread; i++) {
    Op op;
    uint64_t r = rng() % 100;
    if (r < 50) {
      op.kind = Op::kPut;
      op.writes.push_back({Key(t, static_cast<int>(rng() % o.keys_per_thread)),
                           Value(t, i, 0, &rng), false});
    } else if (r < 65) {
      op.kind = Op::kDelete;
      op.writes.push_back({Key(t, static_cast<int>(rng() % o.keys_per_thread)),
                           Value(t, i, 0, &rng), true});
    } else {
      op.kind = Op::kBatch;
      int n = 2 + static_cast<int>(rng() % 5);
      std::set<int> used;
      for (int k = 0; k < n; k++) {
        int j = static_cast<int>(rng() % o.keys_per_thread);
        if (!used.insert(j).second) continue;
        op.writes.push_back({Key(t, j), Value(t, i, k, &rng), rng() % 4 == 0});
      }
    }
    if (o.weak_fraction > 0) {
      op.sync = std::uniform_real_distribution<double>(0, 1)(weak_rng) >=
                o.weak_fraction;
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

std::vector<State> Prefixes(const std::vector<Op>& ops) {
  std::vector<State> p(1);
  for (const Op& op : ops) {
    p.push_back(p.back());
    Apply(op, &p.back());
  }
  return p;
}

std::string Describe(const State& s) {
  std::string out = "{";
  for (const auto& kv : s) {
    out += kv.first + "=" + kv.second.substr(0, kv.second.find('|')) + " ";
  }
  return out + "}";
}

void Verdict::Fail(const std::string& rule, const std::string& why) {
  if (std::find(rules.begin(), rules.end(), rule) == rules.end()) {
    rules.push_back(rule);
  }
  if (detail.size() < 600) detail += "[" + rule + "] " + why + "; ";
}

uint64_t NewestVersion(const std::vector<PNode>& nodes) {
  uint64_t c = 0;
  for (const PNode& n : nodes) c = std::max(c, n.version);
  return c;
}

// Versions never go back across a crash: the newest recovered version is
// at least that of every op known durable (a sync op that returned, or one
// a completed Persist() covered), since recovery resumes there (V1 in
// memtable/version_gc.h: the GC never takes the newest version).
void CheckVersionFloor(const std::vector<PNode>& nodes, const Expectation& e,
                       Verdict* v) {
  const uint64_t c = NewestVersion(nodes);
  for (size_t t = 0; t < e.acked.size(); t++) {
    const auto& ver = (*e.versions)[t];
    const auto& ops = (*e.ops)[t];
    const uint64_t floor = t < e.floor.size() ? e.floor[t] : 0;
    for (uint64_t i = 0; i < e.acked[t] && i < ver.size(); i++) {
      if (!ops[i].sync && i >= floor) continue;
      const uint64_t vi = ver[i].load(std::memory_order_acquire);
      if (vi > c) {
        v->Fail("version-floor",
                "thread " + std::to_string(t) + " op " + std::to_string(i) +
                    " is durable at version " + std::to_string(vi) +
                    ", newest recovered version " + std::to_string(c));
        return;
      }
    }
  }
}

void CheckRecoveredState(const std::vector<PNode>& nodes, const Expectation& e,
                         Verdict* v) {
  CheckVersionFloor(nodes, e, v);
  std::map<int, State> by_thread = ByThread(nodes, e, v);
  if (e.weak) {
    CheckPrefix(nodes, by_thread, e, v);
  } else {
    CheckAcked(by_thread, e, v);
    if (e.have_visible) CheckVisible(nodes, e, v);
  }
  CheckVersions(nodes, v);
}

}  // namespace crashsim
}  // namespace flintkv

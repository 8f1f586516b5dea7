#include "tests/crash_campaign.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "memtable/coding.h"
#include "memtable/durable_skiplist.h"
#include "memtable/key_comparator.h"
#include "memtable/list_walk.h"
#include "memtable/reclaim.h"
#include "memtable/version_gc.h"
#include "pmem/sim_domain.h"

namespace flintkv {
namespace crashsim {
namespace {

using List = memtable::DurableSkipList<pmem::SimPersist>;
using Gc = memtable::VersionGc<pmem::SimPersist>;
using State = std::map<std::string, std::string>;  // live key -> value

constexpr uint64_t kChunkSize = 16 << 10;

struct Write {
  std::string key;
  std::string value;  // also the tombstone's payload (identifies the op)
  bool is_delete;
};
struct Op {
  enum Kind { kPut, kDelete, kBatch } kind;
  std::vector<Write> writes;
};

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

std::vector<Op> MakeOps(const CampaignOptions& o, int t) {
  std::mt19937_64 rng(o.seed * 1000003 + t);
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
    ops.push_back(std::move(op));
  }
  return ops;
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

// prefix[i] = state of this thread's keys after its first i ops.
std::vector<State> Prefixes(const std::vector<Op>& ops) {
  std::vector<State> p(1);
  for (const Op& op : ops) {
    p.push_back(p.back());
    Apply(op, &p.back());
  }
  return p;
}

Status MakeNode(List* list, const Write& w, pmem::NvmNode** out) {
  size_t klen = memtable::VarintLength(w.key.size()) + w.key.size();
  pmem::NvmNode* node = nullptr;
  Status s = list->AllocateNode(klen + w.value.size(), &node);
  if (!s.ok()) return s;
  char* p = memtable::EncodeVarint32(node->data(),
                                     static_cast<uint32_t>(w.key.size()));
  std::memcpy(p, w.key.data(), w.key.size());
  std::memcpy(p + w.key.size(), w.value.data(), w.value.size());
  List::SealNode(node, static_cast<uint32_t>(klen),
                 w.is_delete ? uint32_t{pmem::kNodeTombstone} : 0u);
  *out = node;
  return Status::OK();
}

Status Execute(List* list, const Op& op) {
  std::vector<pmem::NvmNode*> nodes;
  for (const Write& w : op.writes) {
    pmem::NvmNode* n;
    Status s = MakeNode(list, w, &n);
    if (!s.ok()) return s;
    nodes.push_back(n);
  }
  if (op.kind == Op::kBatch)
    return list->InsertBatch(nodes.data(), nodes.size());
  return list->Insert(nodes[0]);
}

std::string Describe(const State& s) {
  std::string out = "{";
  for (const auto& kv : s) {
    out += kv.first + "=" + kv.second.substr(0, kv.second.find('|')) + " ";
  }
  return out + "}";
}

// What the recovered image must show: per thread, its state after `acked`
// ops (A) or after acked+1 ops (B).
struct Expectation {
  const std::vector<std::vector<State>>* prefixes;  // [thread][i]
  std::vector<uint64_t> acked;
};

struct Verdict {
  std::vector<std::string> rules;  // failed rules
  std::string detail;
  void Fail(const std::string& rule, const std::string& why) {
    if (std::find(rules.begin(), rules.end(), rule) == rules.end()) {
      rules.push_back(rule);
    }
    if (detail.size() < 600) detail += "[" + rule + "] " + why + "; ";
  }
  bool ok() const { return rules.empty(); }
};

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

// Walks the recovered persistent list with every structural check.
Status WalkAll(pmem::SimRegion* r, const memtable::KeyComparator& cmp,
               std::vector<PNode>* out) {
  std::vector<memtable::ChunkRange> chunks;
  for (const auto& c : r->Chunks()) chunks.push_back({c.offset, c.len});
  out->clear();
  return memtable::WalkList(
      *r, r->root(), cmp, &chunks,
      [&](const pmem::NvmNode* n) {
        std::string_view k = memtable::PrefixedKey(n->data());
        out->push_back(
            {std::string(k),
             std::string(n->data() + n->key_size, n->data_size - n->key_size),
             n->version, (n->flags & pmem::kNodeTombstone) != 0});
        return memtable::WalkDecision::kKeep;
      },
      [](uint64_t*) {});
}

void CheckState(const std::vector<PNode>& nodes, const Expectation& e,
                Verdict* v) {
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
  for (size_t t = 0; t < e.acked.size(); t++) {
    const auto& pre = (*e.prefixes)[t];
    uint64_t a = std::min<uint64_t>(e.acked[t], pre.size() - 1);
    const State& got = by_thread[static_cast<int>(t)];
    if (got == pre[a]) continue;
    if (a + 1 < pre.size() && got == pre[a + 1]) continue;
    // Classify: an acknowledged write missing vs. something else.
    std::string why = "thread " + std::to_string(t) + " acked " +
                      std::to_string(a) + ": got " + Describe(got) + " want " +
                      Describe(pre[a]);
    bool missing = false;
    for (const auto& kv : pre[a]) {
      auto it = got.find(kv.first);
      if (it == got.end() || it->second != kv.second) {
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

class Checker {
 public:
  Checker(const CampaignOptions& o, CampaignResult* res) : o_(o), res_(res) {}

  // Recovers `image` in a fresh region at a new address and checks it.
  // depth 0: a workload crash; depth 1: a crash during recovery.
  void Check(const std::vector<char>& image, const Expectation& e,
             const std::string& where, int depth) {
    if (res_->failures >= static_cast<uint64_t>(o_.max_failures)) return;
    res_->states++;
    if (depth > 0) res_->recovery_states++;
    Verdict v;
    std::vector<pmem::CrashState> recovery_crashes;
    RecoverAndCheck(image, e, depth, &v, &recovery_crashes);
    if (!v.ok()) {
      res_->failures++;
      for (const auto& r : v.rules) res_->failed_rules[r]++;
      if (res_->messages.size() < 5) {
        res_->messages.push_back(where + ": " + v.detail);
      }
      return;
    }
    for (size_t i = 0; i < recovery_crashes.size(); i++) {
      ExploreState(recovery_crashes[i], e, where + " / recovery crash", 1);
    }
  }

  // Every distinct image of a captured state.
  void ExploreState(const pmem::CrashState& cs, const Expectation& e,
                    const std::string& where, int depth) {
    if (depth == 0) res_->crash_points++;
    auto subsets =
        o_.durable_only
            ? std::vector<std::vector<bool>>{std::vector<bool>(
                  cs.candidates.size(), false)}
            : pmem::EvictionSubsets(cs.candidates.size(), o_.exhaustive_max,
                                    o_.random_subsets, &rng_);
    std::unordered_set<size_t> seen;
    std::vector<char> image;
    for (const auto& pick : subsets) {
      cs.Build(pick, &image);
      size_t h = std::hash<std::string_view>()(
          std::string_view(image.data(), image.size()));
      if (!seen.insert(h).second) continue;
      std::string subset;
      for (bool b : pick) subset.push_back(b ? '1' : '0');
      Check(image, e,
            where + " fence#" + std::to_string(cs.fence_index) + " (" +
                cs.label + ") evict=" + (subset.empty() ? "-" : subset),
            depth);
    }
  }

 private:
  void RecoverAndCheck(const std::vector<char>& image, const Expectation& e,
                       int depth, Verdict* v,
                       std::vector<pmem::CrashState>* recovery_crashes) {
    // A different base address: persistent pointers are offsets.
    pmem::SimRegion r(image.data(), image.size(), image.size() + (64 << 10));
    if (!r.Valid()) {
      v->Fail("region", "crash image has no valid region header");
      return;
    }
    pmem::SimDomain dom(&r);
    pmem::SimDomain::ScopedThreadOverride scope(&dom);
    bool capture = depth == 0 && o_.crash_recovery;
    if (capture) {
      dom.set_fence_hook([&](pmem::SimDomain* d, uint64_t idx,
                             const std::string& label) {
        recovery_crashes->push_back(d->CaptureLocked(idx, "recovery:" + label));
      });
    }
    memtable::SkipListOptions lo;
    lo.chunk_size = 4096;
    lo.reclaim_space = o_.gc_every > 0;
    List list(&cmp_, &r, r.root(), lo);
    memtable::RecoveryStats rs;
    Status s = list.Recover(&rs);
    dom.set_fence_hook(nullptr);
    if (capture && rs.dropped_uncommitted == 0 && rs.rolled_back_batch == 0) {
      // Nothing was written: crashing this recovery gives the same image.
      recovery_crashes->clear();
    }
    if (!s.ok()) {
      v->Fail("recovery-ok", s.ToString());
      return;
    }
    if (r.root()->batch_mode != 0) {
      v->Fail("batch-mode-cleared", "batch_mode still set after recovery");
    }
    std::vector<PNode> nodes;
    s = WalkAll(&r, cmp_, &nodes);
    if (!s.ok()) {
      v->Fail("well-formed", s.ToString());
      return;
    }
    uint64_t vv = list.VisibleVersion();
    uint64_t max_v = 0;
    for (const PNode& n : nodes) max_v = std::max(max_v, n.version);
    if (vv != max_v || vv == pmem::kUncommittedVersion) {
      v->Fail("visible-version", "visible_version " + std::to_string(vv) +
                                     ", newest recovered node " +
                                     std::to_string(max_v));
    }
    CheckState(nodes, e, v);
    CheckIndex(list, nodes, vv, v);
    Probe(&list, &r, nodes, v);
  }

  // The DRAM index at vv shows the newest live version of every key.
  void CheckIndex(const List& list, const std::vector<PNode>& nodes,
                  uint64_t vv, Verdict* v) {
    State want;
    ForNewestPerKey(nodes, [&](const PNode& n) {
      if (!n.tombstone) want[n.key] = n.value;
    });
    State got;
    List::Iterator it(&list, vv);
    for (it.SeekToFirst(); it.Valid(); it.Next()) {
      const pmem::NvmNode* p = it.node()->pnode;
      got[std::string(memtable::PrefixedKey(it.node()->key()))] =
          std::string(p->data() + p->key_size, p->data_size - p->key_size);
    }
    if (got != want) {
      v->Fail("index-matches-list",
              "index " + Describe(got) + " list " + Describe(want));
    }
  }

  // Post-recovery writes: fresh versions, visible, list stays sorted.
  void Probe(List* list, pmem::SimRegion* r, const std::vector<PNode>& nodes,
             Verdict* v) {
    std::vector<std::string> keys = {"zz.probe"};
    if (!nodes.empty()) keys.push_back(nodes.front().key);
    for (size_t i = 0; i < keys.size(); i++) {
      Write w{keys[i], "probe" + std::to_string(i), false};
      uint64_t before = list->VisibleVersion();
      pmem::NvmNode* n;
      Status s = MakeNode(list, w, &n);
      if (s.ok()) s = list->Insert(n);
      if (!s.ok()) {
        v->Fail("post-recovery-writes", "insert failed: " + s.ToString());
        return;
      }
      std::string pk;
      pk.resize(memtable::VarintLength(w.key.size()));
      memtable::EncodeVarint32(&pk[0], static_cast<uint32_t>(w.key.size()));
      pk += w.key;
      uint64_t after = list->VisibleVersion();
      const memtable::IndexNode* f = list->Find(pk.data(), after);
      bool visible = f && f->pnode == n;
      if (after != before + 1 || after == 0 || !visible) {
        v->Fail("post-recovery-writes",
                "write after recovery: version " + std::to_string(before) +
                    " -> " + std::to_string(after) +
                    (visible ? "" : ", new value not visible"));
        return;
      }
    }
    std::vector<PNode> again;
    Status s = WalkAll(r, cmp_, &again);
    if (!s.ok())
      v->Fail("post-recovery-writes", "list after writes: " + s.ToString());
  }

  const CampaignOptions& o_;
  CampaignResult* res_;
  memtable::BytewiseKeyComparator cmp_;
  std::mt19937_64 rng_{12345};
};

uint64_t RegionSize(const CampaignOptions& o) {
  // Each thread holds a chunk; nodes are < 600 bytes.
  return uint64_t(o.threads) * o.ops_per_thread * 6 * 640 +
         uint64_t(o.threads + 2) * kChunkSize * 2 + (64 << 10);
}

}  // namespace

std::string CampaignResult::Summary() const {
  std::ostringstream os;
  os << "fences=" << fences << " crash_points=" << crash_points
     << " states=" << states << " (recovery crashes " << recovery_states
     << ") failures=" << failures;
  for (const auto& kv : failed_rules)
    os << " [" << kv.first << ":" << kv.second << "]";
  if (gc_unlinked)
    os << " gc_unlinked=" << gc_unlinked << " gc_freed=" << gc_freed;
  return os.str();
}

CampaignResult RunCampaign(const CampaignOptions& o) {
  CampaignResult res;
  Checker checker(o, &res);
  std::vector<std::vector<Op>> ops(o.threads);
  std::vector<std::vector<State>> prefixes(o.threads);
  for (int t = 0; t < o.threads; t++) {
    ops[t] = MakeOps(o, t);
    prefixes[t] = Prefixes(ops[t]);
  }
  pmem::SimRegion region(RegionSize(o), kChunkSize);
  pmem::SimDomain dom(&region);
  pmem::SimDomain::SetGlobal(&dom);
  if (o.threads > 1) dom.set_jitter(o.jitter_one_in, o.jitter_micros);
  memtable::BytewiseKeyComparator cmp;
  memtable::SkipListOptions lo;
  lo.chunk_size = kChunkSize;
  lo.reclaim_space = o.gc_every > 0;
  auto list = std::make_unique<List>(&cmp, &region, region.root(), lo);
  memtable::Reclaimer reclaimer(list->visible_version_word());
  // A few nodes per lock hold: more GC fences, more crash points.
  auto gc = o.gc_every > 0 ? std::make_unique<Gc>(list.get(), &reclaimer, 8)
                           : nullptr;

  std::vector<std::atomic<uint64_t>> acked(o.threads);
  for (auto& a : acked) a.store(0);
  std::vector<pmem::CrashState> captured;
  std::mt19937_64 rng(o.seed ^ 0x5eed);
  const bool single = o.threads == 1;

  dom.set_fence_hook(
      [&](pmem::SimDomain* d, uint64_t idx, const std::string& label) {
        if (!single && std::uniform_real_distribution<double>(0, 1)(rng) >=
                           o.capture_probability) {
          return;
        }
        pmem::CrashState cs = d->CaptureLocked(idx, label);
        for (auto& a : acked)
          cs.acked.push_back(a.load(std::memory_order_acquire));
        if (single) {
          // The workload is paused inside this fence: check right away.
          Expectation e{&prefixes, cs.acked};
          checker.ExploreState(cs, e, "st", 0);
        } else {
          captured.push_back(std::move(cs));
        }
      });

  std::atomic<bool> failed{false};
  std::string error;
  std::mutex error_mu;
  auto worker = [&](int t) {
    pmem::SimDomain::ScopedThreadOverride scope(&dom);
    for (size_t i = 0; i < ops[t].size(); i++) {
      if (single && gc && i % o.gc_every == 0) gc->RunPass();
      Status s;
      {
        memtable::Reclaimer::Guard guard(&reclaimer, false);
        s = Execute(list.get(), ops[t][i]);
      }
      if (!s.ok()) {
        std::lock_guard<std::mutex> g(error_mu);
        error = s.ToString();
        failed = true;
        return;
      }
      acked[t].store(i + 1, std::memory_order_release);
    }
  };
  if (single) {
    worker(0);
    if (gc) gc->RunPass();
  } else {
    std::atomic<int> running{o.threads};
    std::thread collector;
    if (gc) {
      collector = std::thread([&] {
        pmem::SimDomain::ScopedThreadOverride scope(&dom);
        while (running.load() > 0) {
          gc->RunPass();
          std::this_thread::yield();
        }
        gc->RunPass();
      });
    }
    std::vector<std::thread> th;
    for (int t = 0; t < o.threads; t++) {
      th.emplace_back([&, t] {
        worker(t);
        running.fetch_sub(1);
      });
    }
    for (auto& x : th) x.join();
    if (collector.joinable()) collector.join();
  }
  dom.set_fence_hook(nullptr);
  res.fences = dom.fences();
  if (failed) {
    res.failures++;
    res.failed_rules["workload"]++;
    res.messages.push_back("workload failed: " + error);
  }
  for (const pmem::CrashState& cs : captured) {
    Expectation e{&prefixes, cs.acked};
    checker.ExploreState(cs, e, "mt", 0);
  }
  // The final state (no crash) must check too.
  {
    pmem::CrashState fin = dom.Capture("end");
    for (auto& a : acked) fin.acked.push_back(a.load());
    Expectation e{&prefixes, fin.acked};
    checker.ExploreState(fin, e, "final", 0);
  }
  if (gc) {
    res.gc_unlinked = gc->Stats().unlinked;
    res.gc_freed = gc->Stats().freed;
    gc.reset();  // frees what it retired into the list's arena
  }
  list.reset();
  pmem::SimDomain::SetGlobal(nullptr);
  return res;
}

}  // namespace crashsim
}  // namespace flintkv

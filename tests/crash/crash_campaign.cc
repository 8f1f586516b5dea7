#include "tests/crash/crash_campaign.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
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
#include "tests/crash/crash_model.h"
#include "tests/crash/sim_domain.h"
#include "tests/util/node_builder.h"

namespace flintkv {
namespace crashsim {
namespace {

using List = memtable::DurableSkipList<pmem::SimPersist>;
using Gc = memtable::VersionGc<pmem::SimPersist>;

constexpr uint64_t kChunkSize = 16 << 10;

Status MakeNode(List* list, const Write& w, pmem::NvmNode** out) {
  return test::BuildNode(list, w.key, w.value,
                         w.is_delete ? uint32_t{pmem::kNodeTombstone} : 0u,
                         out);
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
    return list->InsertBatch(nodes.data(), nodes.size(), op.sync);
  return list->Insert(nodes[0], nullptr, op.sync);
}

// The state readers see at version vv (newest version per key, tombstones
// hidden), read from the live list's index.
State VisibleState(const List& list, uint64_t vv) {
  State st;
  List::Iterator it(&list, vv);
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    const pmem::NvmNode* p = it.node()->pnode;
    st[std::string(memtable::PrefixedKey(it.node()->key()))] =
        std::string(p->data() + p->key_size, p->data_size - p->key_size);
  }
  return st;
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
    if (capture && rs.dropped_uncommitted == 0 && rs.rolled_back_batch == 0 &&
        rs.dropped_unpersisted == 0) {
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
    const uint64_t max_v = NewestVersion(nodes);
    if (vv != max_v || vv == pmem::kUncommittedVersion) {
      v->Fail("visible-version", "visible_version " + std::to_string(vv) +
                                     ", newest recovered node " +
                                     std::to_string(max_v));
    }
    CheckRecoveredState(nodes, e, v);
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
    State got = VisibleState(list, vv);
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
      const std::string pk = test::PrefixKey(w.key);
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

namespace {

// Round barrier for lockstep campaigns; on_complete runs in the last thread
// to arrive, before anyone is released.
class RoundBarrier {
 public:
  explicit RoundBarrier(int n) : n_(n) {}
  template <class Fn>
  void Arrive(Fn on_complete) {
    std::unique_lock<std::mutex> l(mu_);
    uint64_t gen = gen_;
    if (++count_ == n_) {
      on_complete();
      count_ = 0;
      gen_++;
      cv_.notify_all();
      return;
    }
    cv_.wait(l, [&] { return gen_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0;
  uint64_t gen_ = 0;
};

}  // namespace

CampaignResult RunCampaign(const CampaignOptions& o) {
  CampaignResult res;
  Checker checker(o, &res);
  std::vector<std::vector<Op>> ops(o.threads);
  std::vector<std::vector<State>> prefixes(o.threads);
  std::vector<std::vector<std::atomic<uint64_t>>> versions(o.threads);
  for (int t = 0; t < o.threads; t++) {
    ops[t] = MakeOps(o, t);
    prefixes[t] = Prefixes(ops[t]);
    versions[t] = std::vector<std::atomic<uint64_t>>(ops[t].size());
  }
  const bool weak = o.weak_fraction > 0;
  pmem::SimRegion region(RegionSize(o), kChunkSize);
  pmem::SimDomain dom(&region);
  pmem::SimDomain::SetGlobal(&dom);
  if (o.threads > 1 && !o.lockstep && !o.turns) {
    dom.set_jitter(o.jitter_one_in, o.jitter_micros);
  }
  memtable::BytewiseKeyComparator cmp;
  memtable::SkipListOptions lo;
  lo.chunk_size = kChunkSize;
  if (o.group_commit)
    lo.commit_mode = memtable::SkipListOptions::CommitMode::kGroup;
  lo.reclaim_space = o.gc_every > 0;
  if (o.max_unpersisted_writes > 0) {
    lo.max_unpersisted_writes = o.max_unpersisted_writes;
  }
  auto list = std::make_unique<List>(&cmp, &region, region.root(), lo);
  memtable::Reclaimer reclaimer(list->visible_version_word());
  // A few nodes per lock hold: more GC fences, more crash points.
  auto gc = o.gc_every > 0 ? std::make_unique<Gc>(list.get(), &reclaimer, 8)
                           : nullptr;

  std::vector<std::atomic<uint64_t>> acked(o.threads);
  for (auto& a : acked) a.store(0);
  // Ops made durable by completed Persist() calls (guarded by floor_mu).
  std::vector<uint64_t> floor(o.threads, 0);
  std::mutex floor_mu;
  struct Captured {
    pmem::CrashState cs;
    Expectation e;
  };
  std::vector<Captured> captured;
  std::mt19937_64 rng(o.seed ^ 0x5eed);
  const bool inline_check = o.threads == 1 || o.lockstep || o.turns;

  auto expect_now = [&](pmem::CrashState* cs) {
    Expectation e;
    e.prefixes = &prefixes;
    e.ops = &ops;
    e.versions = &versions;
    e.weak = weak;
    e.gc = o.gc_every > 0;
    for (auto& a : acked) e.acked.push_back(a.load(std::memory_order_acquire));
    {
      std::lock_guard<std::mutex> g(floor_mu);
      e.floor = floor;
    }
    if (!weak) {
      e.have_visible = true;
      e.visible_version = list->VisibleVersion();
      e.visible = VisibleState(*list, e.visible_version);
    }
    cs->acked = e.acked;
    return e;
  };
  dom.set_fence_hook([&](pmem::SimDomain* d, uint64_t idx,
                         const std::string& label) {
    if (!inline_check && std::uniform_real_distribution<double>(0, 1)(rng) >=
                             o.capture_probability) {
      return;
    }
    pmem::CrashState cs = d->CaptureLocked(idx, label);
    Expectation e = expect_now(&cs);
    if (inline_check) {
      // The workload is paused inside this fence: check right away.
      checker.ExploreState(cs, e,
                           o.lockstep ? "ls"
                           : o.turns  ? "turns"
                                      : "st",
                           0);
    } else {
      captured.push_back({std::move(cs), std::move(e)});
    }
  });

  // Lockstep: the first pass of each round waits (bounded) for every
  // thread's advertisement of the round.
  RoundBarrier barrier(o.threads);
  std::atomic<uint64_t> round_base{0};
  std::atomic<bool> round_waited{false};
  if (o.lockstep) {
    dom.set_pass_hook([&] {
      if (round_waited.exchange(true)) return;
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (dom.advertisements() - round_base.load() <
                 static_cast<uint64_t>(o.threads) &&
             std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
    });
  }

  std::atomic<bool> failed{false};
  std::atomic<uint64_t> persists{0};
  std::string error;
  std::mutex error_mu;
  // Turns: op i of thread t runs when turn == i * threads + t.
  std::mutex turn_mu;
  std::condition_variable turn_cv;
  uint64_t turn = 0;
  auto wait_turn = [&](int t, size_t i) {
    std::unique_lock<std::mutex> l(turn_mu);
    turn_cv.wait(l, [&] { return failed || turn == i * o.threads + t; });
  };
  auto next_turn = [&] {
    std::lock_guard<std::mutex> l(turn_mu);
    turn++;
    turn_cv.notify_all();
  };
  auto worker = [&](int t) {
    pmem::SimDomain::ScopedThreadOverride scope(&dom);
    for (size_t i = 0; i < ops[t].size(); i++) {
      if (o.turns) wait_turn(t, i);
      if (o.lockstep) {
        barrier.Arrive([&] {
          round_base.store(dom.advertisements());
          round_waited.store(false);
        });
      }
      if (o.threads == 1 && gc && i % o.gc_every == 0) gc->RunPass();
      const Op& op = ops[t][i];
      // A read guard: it announces a version older than the op's, so the
      // GC thread cannot collect the op's node (e.g. a tombstone, newest
      // of its key) before the lookup below records the op's version.
      memtable::Reclaimer::Guard guard(&reclaimer, true);
      Status s = Execute(list.get(), op);
      // The op's version: its first key's newest node (keys are per thread).
      const std::string pk = test::PrefixKey(op.writes[0].key);
      const memtable::IndexNode* f =
          s.ok() ? list->Find(pk.data(), list->VisibleVersion()) : nullptr;
      if (s.ok() && !f) s = Status::Corruption("op's node not found");
      if (!s.ok()) {
        std::lock_guard<std::mutex> g(error_mu);
        error = "thread " + std::to_string(t) + " op " + std::to_string(i) +
                ": " + s.ToString();
        failed = true;
        if (o.turns) next_turn();  // wakes the others (they see failed)
        return;
      }
      versions[t][i].store(f->Version(), std::memory_order_release);
      acked[t].store(i + 1, std::memory_order_release);
      if (o.persist_every > 0 && (i + 1) % o.persist_every == 0) {
        std::vector<uint64_t> snap;
        for (auto& a : acked) snap.push_back(a.load(std::memory_order_acquire));
        list->Persist();
        persists.fetch_add(1);
        std::lock_guard<std::mutex> g(floor_mu);
        for (int u = 0; u < o.threads; u++) {
          floor[u] = std::max(floor[u], snap[u]);
        }
      }
      if (o.turns) next_turn();
    }
  };
  if (o.threads == 1) {
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
  dom.set_pass_hook(nullptr);
  res.fences = dom.fences();
  res.persists = persists.load();
  memtable::WriteStats ws = list->GetWriteStats();
  res.passes = ws.passes;
  res.ads_served = ws.ads_served;
  res.advertisements = dom.advertisements();
  if (failed) {
    res.failures++;
    res.failed_rules["workload"]++;
    res.messages.push_back("workload failed: " + error);
  }
  for (const Captured& c : captured) {
    checker.ExploreState(c.cs, c.e, "mt", 0);
  }
  // The final state (no crash) must check too.
  {
    pmem::CrashState fin = dom.Capture("end");
    Expectation e = expect_now(&fin);
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

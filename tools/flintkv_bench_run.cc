#include "tools/flintkv_bench_run.h"

#include <gflags/gflags.h>
#include <libpmemobj.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/options.h"
#include "memtable/coding.h"
#include "memtable/key_comparator.h"
#include "memtable/list_walk.h"
#include "memtable/thread_id.h"
#include "pmem/persist.h"
#include "pmem/pool.h"
#include "tools/baselines/baseline_bench.h"
#include "tools/bench_policies.h"
#include "tools/bench_util.h"

DECLARE_int32(key_size);
DECLARE_int32(value_size);
DECLARE_string(key_format);
DECLARE_string(pool_dir);
DECLARE_int32(batch_size);
DECLARE_uint64(seed);
DECLARE_string(verify);
DECLARE_int32(verify_samples);
DECLARE_uint64(chunk_size);
DECLARE_uint32(persist_interval_us);

namespace flintkv {
namespace bench {
namespace {

using memtable::BytewiseKeyComparator;
using memtable::DurableSkipList;
using memtable::IndexNode;
using memtable::SkipListOptions;
using Clock = std::chrono::steady_clock;

// A bijection on [0, 2^54): xorshift and odd multiplications mod 2^54.
constexpr uint64_t kMask54 = (uint64_t{1} << 54) - 1;
uint64_t Permute54(uint64_t x, uint64_t seed) {
  x = (x ^ seed) & kMask54;
  x ^= x >> 27;
  x = (x * 0x3c79ac492ba7b653ull) & kMask54;
  x ^= x >> 25;
  x = (x * 0x1c69b3f74ac4ae35ull) & kMask54;
  x ^= x >> 29;
  return x;
}

// Distinct indexes map to distinct values in [0, 10^16) (cycle walking keeps
// the restriction of a bijection to a subset a bijection).
uint64_t KeyNumber(uint64_t index, uint64_t seed) {
  constexpr uint64_t kLimit = 10000000000000000ull;  // 10^16
  uint64_t x = Permute54(index, seed);
  while (x >= kLimit) x = Permute54(x, seed);
  return x;
}

// Writes key number `index` into dst[0, key_size).
void MakeKey(uint64_t index, char* dst) {
  const size_t ks = static_cast<size_t>(FLAGS_key_size);
  uint64_t n = KeyNumber(index, FLAGS_seed);
  if (FLAGS_key_format == "bytes") {
    // Big-endian number first (distinct), then pseudo-random filler.
    uint64_t fill = n * 0x9e3779b97f4a7c15ull + FLAGS_seed;
    for (size_t i = 0; i < ks; i++) {
      if (i < 8) {
        dst[i] = static_cast<char>(n >> (56 - 8 * i));
      } else {
        fill ^= fill >> 31;
        fill *= 0xbf58476d1ce4e5b9ull;
        dst[i] = static_cast<char>(fill >> 56);
      }
    }
    return;
  }
  // Fixed-width decimal, zero-padded on the left; keys shorter than 16
  // digits keep the low digits (duplicates become possible).
  for (size_t i = ks; i-- > 0;) {
    dst[i] = static_cast<char>('0' + n % 10);
    n /= 10;
  }
}

// Start barrier: every worker checks in, then the main thread opens the gate
// and reads the start time. Waiters yield, so oversubscribed runs still
// start promptly.
struct StartGate {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
};

std::string g_pool_notice;  // the pool's one-line "emulated PMEM" notice

template <class P>
RunResult RunOnce(const std::string& impl, const SkipListOptions& list_options,
                  bool weak, uint64_t num, int threads, int run_id) {
  const size_t ks = static_cast<size_t>(FLAGS_key_size);
  const size_t vs = static_cast<size_t>(FLAGS_value_size);
  const size_t klen = memtable::VarintLength(ks) + ks;
  const size_t node_bytes = pmem::NvmNode::AllocSize(klen + vs);

  PoolOptions po;
  po.path = FLAGS_pool_dir + "/flintkv_bench_" + std::to_string(getpid()) +
            "_" + std::to_string(run_id) + ".pool";
  po.chunk_size = FLAGS_chunk_size;
  // Nodes, one partly used chunk per writer, and pmemobj metadata.
  po.size = num * node_bytes + num * node_bytes / 8 +
            (threads + 2) * 2 * FLAGS_chunk_size + (64ull << 20);
  po.size = std::max<uint64_t>(po.size, PMEMOBJ_MIN_POOL);
  po.info_log = [](const std::string& m) {
    if (g_pool_notice.empty()) g_pool_notice = m;
  };
  unlink(po.path.c_str());

  RunResult result;
  {
    std::unique_ptr<pmem::Pool> pool;
    Check(pmem::Pool::Open(po, &pool), "open pool " + po.path);
    pmem::ListRoot* root = nullptr;
    Check(pool->CreateList(pmem::kListStandalone, &root), "create list");
    BytewiseKeyComparator cmp;
    SkipListOptions lo = list_options;
    lo.chunk_size = FLAGS_chunk_size;
    auto list =
        std::make_unique<DurableSkipList<P>>(&cmp, pool.get(), root, lo);

    // Keys and latencies are laid out per thread, generated before the
    // barrier by the thread that uses them.
    std::vector<uint64_t> begin(threads + 1);
    for (int t = 0; t <= threads; t++) begin[t] = num * t / threads;
    std::vector<std::vector<char>> keys(threads);
    std::vector<std::vector<uint32_t>> lat(threads);
    std::vector<char> value(vs);
    for (size_t i = 0; i < vs; i++) {
      value[i] = static_cast<char>('a' + (i * 7 + FLAGS_seed) % 26);
    }
    StartGate gate;
    std::atomic<bool> failed{false};
    std::string failure;
    std::mutex failure_mu;

    auto worker = [&](int t) {
      const uint64_t n = begin[t + 1] - begin[t];
      std::vector<char>& k = keys[t];
      k.resize(n * ks);
      for (uint64_t i = 0; i < n; i++) MakeKey(begin[t] + i, &k[i * ks]);
      const uint64_t bs = FLAGS_batch_size > 0 ? FLAGS_batch_size : 1;
      // Touched now so that the timed loop takes no page faults here.
      std::vector<uint32_t>& l = lat[t];
      l.assign((n + bs - 1) / bs, 0);
      size_t calls = 0;
      std::vector<pmem::NvmNode*> batch;
      batch.reserve(bs);
      memtable::ThreadId::Get();  // not timed
      gate.ready.fetch_add(1);
      while (!gate.go.load(std::memory_order_acquire)) sched_yield();

      auto make_node = [&](uint64_t i) -> pmem::NvmNode* {
        pmem::NvmNode* node = nullptr;
        Status s = list->AllocateNode(klen + vs, &node);
        if (!s.ok()) {
          std::lock_guard<std::mutex> g(failure_mu);
          failure = "AllocateNode: " + s.ToString();
          failed = true;
          return nullptr;
        }
        char* p =
            memtable::EncodeVarint32(node->data(), static_cast<uint32_t>(ks));
        std::memcpy(p, &k[i * ks], ks);
        std::memcpy(p + ks, value.data(), vs);
        DurableSkipList<P>::SealNode(node, static_cast<uint32_t>(klen), 0);
        return node;
      };

      Clock::time_point prev = Clock::now();
      for (uint64_t i = 0; i < n && !failed.load(std::memory_order_relaxed);) {
        Status s;
        if (FLAGS_batch_size <= 0) {
          pmem::NvmNode* node = make_node(i);
          if (!node) break;
          s = list->Insert(node, nullptr, !weak);
          i++;
        } else {
          batch.clear();
          for (uint64_t e = std::min(n, i + bs); i < e; i++) {
            pmem::NvmNode* node = make_node(i);
            if (!node) break;
            batch.push_back(node);
          }
          if (failed.load()) break;
          s = list->InsertBatch(batch.data(), batch.size(), !weak);
        }
        l[calls++] = LapNs(&prev);
        if (!s.ok()) {
          std::lock_guard<std::mutex> g(failure_mu);
          failure = "Insert: " + s.ToString();
          failed = true;
        }
      }
      l.resize(calls);
    };

    std::vector<std::thread> workers;
    for (int t = 0; t < threads; t++) workers.emplace_back(worker, t);
    while (gate.ready.load() < threads) sched_yield();
    // Weak mode: the background persistence bound (as Store's).
    std::atomic<bool> stop_persister{false};
    std::thread persister;
    if (weak) {
      persister = std::thread([&] {
        while (!stop_persister.load(std::memory_order_relaxed)) {
          std::this_thread::sleep_for(
              std::chrono::microseconds(FLAGS_persist_interval_us));
          if (list->HasUnpersisted()) list->Persist();
        }
      });
    }
    double cpu0 = ProcessCpuSeconds();
    Clock::time_point start = Clock::now();
    gate.go.store(true, std::memory_order_release);
    for (auto& w : workers) w.join();
    if (weak) {
      list->Persist();  // every write durable before the clock stops
      stop_persister = true;
      persister.join();
    }
    Clock::time_point end = Clock::now();
    result.stats = list->GetWriteStats();
    double cpu1 = ProcessCpuSeconds();
    if (failed) Die(impl + ": run failed: " + failure);

    result.seconds = std::chrono::duration<double>(end - start).count();
    result.ops_per_sec = static_cast<double>(num) / result.seconds;
    result.cpus = (cpu1 - cpu0) / result.seconds;
    std::vector<uint32_t> all;
    for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
    result.p50_us = PercentileUs(&all, 0.50);
    result.p99_us = PercentileUs(&all, 0.99);

    // ---- Verification (not timed) ----
    auto fail = [&](const std::string& what) {
      Die(impl + " threads=" + std::to_string(threads) +
          " num=" + std::to_string(num) + ": VERIFY FAILED: " + what);
    };
    if (list->NumEntries() != num) {
      fail("NumEntries " + std::to_string(list->NumEntries()) +
           " != " + std::to_string(num));
    }
    const uint64_t vv = list->VisibleVersion();
    const uint64_t want_vv =
        FLAGS_batch_size > 0
            ? [&] {
                uint64_t b = 0;
                for (int t = 0; t < threads; t++) {
                  uint64_t n = begin[t + 1] - begin[t];
                  b += (n + FLAGS_batch_size - 1) / FLAGS_batch_size;
                }
                return b;
              }()
            : num;
    if (vv != want_vv) {
      fail("visible_version " + std::to_string(vv) +
           " != " + std::to_string(want_vv) + " (one per Put / WriteBatch)");
    }
    if (FLAGS_verify == "full") {
      // DRAM level 0: every entry, in order (Iterator skips nothing here:
      // keys are distinct and there are no tombstones).
      uint64_t count = 0;
      typename DurableSkipList<P>::Iterator it(list.get(), vv);
      std::string last;
      for (it.SeekToFirst(); it.Valid(); it.Next()) {
        std::string_view key = memtable::PrefixedKey(it.node()->key());
        if (count > 0 && !(last < key)) fail("DRAM list out of order");
        last.assign(key);
        count++;
      }
      if (count != num && ks >= 16) {
        fail("DRAM walk found " + std::to_string(count) + " keys, want " +
             std::to_string(num));
      }
      // PMEM list: validated walk from the persistent head (P2).
      uint64_t pcount = 0;
      Status s = memtable::WalkList(
          *pool, root, cmp, nullptr,
          [&](const pmem::NvmNode* n) {
            if (n->version == pmem::kUncommittedVersion) {
              fail("persistent node still has version MAX");
            }
            pcount++;
            return memtable::WalkDecision::kKeep;
          },
          [](uint64_t*) {});
      if (!s.ok()) fail("PMEM walk: " + s.ToString());
      if (pcount != num) {
        fail("PMEM walk found " + std::to_string(pcount) + " nodes, want " +
             std::to_string(num));
      }
    }
    // Sampled lookups with value check.
    std::vector<char> pk(klen);
    int samples = std::max(1, FLAGS_verify_samples);
    for (int j = 0; j < samples; j++) {
      uint64_t idx = (num * static_cast<uint64_t>(j)) / samples +
                     (j * 7919u) % std::max<uint64_t>(1, num / samples);
      idx = std::min(idx, num - 1);
      char* p = memtable::EncodeVarint32(pk.data(), static_cast<uint32_t>(ks));
      MakeKey(idx, p);
      const IndexNode* n = list->Find(pk.data(), vv);
      if (!n) fail("key #" + std::to_string(idx) + " not found");
      const pmem::NvmNode* pn = n->pnode;
      if (pn->data_size != klen + vs ||
          std::memcmp(pn->data() + klen, value.data(), vs) != 0) {
        fail("key #" + std::to_string(idx) + " has a wrong value");
      }
    }
    list.reset();
    pool.reset();
  }
  unlink(po.path.c_str());
  return result;
}

}  // namespace

const std::string& PoolNotice() { return g_pool_notice; }

#ifdef FLINTKV_BENCH_PROBES
namespace {

// Splits "base~probe~..." (tools/bench_policies.h); false if impl is not a
// probe name.
bool ParseProbe(const std::string& impl, std::string* base, uint32_t* mask,
                bool* stats) {
  size_t at = impl.find('~');
  if (at == std::string::npos) return false;
  *base = impl.substr(0, at);
  if (*base != "flintkv" && *base != "volatile") return false;
  *mask = 0;
  *stats = true;
  while (at != std::string::npos) {
    size_t next = impl.find('~', at + 1);
    std::string p = impl.substr(
        at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (p == "nolink") {
      *mask |= static_cast<uint32_t>(memtable::MeasureProbe::kNoLinkStore);
    } else if (p == "nocombine") {
      *mask |= static_cast<uint32_t>(memtable::MeasureProbe::kNoCombining);
    } else if (p == "nonodepersist") {
      *mask |= static_cast<uint32_t>(memtable::MeasureProbe::kNoNodePersist);
    } else if (p == "nostats") {
      *stats = false;
    } else {
      return false;
    }
    at = next;
  }
  return true;
}

constexpr uint32_t kAllProbes =
    static_cast<uint32_t>(memtable::MeasureProbe::kNoLinkStore) |
    static_cast<uint32_t>(memtable::MeasureProbe::kNoCombining) |
    static_cast<uint32_t>(memtable::MeasureProbe::kNoNodePersist);

// One list type per probe mask: mask M runs Probed<Base, M>.
template <class Base, uint32_t M = 0>
RunResult RunProbed(const Config& c, SkipListOptions lo, uint32_t mask,
                    int run_id) {
  if constexpr (M > kAllProbes) {
    Die(c.impl + ": unknown probe mask");
  } else {
    if (mask == M) {
      return RunOnce<Probed<Base, M>>(c.impl, lo, false, c.num, c.threads,
                                      run_id);
    }
    return RunProbed<Base, M + 1>(c, lo, mask, run_id);
  }
}

}  // namespace

bool IsProbeImpl(const std::string& impl) {
  std::string base;
  uint32_t mask;
  bool stats;
  return ParseProbe(impl, &base, &mask, &stats);
}
#else
bool IsProbeImpl(const std::string&) { return false; }
#endif

RunResult RunImpl(const Config& c, int run_id) {
  if (IsBaseline(c.impl)) {
    BaselineConfig bc;
    bc.impl = c.impl;
    bc.num = c.num;
    bc.threads = c.threads;
    bc.key_size = static_cast<size_t>(FLAGS_key_size);
    bc.value_size = static_cast<size_t>(FLAGS_value_size);
    bc.batch_size = FLAGS_batch_size;
    bc.pool_path = FLAGS_pool_dir + "/flintkv_bench_" +
                   std::to_string(getpid()) + "_" + std::to_string(run_id) +
                   ".pool";
    bc.chunk_size = FLAGS_chunk_size;
    bc.full_verify = FLAGS_verify == "full";
    bc.verify_samples = FLAGS_verify_samples;
    bc.make_key = MakeKey;
    bc.info_log = [](const std::string& m) {
      if (g_pool_notice.empty()) g_pool_notice = m;
    };
    BaselineResult br;
    Check(RunBaseline(bc, &br), c.impl + " run");
    RunResult r;
    r.seconds = br.seconds;
    r.ops_per_sec = br.ops_per_sec;
    r.p50_us = br.p50_us;
    r.p99_us = br.p99_us;
    r.cpus = br.cpus;
    return r;
  }
  SkipListOptions lo;
#ifdef FLINTKV_BENCH_PROBES
  {
    std::string base;
    uint32_t mask;
    bool stats;
    if (ParseProbe(c.impl, &base, &mask, &stats)) {
      lo.write_stats = stats;
      return base == "flintkv"
                 ? RunProbed<pmem::PmemPersist>(c, lo, mask, run_id)
                 : RunProbed<pmem::NoPersist>(c, lo, mask, run_id);
    }
  }
#endif
  if (c.impl == "flintkv" || c.impl == "flintkv-weak") {
    return RunOnce<pmem::PmemPersist>(c.impl, lo, c.impl == "flintkv-weak",
                                      c.num, c.threads, run_id);
  }
  if (c.impl == "flintkv-group") {
    lo.commit_mode = SkipListOptions::CommitMode::kGroup;
    return RunOnce<pmem::PmemPersist>(c.impl, lo, false, c.num, c.threads,
                                      run_id);
  }
  if (c.impl == "volatile") {
    return RunOnce<pmem::NoPersist>(c.impl, lo, false, c.num, c.threads,
                                    run_id);
  }
  return RunOnce<GlobalLockBaseline<pmem::PmemPersist>>(
      c.impl, lo, false, c.num, c.threads, run_id);
}

}  // namespace bench
}  // namespace flintkv

// fillrandom runs of the baselines for flintkv_bench; see baseline_bench.h.
#include "tools/baselines/baseline_bench.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "memtable/coding.h"
#include "memtable/key_comparator.h"
#include "pmem/persist.h"
#include "pmem/pool.h"
#include "tools/baselines/listdb_sync.h"
#include "tools/baselines/pmem_rocksdb.h"
#include "tools/bench_util.h"

namespace flintkv {
namespace bench {
namespace {

using baselines::ListDbSync;
using baselines::PmemRocksDbStaging;
using memtable::IndexNode;
using Clock = std::chrono::steady_clock;

// The timed part: threads split the keys evenly, start on a barrier, and
// each call's latency is recorded. write(keys, values, n) is one Put (n = 1)
// or one WriteBatch.
template <class WriteFn>
Status TimedRun(const BaselineConfig& c, const std::string& value,
                WriteFn write, BaselineResult* out) {
  const int threads = c.threads;
  const size_t ks = c.key_size;
  const uint64_t bs = c.batch_size > 0 ? c.batch_size : 1;
  std::vector<uint64_t> begin(threads + 1);
  for (int t = 0; t <= threads; t++) begin[t] = c.num * t / threads;
  std::vector<std::vector<uint32_t>> lat(threads);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status failure;
  auto worker = [&](int t) {
    const uint64_t n = begin[t + 1] - begin[t];
    std::vector<char> k(n * ks);
    for (uint64_t i = 0; i < n; i++) c.make_key(begin[t] + i, &k[i * ks]);
    std::vector<uint32_t>& l = lat[t];
    l.assign((n + bs - 1) / bs, 0);
    std::vector<std::string_view> keys(bs), values(bs, value);
    size_t calls = 0;
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) sched_yield();
    Clock::time_point prev = Clock::now();
    for (uint64_t i = 0; i < n && !failed.load(std::memory_order_relaxed);) {
      size_t m = 0;
      for (; m < bs && i < n; m++, i++) keys[m] = {&k[i * ks], ks};
      Status s = write(keys.data(), values.data(), m);
      l[calls++] = LapNs(&prev);
      if (!s.ok()) {
        std::lock_guard<std::mutex> g(mu);
        failure = s;
        failed = true;
      }
    }
    l.resize(calls);
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; t++) workers.emplace_back(worker, t);
  while (ready.load() < threads) sched_yield();
  double cpu0 = ProcessCpuSeconds();
  Clock::time_point start = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& w : workers) w.join();
  Clock::time_point end = Clock::now();
  double cpu1 = ProcessCpuSeconds();
  if (failed) return failure;
  out->seconds = std::chrono::duration<double>(end - start).count();
  out->ops_per_sec = static_cast<double>(c.num) / out->seconds;
  out->cpus = (cpu1 - cpu0) / out->seconds;
  std::vector<uint32_t> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  out->p50_us = PercentileUs(&all, 0.50);
  out->p99_us = PercentileUs(&all, 0.99);
  return Status::OK();
}

// Index walk, sampled lookups, and recovery's log scan (see the header).
// scan(fn) calls fn(record) for every record recovery would replay.
template <class ScanFn>
Status Verify(const BaselineConfig& c, const baselines::ConcurrentIndex& index,
              const std::string& value, ScanFn scan) {
  const std::string what = c.impl + " threads=" + std::to_string(c.threads) +
                           " num=" + std::to_string(c.num) + ": ";
  auto fail = [&](const std::string& m) {
    return Status::Corruption("VERIFY FAILED: " + what + m);
  };
  memtable::BytewiseKeyComparator cmp;
  const size_t ks = c.key_size;
  if (c.full_verify) {
    uint64_t count = 0;
    const IndexNode* last = nullptr;
    for (const IndexNode* n = index.First(); n; n = n->Next(0), count++) {
      if (last && cmp.Compare(last->key(), n->key()) >= 0) {
        return fail("DRAM index out of order or has a key twice");
      }
      last = n;
    }
    if (count != c.num) {
      return fail("DRAM index holds " + std::to_string(count) + " keys, want " +
                  std::to_string(c.num));
    }
  }
  std::vector<char> pk(memtable::kMaxVarint32Bytes + ks);
  const uint64_t samples = std::max(1, c.verify_samples);
  for (uint64_t j = 0; j < samples; j++) {
    uint64_t idx = std::min(
        c.num - 1, (c.num * j) / samples +
                       (j * 7919u) % std::max<uint64_t>(1, c.num / samples));
    char* p = memtable::EncodeVarint32(pk.data(), static_cast<uint32_t>(ks));
    c.make_key(idx, p);
    const IndexNode* n = index.Find(pk.data());
    if (!n) return fail("key #" + std::to_string(idx) + " not found");
    const pmem::NvmNode* r = n->pnode;
    if (r->data_size != n->key_size + value.size() ||
        std::memcmp(r->data() + n->key_size, value.data(), value.size()) != 0) {
      return fail("key #" + std::to_string(idx) + " has a wrong value");
    }
  }
  uint64_t recovered = 0;
  bool mismatch = false;
  scan([&](const pmem::NvmNode* r) {
    recovered++;
    if (c.full_verify) {
      const IndexNode* n = index.Find(r->data());
      if (!n || n->pnode != r) mismatch = true;
    }
  });
  if (mismatch) return fail("a recovered record is not the one indexed");
  if (recovered != c.num) {
    return fail("recovery's log scan finds " + std::to_string(recovered) +
                " records, want " + std::to_string(c.num));
  }
  return Status::OK();
}

}  // namespace

bool IsBaseline(const std::string& impl) {
  return impl == "listdb" || impl == "listdb-volatile" || impl == "pmemrocksdb";
}

Status RunBaseline(const BaselineConfig& c, BaselineResult* result) {
  if (!IsBaseline(c.impl)) return Status::InvalidArgument("not a baseline");
  const bool listdb = c.impl == "listdb" || c.impl == "listdb-volatile";
  if (listdb && c.batch_size > 0) {
    return Status::NotSupported("listdb has no WriteBatch (paper Fig. 7)");
  }
  if (c.num == 0 || c.threads < 1) return Status::InvalidArgument("num");
  const size_t klen = memtable::VarintLength(c.key_size) + c.key_size;
  const size_t rec = pmem::NvmNode::AllocSize(klen + c.value_size);
  PoolOptions po;
  po.path = c.pool_path;
  po.chunk_size = c.chunk_size;
  // Records, chunk tails, and pmemobj metadata.
  po.size = c.num * rec + c.num * rec / 8 + (c.threads + 4) * 2 * c.chunk_size +
            (64ull << 20);
  po.info_log = c.info_log;
  unlink(po.path.c_str());
  std::string value(c.value_size, ' ');
  for (size_t i = 0; i < c.value_size; i++) {
    value[i] = static_cast<char>('a' + (i * 11 + 3) % 26);
  }
  Status s;
  {
    std::unique_ptr<pmem::Pool> pool;
    s = pmem::Pool::Open(po, &pool);
    if (!s.ok()) return s;
    pmem::ListRoot* root = nullptr;
    s = pool->CreateList(pmem::kListStandalone, &root);
    if (!s.ok()) return s;
    const uint64_t id = root->list_id;
    memtable::BytewiseKeyComparator cmp;
    auto scan_all = [&](auto scan_chunk) {
      for (const pmem::ChunkInfo& ch : pool->ChunksOf(id)) {
        scan_chunk(ch.offset, ch.len);
      }
    };
    // ListDB's put with the policy P (listdb-volatile: no write-back and
    // no fence, to measure its DRAM side alone; its verification scan then
    // still finds every record, as the marks are written all the same).
    auto run_listdb = [&](auto policy) {
      using L = ListDbSync<decltype(policy)>;
      auto db = std::make_unique<L>(&cmp, pool.get(), id);
      Status st = TimedRun(
          c, value,
          [&](const std::string_view* k, const std::string_view* v, size_t) {
            return db->Put(k[0], v[0]);
          },
          result);
      if (!st.ok()) return st;
      return Verify(c, db->index(), value, [&](auto fn) {
        scan_all([&](uint64_t off, uint64_t len) {
          L::ScanChunk(*pool, id, off, len, baselines::ListDbOptions(), fn);
        });
      });
    };
    if (c.impl == "listdb") {
      s = run_listdb(pmem::PmemPersist());
    } else if (c.impl == "listdb-volatile") {
      s = run_listdb(pmem::NoPersist());
    } else {
      using R = PmemRocksDbStaging<pmem::PmemPersist>;
      auto db = std::make_unique<R>(&cmp, pool.get(), id);
      s = TimedRun(
          c, value,
          [&](const std::string_view* k, const std::string_view* v, size_t n) {
            return db->Write(k, v, n);
          },
          result);
      if (s.ok()) {
        // One sequence number per record, batched or not.
        if (db->LastSequence() != c.num) {
          s = Status::Corruption("VERIFY FAILED: pmemrocksdb last sequence " +
                                 std::to_string(db->LastSequence()) +
                                 " != " + std::to_string(c.num));
        }
      }
      if (s.ok()) {
        s = Verify(c, db->index(), value, [&](auto fn) {
          scan_all([&](uint64_t off, uint64_t len) {
            R::ScanChunk(*pool, id, off, len, fn);
          });
        });
      }
    }
  }
  unlink(po.path.c_str());
  return s;
}

}  // namespace bench
}  // namespace flintkv

// flintkv_bench: fillrandom into the standalone durable skiplist (paper §7.2).
//
// Compares three update paths that share the node layout, the PMEM allocator
// (the pool's per-thread chunks), the comparator (BytewiseKeyComparator) and
// the height generator:
//   flintkv    DurableSkipList<PmemPersist>: the four-phase algorithm with
//              CLWB/SFENCE through libpmem (plus the optional latency model).
//   volatile   DurableSkipList<NoPersist>: the same code with no write-back
//              and no fences, on the same pool: the volatile upper bound.
//   globallock DurableSkipList<GlobalLockBaseline<PmemPersist>>
//              (tools/bench_policies.h): every phase of every update under
//              one mutex.
// --durability adds flintkv-group (group commit, P15) and flintkv-weak (weak
// durability, P16/P17) next to flintkv (per-put). A second table gives the
// write-path counters of each run (WriteStats): fences and full
// fences (Alg. 1 line 40, the combiner's locked release; column
// "mfences/put") per put, advertisements served per combining pass, time in
// the combiner's critical section per put, validation retries per put.
//
// Each run uses a fresh pool file, pre-generated unique random keys (a
// seeded bijection of the key index, so keys are random-looking, reproducible
// per thread and pairwise distinct), and threads that start together on a
// barrier with the operations split evenly. Throughput is wall-clock
// ops/s; latency is per call (one Put, or one WriteBatch with --batch_size),
// with one steady_clock read per call. After each run the list is verified
// (entry count, DRAM and PMEM list walks, a sample of lookups) and the tool
// exits non-zero on any mismatch.
//
// Example:
//   flintkv_bench --num=300000,1000000 --threads=1,2,4,8,16 --impl=all
//                 --repeats=3
#include <gflags/gflags.h>
#include <libpmemobj.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "flintkv/status.h"
#include "memtable/durable_skiplist.h"
#include "pmem/persist.h"
#include "tools/baselines/baseline_bench.h"
#include "tools/bench_util.h"
#include "tools/flintkv_bench_run.h"

DEFINE_string(num, "1000000",
              "Total operations (keys) per run; a comma-separated list runs "
              "each value");
DEFINE_string(threads, "1",
              "Writer threads; a comma-separated list runs each value");
DEFINE_int32(key_size, 16, "Key bytes (>= 8; keys are unique if >= 16)");
DEFINE_int32(value_size, 64, "Value bytes");
DEFINE_string(key_format, "decimal",
              "decimal: zero-padded decimal digits; bytes: random bytes");
DEFINE_string(pool_dir, "/dev/shm", "Directory for the pool files");
DEFINE_string(impl, "all",
              "flintkv|volatile|globallock|listdb|listdb-volatile|"
              "pmemrocksdb|all, or a comma-separated list (all = the first "
              "three; the paper's baselines listdb and pmemrocksdb: "
              "tools/baselines/, docs/baselines.md; listdb-volatile: "
              "ListDB's put without write-backs or fences)");
DEFINE_int32(repeats, 3, "Runs per configuration; the median is reported");
DEFINE_string(latency_model, "off",
              "off|optane: extra ns per flushed line and per fence "
              "(pmem::SetLatencyModel with LatencyModel::Optane())");
DEFINE_int32(batch_size, 0,
             "0: single puts; >0: WriteBatches (InsertBatch) of this many "
             "keys");
DEFINE_uint64(seed, 301, "Key generator seed");
DEFINE_bool(prefault, true,
            "Prefault the pool at creation (libpmemobj prefault.at_create) "
            "so that tmpfs page faults are not timed");
DEFINE_string(verify, "full",
              "full: count + DRAM walk + PMEM walk + sampled lookups; "
              "sample: count + sampled lookups");
DEFINE_int32(verify_samples, 2000, "Keys looked up after each run");
DEFINE_uint64(chunk_size, 4 << 20, "PMEM chunk handed to each writer");
DEFINE_string(durability, "perput",
              "Comma list of the flintkv impl's durability modes: perput "
              "(one fence per put, the paper's; impl 'flintkv'), group (one "
              "fence per combining pass; 'flintkv-group'), weak (sync=false, "
              "a persister thread calls Persist() every "
              "--persist_interval_us, and once at the end of the timed run; "
              "'flintkv-weak')");
DEFINE_uint32(persist_interval_us, 1000,
              "Weak mode: background persistence bound");

namespace flintkv {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint64_t> ParseList(const std::string& flag, const char* name) {
  std::vector<uint64_t> out;
  std::stringstream ss(flag);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v == 0) {
      Die(std::string("--") + name + ": bad value '" + item + "'");
    }
    out.push_back(v);
  }
  if (out.empty()) Die(std::string("--") + name + " is empty");
  return out;
}

struct Summary {
  double ops = 0, ops_min = 0, ops_max = 0, p50 = 0, p99 = 0, cpus = 0;
  double ops_per_cpu = 0;  // ops per CPU-second of this process
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// "flintkv" expands into one impl per --durability mode.
std::vector<std::string> ExpandDurability(const std::vector<std::string>& in) {
  std::vector<std::string> modes;
  std::stringstream ss(FLAGS_durability);
  std::string m;
  while (std::getline(ss, m, ',')) {
    if (m == "perput") {
      modes.push_back("flintkv");
    } else if (m == "group" || m == "weak") {
      modes.push_back("flintkv-" + m);
    } else {
      Die("--durability: '" + m + "' is not perput, group or weak");
    }
  }
  std::vector<std::string> out;
  for (const std::string& impl : in) {
    if (impl == "flintkv") {
      out.insert(out.end(), modes.begin(), modes.end());
    } else {
      out.push_back(impl);
    }
  }
  return out;
}

// Write-path counters per put (per call with --batch_size) of one run
//: the run line and the counters table both print these.
struct PerPut {
  double fences, full_fences, ads_per_pass, critical_ns, retries;
};
PerPut PerPutCounters(const memtable::WriteStats& w) {
  double ops = static_cast<double>(std::max<uint64_t>(w.ops, 1));
  return {w.fences / ops, w.full_fences / ops,
          w.passes ? static_cast<double>(w.ads_served) / w.passes : 0.0,
          w.critical_ns / ops, w.retries / ops};
}

// The counters per put, medians of the repeats.
void PrintCounters(const std::vector<std::string>& impls,
                   const std::vector<uint64_t>& nums,
                   const std::vector<uint64_t>& thread_list,
                   const std::map<std::tuple<std::string, int, uint64_t>,
                                  std::vector<RunResult>>& results) {
  std::printf(
      "\n| impl | threads | num | fences/put | mfences/put | ads/pass | "
      "critical ns/put | retries/put | barriers |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (uint64_t num : nums) {
    for (uint64_t t : thread_list) {
      for (const std::string& impl : impls) {
        auto it = results.find({impl, static_cast<int>(t), num});
        if (it == results.end()) continue;
        std::vector<double> f, mf, ap, cs, rt, br;
        for (const RunResult& r : it->second) {
          PerPut p = PerPutCounters(r.stats);
          f.push_back(p.fences);
          mf.push_back(p.full_fences);
          ap.push_back(p.ads_per_pass);
          cs.push_back(p.critical_ns);
          rt.push_back(p.retries);
          br.push_back(static_cast<double>(r.stats.barriers));
        }
        std::printf("| %s | %" PRIu64 " | %" PRIu64
                    " | %.3f | %.3f | %.2f | %.0f | %.4f | %.0f |\n",
                    impl.c_str(), t, num, Median(f), Median(mf), Median(ap),
                    Median(cs), Median(rt), Median(br));
      }
    }
  }
}

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

int Main(int argc, char** argv) {
  std::string cmdline;
  for (int i = 0; i < argc; i++) {
    if (i) cmdline += ' ';
    cmdline += argv[i];
  }
  gflags::SetUsageMessage("fillrandom into the standalone durable skiplist");
  gflags::ParseCommandLineFlags(&argc, &argv, true);

  std::vector<std::string> impls;
  if (FLAGS_impl == "all") {
    impls = {"flintkv", "volatile", "globallock"};
  } else {
    std::stringstream ss(FLAGS_impl);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item != "flintkv" && item != "volatile" && item != "globallock" &&
          !IsBaseline(item) && !IsProbeImpl(item)) {
        Die("--impl must be flintkv, volatile, globallock, listdb, "
            "listdb-volatile, pmemrocksdb (or a comma-separated list of "
            "them) or all");
      }
      impls.push_back(item);
    }
    if (impls.empty()) Die("--impl is empty");
  }
  impls = ExpandDurability(impls);
  std::vector<uint64_t> nums = ParseList(FLAGS_num, "num");
  std::vector<uint64_t> thread_list = ParseList(FLAGS_threads, "threads");
  for (uint64_t t : thread_list) {
    if (t > 256) Die("--threads above 256");
  }
  if (FLAGS_key_size < 8) Die("--key_size must be >= 8");
  if (FLAGS_value_size < 0) Die("--value_size must be >= 0");
  if (FLAGS_repeats < 1) Die("--repeats must be >= 1");
  if (FLAGS_batch_size < 0) Die("--batch_size must be >= 0");
  if (FLAGS_key_format != "decimal" && FLAGS_key_format != "bytes") {
    Die("--key_format must be decimal or bytes");
  }
  if (FLAGS_verify != "full" && FLAGS_verify != "sample") {
    Die("--verify must be full or sample");
  }
  if (FLAGS_key_size < 16 && FLAGS_key_format == "decimal") {
    std::fprintf(stderr,
                 "flintkv_bench: warning: decimal keys shorter than 16 bytes "
                 "may repeat; DRAM walk count is not checked\n");
  }
  LatencyModel model;
  if (FLAGS_latency_model == "optane") {
    model = LatencyModel::Optane();
  } else if (FLAGS_latency_model != "off") {
    Die("--latency_model must be off or optane");
  }
  pmem::SetLatencyModel(model);
  if (FLAGS_prefault) {
    int one = 1;
    if (pmemobj_ctl_set(nullptr, "prefault.at_create", &one) != 0) {
      Die(std::string("pmemobj_ctl_set(prefault.at_create): ") +
          pmemobj_errormsg());
    }
  }

  // ---- Header ----
  std::string flags = CpuInfoField("flags");
  struct utsname un;
  uname(&un);
  std::printf("## flintkv_bench fillrandom (standalone durable skiplist)\n\n");
  std::printf("- command: `%s`\n", cmdline.c_str());
  std::printf("- date: %s\n", NowString().c_str());
  std::printf(
      "- machine: %s (family %s model %s stepping %s)%s; nproc %u "
      "(affinity %d); clwb %s, clflushopt %s; kernel %s %s; load average "
      "at start %s\n",
      CpuInfoField("model name").c_str(), CpuInfoField("cpu family").c_str(),
      CpuInfoField("model").c_str(), CpuInfoField("stepping").c_str(),
      HasFlag(flags, "hypervisor") ? ", virtual machine" : "",
      std::thread::hardware_concurrency(), AffinityCpus(),
      HasFlag(flags, "clwb") ? "yes" : "no",
      HasFlag(flags, "clflushopt") ? "yes" : "no", un.sysname, un.release,
      LoadAvg().c_str());
  std::printf(
      "- workload: key %d B (%s), value %d B, %s, pool in %s (%s), latency "
      "model "
      "%s (%u ns/line, %u ns/fence), prefault %s, repeats %d (median)\n",
      FLAGS_key_size, FLAGS_key_format.c_str(), FLAGS_value_size,
      FLAGS_batch_size > 0
          ? ("WriteBatch of " + std::to_string(FLAGS_batch_size) + " keys")
                .c_str()
          : "single Put",
      FLAGS_pool_dir.c_str(), PoolPages(FLAGS_pool_dir).c_str(),
      FLAGS_latency_model.c_str(), model.ns_per_flushed_line,
      model.ns_per_fence, FLAGS_prefault ? "on" : "off", FLAGS_repeats);
  std::fflush(stdout);

  // Repeats are the outer loop so that slow drift on a shared machine
  // spreads over all configurations instead of biasing one.
  std::vector<Config> configs;
  for (uint64_t num : nums) {
    for (uint64_t t : thread_list) {
      for (const std::string& impl : impls) {
        configs.push_back({impl, static_cast<int>(t), num});
      }
    }
  }
  std::map<std::tuple<std::string, int, uint64_t>, std::vector<RunResult>>
      results;
  int run_id = 0;
  uint64_t steal0, total0, steal1, total1;
  CpuTimes(&steal0, &total0);
  Clock::time_point bench_start = Clock::now();
  for (int r = 0; r < FLAGS_repeats; r++) {
    for (const Config& c : configs) {
      RunResult res = RunImpl(c, run_id++);
      // Write-path counters as name=value fields, for
      // scripts/paper/paper_figures.py; only FlintKV's lists keep them.
      std::string counters;
      if (res.stats.ops > 0) {
        PerPut p = PerPutCounters(res.stats);
        char buf[200];
        std::snprintf(buf, sizeof(buf),
                      "  fences/put=%.3f ads/pass=%.2f critical_ns/put=%.0f "
                      "retries/put=%.4f",
                      p.fences, p.ads_per_pass, p.critical_ns, p.retries);
        counters = buf;
      }
      std::fprintf(stderr,
                   "run %d/%d %-10s threads=%-3d num=%-8" PRIu64
                   " %9.0f ops/s  p50 %7.2f us  p99 %8.2f us  cpus %.2f"
                   "  (%.2f s)%s\n",
                   r + 1, FLAGS_repeats, c.impl.c_str(), c.threads, c.num,
                   res.ops_per_sec, res.p50_us, res.p99_us, res.cpus,
                   res.seconds, counters.c_str());
      results[{c.impl, c.threads, c.num}].push_back(res);
    }
  }
  CpuTimes(&steal1, &total1);
  std::printf(
      "- finished: %d runs in %.0f s; load average at end %s; CPU time "
      "stolen by the hypervisor %.1f%%\n",
      run_id, std::chrono::duration<double>(Clock::now() - bench_start).count(),
      LoadAvg().c_str(),
      total1 > total0 ? 100.0 * (steal1 - steal0) / (total1 - total0) : 0.0);
  if (!PoolNotice().empty()) {
    std::printf("- pool: %s\n", PoolNotice().c_str());
  }
  const char* unit = FLAGS_batch_size > 0 ? "batch" : "put";
  std::printf(
      "\n| impl | threads | num | kops/s (median) | kops/s min–max | "
      "p50 us/%s | p99 us/%s | CPUs used | kops/CPU-s | flintkv/volatile | "
      "flintkv/globallock | per CPU-s: flintkv/volatile | "
      "flintkv/globallock |\n",
      unit, unit);
  std::printf(
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  auto summarize = [&](const std::vector<RunResult>& v) {
    Summary s;
    std::vector<double> ops, p50, p99, cpus, per_cpu;
    for (const RunResult& r : v) {
      ops.push_back(r.ops_per_sec);
      per_cpu.push_back(r.cpus > 0 ? r.ops_per_sec / r.cpus : 0);
      p50.push_back(r.p50_us);
      p99.push_back(r.p99_us);
      cpus.push_back(r.cpus);
    }
    s.cpus = Median(cpus);
    s.ops_per_cpu = Median(per_cpu);
    s.ops = Median(ops);
    s.ops_min = *std::min_element(ops.begin(), ops.end());
    s.ops_max = *std::max_element(ops.begin(), ops.end());
    s.p50 = Median(p50);
    s.p99 = Median(p99);
    return s;
  };
  for (uint64_t num : nums) {
    for (uint64_t t : thread_list) {
      auto get = [&](const std::string& impl, Summary* s) {
        auto it = results.find({impl, static_cast<int>(t), num});
        if (it == results.end()) return false;
        *s = summarize(it->second);
        return true;
      };
      Summary vol, gl;
      bool has_vol = get("volatile", &vol);
      bool has_gl = get("globallock", &gl);
      for (const std::string& impl : impls) {
        Summary s;
        get(impl, &s);
        const Summary& fk = s;
        std::string r1, r2, r3, r4;
        if (impl.compare(0, 7, "flintkv") == 0) {
          r1 = has_vol ? Fmt("%.2f", fk.ops / vol.ops) : "–";
          r2 = has_gl ? Fmt("%.2f", fk.ops / gl.ops) : "–";
          r3 = has_vol ? Fmt("%.2f", fk.ops_per_cpu / vol.ops_per_cpu) : "–";
          r4 = has_gl ? Fmt("%.2f", fk.ops_per_cpu / gl.ops_per_cpu) : "–";
        }
        std::printf("| %s | %" PRIu64 " | %" PRIu64
                    " | %.0f | %.0f–%.0f | %.2f | %.2f | %.2f | %.0f | %s | %s "
                    "| %s | %s |\n",
                    impl.c_str(), t, num, s.ops / 1e3, s.ops_min / 1e3,
                    s.ops_max / 1e3, s.p50, s.p99, s.cpus, s.ops_per_cpu / 1e3,
                    r1.c_str(), r2.c_str(), r3.c_str(), r4.c_str());
      }
    }
  }
  PrintCounters(impls, nums, thread_list, results);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace flintkv

int main(int argc, char** argv) { return flintkv::bench::Main(argc, argv); }

// recovery_bench: recovery time of FlintKV (unflushed memtables replayed
// from the pool) versus RocksDB's WAL replay of the same writes (paper
// §7.4), and the cost of OpenDB's watermark commit point.
//
//   flintkv_recovery_bench recovery --dir=/dev/shm/rb --mb=30 [--threads=1]
//       [--ingest_sst=1]   (0: the memtable path, RecoveryOptions::ingest_sst)
//   flintkv_recovery_bench watermark --dir=/dev/shm/rb --ops=500000
//       [--threads=1] [--batch=1]
// A child process writes random keys (16-byte keys, 100-byte values) until
// `mb` MiB of user data are in the memtables (write_buffer_size is large
// enough that nothing is flushed), then dies with _exit (no close, no
// flush). The parent times reopening: FlintKV = DB::Open + RecoverInto
// (replay + flush), RocksDB = DB::Open replaying the WAL (which flushes the
// recovered memtable too). Output: one line per configuration.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::map<std::string, std::string> g_flags;
std::string Flag(const std::string& k, const std::string& def) {
  auto it = g_flags.find(k);
  return it == g_flags.end() ? def : it->second;
}

void Check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    _exit(1);
  }
}

std::string Key(uint64_t i) {
  char b[17];
  std::snprintf(b, sizeof(b), "%016llx",
                static_cast<unsigned long long>(i * 0x9e3779b97f4a7c15ull));
  return std::string(b, 16);
}

rocksdb::Options BaseOptions(uint64_t mb) {
  rocksdb::Options o;
  o.create_if_missing = true;
  // Nothing may flush before the crash: the memtable's usage (PMEM nodes +
  // DRAM index, or RocksDB's arena) is well above the user data size.
  o.write_buffer_size = (2 * mb + 128) << 20;
  o.max_write_buffer_number = 2;
  o.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  return o;
}

// Writes until `mb` MiB of key+value bytes, from `threads` threads.
void Fill(rocksdb::DB* db, const rocksdb::WriteOptions& wo, uint64_t mb,
          int threads) {
  const uint64_t per_op = 16 + 100;
  const uint64_t ops = (mb << 20) / per_op;
  std::string value(100, 'x');
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::string v = value;
      for (uint64_t i = t; i < ops; i += threads) {
        for (int j = 0; j < 8; j++) v[j] = static_cast<char>('a' + rng() % 26);
        Check(db->Put(wo, Key(i), v), "put");
      }
    });
  }
  for (auto& th : ts) th.join();
}

// The crashing writer (re-executed): fills, then _exit without close.
[[noreturn]] void Writer(bool flint, const std::string& dir, uint64_t mb,
                         int threads) {
  std::system(("mkdir -p " + dir).c_str());
  std::string pool_dir = dir + "/pool";
  rocksdb::Options o = BaseOptions(mb);
  rocksdb::WriteOptions wo;
  if (flint) {
    flintkv::MemTableOptions mo;
    mo.pool_dir = pool_dir;
    mo.pool_size = o.write_buffer_size * 3 + (512 << 20);
    Check(flintkv::NewMemTableRepFactory(mo, &o.memtable_factory), "f");
    wo.disableWAL = true;
  } else {
    o.wal_dir = dir + "/wal";  // same tmpfs as the pool
  }
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(o, dir + "/db", &db), "open");
  Fill(db, wo, mb, threads);
  if (!flint) Check(db->FlushWAL(false), "flushwal");
  _exit(0);  // crash: no close, no flush
}

double RunRecovery(bool flint, const std::string& dir, uint64_t mb, int threads,
                   flintkv::RecoveryReport* rep) {
  std::system(("rm -rf " + dir).c_str());
  std::string pool_dir = dir + "/pool";
  pid_t pid = fork();
  if (pid ==
      0) {  // a fresh process: RocksDB's thread pools do not survive fork
    execl("/proc/self/exe", "flintkv_recovery_bench", "writer",
          flint ? "1" : "0", dir.c_str(), std::to_string(mb).c_str(),
          std::to_string(threads).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "writer failed\n");
    std::exit(1);
  }
  rocksdb::Options o = BaseOptions(mb);
  o.create_if_missing = false;
  auto start = Clock::now();
  rocksdb::DB* db;
  if (flint) {
    flintkv::RecoveryOptions ro;
    ro.memtable.pool_dir = pool_dir;
    ro.ingest_sst = Flag("ingest_sst", "1") != "0";
    Check(flintkv::RecoverDB(o, dir + "/db", {}, ro, rep), "recover");
  } else {
    o.wal_dir = dir + "/wal";
    Check(rocksdb::DB::Open(o, dir + "/db", &db), "reopen");
    delete db;
  }
  double secs = Since(start);
  std::system(("rm -rf " + dir).c_str());
  return secs;
}

// Median of a few runs: the machines are shared and noisy.
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Recovery() {
  std::string dir = Flag("dir", "/dev/shm/flintkv_recovery_bench");
  uint64_t mb = std::stoull(Flag("mb", "30"));
  int threads = std::stoi(Flag("threads", "1"));
  int reps = std::stoi(Flag("reps", "3"));
  std::vector<double> fs, ws;
  std::vector<flintkv::RecoveryReport> reports(reps);
  for (int i = 0; i < reps; i++) {  // interleaved
    fs.push_back(RunRecovery(true, dir, mb, threads, &reports[i]));
    ws.push_back(RunRecovery(false, dir, mb, threads, nullptr));
  }
  double best_f = Median(fs), best_w = Median(ws);
  // The phase breakdown of the run whose total is the median.
  const flintkv::RecoveryReport& best_rep =
      reports[std::find(fs.begin(), fs.end(), best_f) - fs.begin()];
  uint64_t ops = (mb << 20) / (16 + 100);
  if (best_rep.entries_replayed != ops) {
    std::printf("WARNING: %llu of %llu writes were still in the memtable\n",
                (unsigned long long)best_rep.entries_replayed,
                (unsigned long long)ops);
  }
  std::printf(
      "recovery mb=%llu threads=%d entries=%llu: flintkv%s %.3f s (open+close "
      "%.3f s, triage %.3f s, walk+write %.3f s, ingest %.3f s, flush+drop "
      "%.3f s; %llu SST files, %llu keys through DB writes), rocksdb_wal "
      "%.3f s, wal/flintkv %.2fx  (median of %d)\n",
      (unsigned long long)mb, threads,
      (unsigned long long)best_rep.entries_replayed,
      Flag("ingest_sst", "1") == "0" ? " (memtable path)" : "", best_f,
      best_f - best_rep.replay_seconds - best_rep.flush_seconds,
      best_rep.triage_seconds,
      best_rep.replay_seconds - best_rep.triage_seconds -
          best_rep.ingest_seconds,
      best_rep.ingest_seconds, best_rep.flush_seconds,
      (unsigned long long)best_rep.sst_files,
      (unsigned long long)best_rep.fallback_keys, best_w, best_w / best_f,
      reps);
  return 0;
}

// Throughput of Put (or batches) through the plain factory vs OpenDB.
double RunWrites(bool wrapper, const std::string& dir, uint64_t ops,
                 int threads, int batch) {
  std::system(("rm -rf " + dir).c_str());
  rocksdb::DBOptions dbo;
  dbo.create_if_missing = true;
  dbo.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  rocksdb::ColumnFamilyOptions co;
  co.write_buffer_size = 64 << 20;
  flintkv::RecoveryOptions ro;
  ro.memtable.pool_dir = dir + "/pool";
  ro.memtable.pool_size = 1ull << 30;
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  if (wrapper) {
    Check(flintkv::OpenDB(dbo, dir + "/db", {{"default", co}}, &h, &db, ro),
          "open");
  } else {
    flintkv::MemTableOptions mo;
    mo.pool_dir = ro.memtable.pool_dir;
    mo.pool_size = ro.memtable.pool_size;
    Check(flintkv::NewMemTableRepFactory(mo, &co.memtable_factory), "f");
    Check(rocksdb::DB::Open(dbo, dir + "/db", {{"default", co}}, &h, &db),
          "open");
  }
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  std::string value(100, 'x');
  auto start = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      rocksdb::WriteBatch b;
      for (uint64_t i = t * batch; i < ops; i += threads * batch) {
        if (batch == 1) {
          Check(db->Put(wo, h[0], Key(i), value), "put");
        } else {
          b.Clear();
          for (int j = 0; j < batch; j++) b.Put(h[0], Key(i + j), value);
          Check(db->Write(wo, &b), "write");
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  double secs = Since(start);
  for (auto* cf : h) db->DestroyColumnFamilyHandle(cf);
  delete db;
  std::system(("rm -rf " + dir).c_str());
  return ops / secs;
}

int WatermarkCost() {
  std::string dir = Flag("dir", "/dev/shm/flintkv_recovery_bench");
  uint64_t ops = std::stoull(Flag("ops", "500000"));
  int threads = std::stoi(Flag("threads", "1"));
  int batch = std::stoi(Flag("batch", "1"));
  int reps = std::stoi(Flag("reps", "3"));
  std::vector<double> ps, ws;
  for (int i = 0; i < reps; i++) {  // interleaved
    ps.push_back(RunWrites(false, dir, ops, threads, batch));
    ws.push_back(RunWrites(true, dir, ops, threads, batch));
  }
  double plain = Median(ps), wrapped = Median(ws);
  std::printf(
      "watermark ops=%llu threads=%d batch=%d: plain factory %.0f keys/s, "
      "OpenDB wrapper %.0f keys/s, cost %.1f%%  (median of %d)\n",
      (unsigned long long)ops, threads, batch, plain, wrapped,
      100.0 * (plain - wrapped) / plain, reps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s recovery|watermark --flag=value...\n",
                 argv[0]);
    return 2;
  }
  for (int i = 2; i < argc && std::string(argv[1]) != "writer"; i++) {
    std::string a = argv[i];
    size_t eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) return 2;
    g_flags[a.substr(2, eq - 2)] = a.substr(eq + 1);
  }
  std::string cmd = argv[1];
  if (cmd == "writer" && argc == 6) {
    Writer(argv[2][0] == '1', argv[3], std::stoull(argv[4]),
           std::atoi(argv[5]));
  }
  if (cmd == "recovery") return Recovery();
  if (cmd == "watermark") return WatermarkCost();
  return 2;
}

// The operations model checker: a seed-deterministic random driver over the
// real RocksDB + FlintKV (plain factory and flintkv::OpenDB) that applies
// what operators do to a database and its pool, and after every step checks
// the DB against a reference model of its acknowledged writes.
//
// One DB directory and its pool_dir. Every step that touches RocksDB runs
// in a forked child (this process never opens a DB), so a kill is a real
// SIGKILL: the child kills itself between two operations, or at a
// FLINTKV_CRASH_POINT inside a flush or a recovery phase. The child reports
// each acknowledged operation through a pipe, so the model knows exactly
// what was acknowledged; nothing here depends on timing.
//
// The model: `acked`, per column family, the value of every key (values are
// counters: Put sets, Merge adds, so a Merge applied twice or lost shows);
// `dir`, what the DB directory alone holds (SST files and WAL), measured by
// a child that opens a copy of the directory read-only with RocksDB's own
// memtable; and the pool: whether it may hold lists, and if so which
// directory state they extend (`base`) and which state they complete
// (`full`). A step's outcome is judged against what the model allows:
//  - an open over lists that extend exactly the DB directory's state
//    completes it (a refusal is a dead end), unless the directory was
//    replaced offline since, where a refusal that names a remedy is allowed;
//  - an open over lists that extend another state (a restored backup, a
//    destroyed DB, a pool image put back) is refused with a remedy named,
//    the DB left as it was; lists this DB already recovered may also be
//    dropped, leaving the DB as it is; and lists whose life made nothing
//    durable after the copy was taken may complete it, giving exactly
//    every acknowledged write of that life;
//  - a checkpoint, backup or copy opened at a path of its own with the
//    DB's pool, the DB still in place, opens as the image it is (taking
//    nothing from the pool unless the DB's directory holds it all), or is
//    refused with a remedy named; if the DB's directory no longer holds
//    the state the lists extend, the copy may be completed by them; the
//    DB and its pool copied together recover as the DB itself would;
//  - anything else (a reverted key, a lost or doubled Merge, an open that
//    silently drops lists) is a finding, printed with seed and step.
// After an allowed refusal the checker takes the remedy an operator
// would (flintkv::DiscardLeftovers) and expects the directory's state.
//
// Usage: flintkv_ops_checker --seeds=A-B [--steps=N] [--dir=D] [--ops=...]
//        [--verbose] [--keep]
// Exit status 1 if any seed had a finding.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/db.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/options.h"
#include "rocksdb/utilities/backup_engine.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"

namespace {

using Kv = std::map<std::string, std::string>;
const std::vector<std::string> kCfs = {"default", "a", "b"};
constexpr uint64_t kPoolSize = 64ull << 20;

// Column family name -> key -> value.
struct State {
  std::map<std::string, Kv> cf;
  bool operator==(const State& o) const { return Norm() == o.Norm(); }
  bool operator!=(const State& o) const { return !(*this == o); }
  std::map<std::string, Kv> Norm() const {
    std::map<std::string, Kv> n;
    for (auto& [c, kv] : cf)
      if (!kv.empty()) n[c] = kv;
    return n;
  }
  // The first few differences, for a finding.
  std::string Diff(const State& want) const {
    std::string out;
    int n = 0;
    for (const std::string& c : kCfs) {
      const Kv empty;
      const Kv& g = cf.count(c) ? cf.at(c) : empty;
      const Kv& w = want.cf.count(c) ? want.cf.at(c) : empty;
      std::set<std::string> keys;
      for (auto& e : g) keys.insert(e.first);
      for (auto& e : w) keys.insert(e.first);
      for (const std::string& k : keys) {
        auto gi = g.find(k), wi = w.find(k);
        std::string gv = gi == g.end() ? "<none>" : gi->second;
        std::string wv = wi == w.end() ? "<none>" : wi->second;
        if (gv == wv) continue;
        if (n++ < 6) out += " " + c + "/" + k + "=" + gv + " (want " + wv + ")";
      }
    }
    if (n > 6) out += " ... " + std::to_string(n) + " keys differ";
    return out;
  }
};

int64_t Num(const std::string& s) {
  return std::strtoll(s.c_str(), nullptr, 10);
}

// Counters: a Merge operand adds to the value (a missing value counts 0).
class CounterOperator : public rocksdb::AssociativeMergeOperator {
 public:
  bool Merge(const rocksdb::Slice&, const rocksdb::Slice* existing,
             const rocksdb::Slice& value, std::string* out,
             rocksdb::Logger*) const override {
    int64_t base = existing ? Num(existing->ToString()) : 0;
    *out = std::to_string(base + Num(value.ToString()));
    return true;
  }
  const char* Name() const override { return "FlintOpsCounter"; }
};

// ---------------------------------------------------------------------------
// Operations inside a life, and their effect on the model.

enum class OpKind {
  kPut,
  kMerge,
  kDelete,
  kDeleteRange,
  kBatch,
  kFlush,
  kCompact,
  kSetOptions,
  kCheckpoint,
  kBackup,
  kReadOnly,
  kDropCreateCf,
};

const char* OpName(OpKind k) {
  static const char* kNames[] = {"put",        "merge",  "del",      "delrange",
                                 "batch",      "flush",  "compact",  "setopt",
                                 "checkpoint", "backup", "readonly", "dropcf"};
  return kNames[static_cast<int>(k)];
}

struct Write {
  OpKind kind;  // kPut, kMerge, kDelete or kDeleteRange
  std::string cf, key, end, value;
};

struct Op {
  OpKind kind;
  std::vector<Write> writes;  // one, or a batch's
  std::string cf;             // flush, compact, drop/create
  bool flag = false;          // backup: flush_before_backup
  int image = -1;             // checkpoint/backup: the image it makes
};

void ApplyWrite(State* s, const Write& w) {
  Kv& kv = s->cf[w.cf];
  switch (w.kind) {
    case OpKind::kPut:
      kv[w.key] = w.value;
      break;
    case OpKind::kMerge: {
      auto it = kv.find(w.key);
      int64_t base = it == kv.end() ? 0 : Num(it->second);
      kv[w.key] = std::to_string(base + Num(w.value));
      break;
    }
    case OpKind::kDelete:
      kv.erase(w.key);
      break;
    case OpKind::kDeleteRange:
      kv.erase(kv.lower_bound(w.key), kv.lower_bound(w.end));
      break;
    default:
      std::abort();
  }
}

// How a life opens the DB.
enum class Mode { kWrapper, kPlain, kPlainWal };
const char* ModeName(Mode m) {
  return m == Mode::kWrapper ? "OpenDB"
         : m == Mode::kPlain ? "plain"
                             : "plain+WAL";
}
enum class End { kClose, kCloseNoFlush, kKill };

struct LifePlan {
  Mode mode = Mode::kWrapper;
  std::vector<Op> ops;
  End end = End::kClose;
  size_t kill_at = 0;       // kKill: dies before ops[kill_at] (or at the end)
  std::string crash_point;  // FLINTKV_CRASH_POINT for the whole life
  bool two_pools = false;   // column family b on a second pool_dir
};

// ---------------------------------------------------------------------------
// The checker's world: paths, the model, the artefacts operators make.

struct Image {
  std::string kind;  // checkpoint, backup, dircopy
  std::string path;  // a directory (checkpoint, dircopy) or the backup dir
  uint32_t backup_id = 0;
  bool measured = false;
  State state;
  std::set<int> absorbed;
};

struct PoolModel {
  bool lists = false;  // may hold unflushed lists
  State base, full;    // the directory state they extend; what they complete
  // A write in flight when a crash point killed the life (inside its
  // flush) may be durable or not: `full` with it applied is allowed too.
  bool has_alt = false;
  State alt_full;
  int id = 0;  // which life left them
  // s is every acknowledged write of the lists' life (with the write in
  // flight durable or not).
  bool Completes(const State& s) const {
    return s == full || (has_alt && s == alt_full);
  }
};

struct PoolImage {
  std::string path;
  PoolModel model;
};

struct Options {
  uint64_t seed_lo = 1, seed_hi = 1;
  int steps = 30;
  std::string dir = "/dev/shm/flintkv_ops_checker";
  std::set<std::string> ops;  // enabled operation kinds (empty: all)
  bool verbose = false;
  // Stop after the steps, before the last check, and keep the directory:
  // the state a finding's steps left, to look at with flintkv_tool.
  bool keep = false;
};

class Checker {
 public:
  Checker(const Options& o, uint64_t seed) : opt_(o), seed_(seed), rng_(seed) {
    root_ = o.dir + "/seed" + std::to_string(seed);
    db_ = root_ + "/db";
    pool_ = root_ + "/pool";
    pool2_ = root_ + "/pool2";
  }

  // Runs the seed; returns the number of findings (0 or 1: a finding ends
  // the seed, since the model no longer describes the DB).
  int Run();

  std::map<std::string, int> counts;

 private:
  bool On(const std::string& k) const {
    return opt_.ops.empty() || opt_.ops.count(k) > 0;
  }
  uint64_t R(uint64_t n) { return n ? rng_() % n : 0; }
  bool Chance(int pct) { return R(100) < static_cast<uint64_t>(pct); }
  void Sh(const std::string& cmd) {
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "command failed: %s\n", cmd.c_str());
      std::exit(2);
    }
  }
  void Finding(const std::string& what) {
    std::printf("FINDING seed=%llu step=%d: %s\n  history:%s\n",
                static_cast<unsigned long long>(seed_), step_, what.c_str(),
                history_.c_str());
    std::fflush(stdout);
    finding_ = true;
  }
  void Note(const std::string& s) {
    history_ += "\n    " + std::to_string(step_) + ": " + s;
    if (opt_.verbose)
      std::printf("seed %llu step %d: %s\n",
                  static_cast<unsigned long long>(seed_), step_, s.c_str());
  }

  Write RandomWrite();
  LifePlan PlanLife();
  void Life(const LifePlan& p);
  void Measure(const std::string& dir, State* out);
  void MeasureDir() { Measure(db_, &dir_); }
  bool RestoreBackup(const Image& im, const std::string& dir);
  // A measured image, at random (nullptr: none yet).
  const Image* PickImage();
  // Image im, made a DB directory at dir (a backup restored, else copied).
  bool PutImage(const Image& im, const std::string& dir);
  void Discard();
  void Restore();
  void OpenCopy();
  void SaveDirCopy();
  void SavePool();
  void RestorePool();
  void DeleteRecord();
  void Destroy();

  // Children.
  struct ChildResult {
    bool killed = false;
    int exit_code = 0;
    std::vector<std::string> lines;
  };
  template <typename F>
  ChildResult RunChild(F body, const std::string& crash_point = "");

  const Options& opt_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::string root_, db_, pool_, pool2_;
  int step_ = 0;
  bool finding_ = false;
  std::string history_;

  // The model.
  State acked_;           // every acknowledged write
  State dir_;             // what the DB directory alone holds
  bool touched_ = false;  // directory or pool replaced offline since
  bool mid_recovery_ = false;
  std::set<int> absorbed_;  // pool lives whose lists this DB recovered
  PoolModel pool_model_;
  int next_life_ = 1;
  std::vector<Image> images_;
  std::vector<PoolImage> pool_images_;
  int interrupted_in_a_row_ = 0;
};

// Runs body(write_fd) in a forked child; collects the lines it writes.
template <typename F>
Checker::ChildResult Checker::RunChild(F body, const std::string& crash_point) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(2);
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) std::exit(2);
  if (pid == 0) {
    close(fds[0]);
    if (!crash_point.empty()) {
      setenv("FLINTKV_CRASH_POINT", crash_point.c_str(), 1);
    } else {
      unsetenv("FLINTKV_CRASH_POINT");
    }
    FILE* out = fdopen(fds[1], "w");
    setvbuf(out, nullptr, _IONBF, 0);
    body(out);
    std::fflush(out);
    _exit(0);
  }
  close(fds[1]);
  ChildResult r;
  FILE* in = fdopen(fds[0], "r");
  std::string line;
  for (int c; (c = std::fgetc(in)) != EOF;) {
    if (c == '\n') {
      r.lines.push_back(line);
      line.clear();
    } else {
      line += static_cast<char>(c);
    }
  }
  std::fclose(in);
  int status = 0;
  waitpid(pid, &status, 0);
  r.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  if (WIFSIGNALED(status) && !r.killed) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  return r;
}

// ---------------------------------------------------------------------------
// Child side: RocksDB options, opening, dumping.

std::shared_ptr<rocksdb::MemTableRepFactory> Factory(
    const std::string& pool_dir) {
  flintkv::MemTableOptions mo;
  mo.pool_dir = pool_dir;
  mo.pool_size = kPoolSize;
  std::shared_ptr<rocksdb::MemTableRepFactory> f;
  rocksdb::Status s = flintkv::NewMemTableRepFactory(mo, &f);
  if (!s.ok()) {
    std::fprintf(stderr, "factory: %s\n", s.ToString().c_str());
    std::abort();
  }
  return f;
}

rocksdb::Options BaseOptions() {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  o.merge_operator = std::make_shared<CounterOperator>();
  o.write_buffer_size = 4 << 20;
  o.max_write_buffer_number = 2;
  o.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  return o;
}

std::vector<rocksdb::ColumnFamilyDescriptor> Cfds(const rocksdb::Options& o) {
  std::vector<rocksdb::ColumnFamilyDescriptor> v;
  for (const std::string& c : kCfs) v.emplace_back(c, o);
  return v;
}

flintkv::RecoveryOptions Ro(const std::string& pool_dir) {
  flintkv::RecoveryOptions ro;
  ro.memtable.pool_dir = pool_dir;
  ro.memtable.pool_size = kPoolSize;
  return ro;
}

// One line per message: newlines folded.
std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

// Opens the DB at path as a life does: flintkv::OpenDB (wrapper), or
// DB::Open and, when that asks for a recovery (and `recover`), RecoverDB
// then DB::Open again (the refusal reported as "R\t...").
rocksdb::Status OpenAsLife(
    FILE* out, bool wrapper, bool recover, const rocksdb::Options& o,
    const std::string& path, const std::string& pool,
    const std::vector<rocksdb::ColumnFamilyDescriptor>& cfds,
    std::vector<rocksdb::ColumnFamilyHandle*>* hs, rocksdb::DB** db) {
  flintkv::RecoveryReport rep;
  if (wrapper) return flintkv::OpenDB(o, path, cfds, hs, db, Ro(pool), &rep);
  rocksdb::Status s = rocksdb::DB::Open(o, path, cfds, hs, db);
  if (!s.ok() && s.ToString().find("recover") != std::string::npos && recover) {
    std::fprintf(out, "R\t%s\n", OneLine(s.ToString()).c_str());
    s = flintkv::RecoverDB(o, path, cfds, Ro(pool), &rep);
    if (s.ok()) s = rocksdb::DB::Open(o, path, cfds, hs, db);
  }
  return s;
}

void Dump(FILE* out, rocksdb::DB* db,
          const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(rocksdb::ReadOptions(), h));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      std::fprintf(out, "D\t%s\t%s\t%s\n", h->GetName().c_str(),
                   it->key().ToString().c_str(),
                   it->value().ToString().c_str());
    }
    if (!it->status().ok()) {
      std::fprintf(out, "E\titerator: %s\n",
                   OneLine(it->status().ToString()).c_str());
    }
  }
}

State ParseDump(const std::vector<std::string>& lines, std::string* error) {
  State s;
  for (const std::string& l : lines) {
    if (l.rfind("E\t", 0) == 0) *error += l.substr(2) + "; ";
    if (l.rfind("D\t", 0) != 0) continue;
    size_t a = l.find('\t', 2), b = l.find('\t', a + 1);
    s.cf[l.substr(2, a - 2)][l.substr(a + 1, b - a - 1)] = l.substr(b + 1);
  }
  return s;
}

// Executes one operation in a life; false if it failed (reported).
bool ExecOp(FILE* out, rocksdb::DB* db, const rocksdb::Options& o,
            const std::string& db_path,
            std::map<std::string, rocksdb::ColumnFamilyHandle*>* cfh,
            const Op& op, Mode mode) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = mode != Mode::kPlainWal;
  rocksdb::Status s;
  auto h = [&](const std::string& c) { return (*cfh)[c]; };
  switch (op.kind) {
    case OpKind::kPut:
    case OpKind::kMerge:
    case OpKind::kDelete:
    case OpKind::kDeleteRange:
    case OpKind::kBatch: {
      rocksdb::WriteBatch b;
      for (const Write& w : op.writes) {
        switch (w.kind) {
          case OpKind::kPut:
            s = b.Put(h(w.cf), w.key, w.value);
            break;
          case OpKind::kMerge:
            s = b.Merge(h(w.cf), w.key, w.value);
            break;
          case OpKind::kDelete:
            s = b.Delete(h(w.cf), w.key);
            break;
          default:
            s = b.DeleteRange(h(w.cf), w.key, w.end);
        }
        if (!s.ok()) break;
      }
      if (s.ok()) s = db->Write(wo, &b);
      break;
    }
    case OpKind::kFlush:
      s = db->Flush(rocksdb::FlushOptions(), h(op.cf));
      break;
    case OpKind::kCompact: {
      rocksdb::CompactRangeOptions co;
      co.bottommost_level_compaction =
          rocksdb::BottommostLevelCompaction::kForce;
      s = db->CompactRange(co, h(op.cf), nullptr, nullptr);
      break;
    }
    case OpKind::kSetOptions:
      s = db->SetOptions(h(op.cf),
                         {{"write_buffer_size", std::to_string(6 << 20)}});
      if (s.ok()) s = db->SetDBOptions({{"max_background_jobs", "3"}});
      break;
    case OpKind::kCheckpoint: {
      rocksdb::Checkpoint* cp = nullptr;
      s = rocksdb::Checkpoint::Create(db, &cp);
      if (s.ok()) {
        s = cp->CreateCheckpoint(db_path + "/../image" +
                                 std::to_string(op.image));
        delete cp;
      }
      break;
    }
    case OpKind::kBackup: {
      rocksdb::BackupEngine* be = nullptr;
      s = rocksdb::BackupEngine::Open(
          rocksdb::Env::Default(),
          rocksdb::BackupEngineOptions(db_path + "/../backups"), &be);
      if (s.ok()) {
        rocksdb::CreateBackupOptions cbo;
        cbo.flush_before_backup = op.flag;
        rocksdb::BackupID id = 0;
        s = be->CreateNewBackup(cbo, db, &id);
        if (s.ok()) {
          std::fprintf(out, "B\t%d\t%u\n", op.image, static_cast<unsigned>(id));
        }
        delete be;
      }
      break;
    }
    case OpKind::kReadOnly: {
      // A read-only instance in the same process, sharing the primary's
      // Options (its factory) and info Logger.
      rocksdb::Options ro = o;
      ro.info_log = db->GetDBOptions().info_log;
      std::vector<rocksdb::ColumnFamilyHandle*> hs;
      rocksdb::DB* rdb = nullptr;
      s = rocksdb::DB::OpenForReadOnly(ro, db_path, Cfds(ro), &hs, &rdb);
      if (s.ok()) {
        std::string v;
        rdb->Get(rocksdb::ReadOptions(), hs[0], "k00", &v);
        for (auto* x : hs) rdb->DestroyColumnFamilyHandle(x);
        delete rdb;
      } else {
        // RocksDB's own race: the primary's compaction deleted a file the
        // read-only open found in the MANIFEST. Not the pool's business.
        std::fprintf(out, "N\treadonly_open_failed\n");
        s = rocksdb::Status::OK();
      }
      break;
    }
    case OpKind::kDropCreateCf: {
      s = db->DropColumnFamily(h(op.cf));
      if (s.ok()) {
        db->DestroyColumnFamilyHandle(h(op.cf));
        rocksdb::ColumnFamilyHandle* nh = nullptr;
        s = db->CreateColumnFamily(o, op.cf, &nh);
        (*cfh)[op.cf] = nh;
      }
      break;
    }
  }
  if (!s.ok()) {
    std::fprintf(out, "F\t%s\n", OneLine(s.ToString()).c_str());
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Parent side.

Write Checker::RandomWrite() {
  Write w;
  w.cf = kCfs[R(kCfs.size())];
  char k[8];
  std::snprintf(k, sizeof(k), "k%02d", static_cast<int>(R(40)));
  w.key = k;
  uint64_t r = R(100);
  if (r < 45) {
    w.kind = OpKind::kPut;
    w.value = std::to_string(R(1000));
  } else if (r < 80) {
    w.kind = OpKind::kMerge;
    w.value = std::to_string(1 + R(9));
  } else if (r < 95 || !On("range")) {
    w.kind = OpKind::kDelete;
  } else {
    w.kind = OpKind::kDeleteRange;
    std::snprintf(k, sizeof(k), "k%02d", static_cast<int>(R(40)));
    w.key = std::min(w.key, std::string(k));
    w.end = std::max(w.key, std::string(k)) + "~";
  }
  return w;
}

LifePlan Checker::PlanLife() {
  LifePlan p;
  uint64_t m = R(10);
  p.mode = m < 4 ? Mode::kWrapper : m < 8 ? Mode::kPlain : Mode::kPlainWal;
  if (!On("plain")) p.mode = Mode::kWrapper;
  if (!On("wrapper") && p.mode == Mode::kWrapper) p.mode = Mode::kPlain;
  // With no lists in the pool, so that the open's first word is on the
  // two pools, not on the leftovers.
  p.two_pools = On("two_pools") && p.mode != Mode::kWrapper &&
                !pool_model_.lists && !mid_recovery_ && Chance(15);
  // The plain factory does not make DeleteRange durable with the WAL off
  // (RocksDB keeps range tombstones in a DRAM table of its own), and a
  // WAL-logged one cannot be ordered against WAL-less writes of another
  // life (docs/rocksdb_config_matrix.md): plain lives get point deletes.
  auto range_ok = [&](Write* w) {
    if (w->kind == OpKind::kDeleteRange && p.mode != Mode::kWrapper) {
      w->kind = OpKind::kDelete;
      w->end.clear();
    }
  };
  const int n = 5 + static_cast<int>(R(40));
  for (int i = 0; i < n; i++) {
    Op op;
    uint64_t r = R(100);
    op.cf = kCfs[R(kCfs.size())];
    if (r < 70) {
      op.kind = OpKind::kPut;
      op.writes.push_back(RandomWrite());
      range_ok(&op.writes[0]);
      op.kind = op.writes[0].kind;
    } else if (r < 80) {
      op.kind = OpKind::kBatch;
      for (int j = 0, k = 2 + static_cast<int>(R(4)); j < k; j++) {
        Write w = RandomWrite();
        if (w.kind == OpKind::kDeleteRange) w.kind = OpKind::kDelete;
        op.writes.push_back(w);
      }
    } else if (r < 86) {
      op.kind = OpKind::kFlush;
    } else if (r < 89 && On("compact")) {
      op.kind = OpKind::kCompact;
    } else if (r < 91 && On("set_options")) {
      op.kind = OpKind::kSetOptions;
    } else if (r < 93 && On("checkpoint")) {
      op.kind = OpKind::kCheckpoint;
    } else if (r < 95 && On("backup")) {
      op.kind = OpKind::kBackup;
      op.flag = Chance(50);
    } else if (r < 97 && On("read_only") && p.mode != Mode::kWrapper) {
      op.kind = OpKind::kReadOnly;
    } else if (r < 99 && On("drop_cf")) {
      op.kind = OpKind::kDropCreateCf;
      op.cf = kCfs[1 + R(kCfs.size() - 1)];  // not the default one
    } else {
      op.writes.push_back(RandomWrite());
      range_ok(&op.writes[0]);
      op.kind = op.writes[0].kind;
    }
    p.ops.push_back(op);
  }
  uint64_t e = R(100);
  p.end = e < 45 ? End::kKill : e < 75 ? End::kClose : End::kCloseNoFlush;
  p.kill_at = R(p.ops.size() + 1);
  if (On("flush_kill") && Chance(8)) p.crash_point = "flintkv_mark_flushed";
  return p;
}

void Checker::Measure(const std::string& dir, State* out) {
  const std::string copy = root_ + "/measure";
  if (access(dir.c_str(), F_OK) != 0) {
    *out = State();
    return;
  }
  Sh("rm -rf " + copy + " && cp -a " + dir + " " + copy);
  ChildResult r = RunChild([&](FILE* f) {
    rocksdb::Options o = BaseOptions();
    std::vector<std::string> names;
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(o, copy, &names);
    if (!s.ok()) {
      std::fprintf(f, "N\t%s\n", OneLine(s.ToString()).c_str());
      return;
    }
    std::vector<rocksdb::ColumnFamilyDescriptor> cfds;
    for (const std::string& c : kCfs) {
      for (const std::string& n : names) {
        if (n == c) cfds.emplace_back(c, o);
      }
    }
    std::vector<rocksdb::ColumnFamilyHandle*> hs;
    rocksdb::DB* db = nullptr;
    s = rocksdb::DB::OpenForReadOnly(o, copy, cfds, &hs, &db);
    if (!s.ok()) {
      std::fprintf(f, "E\topen: %s\n", OneLine(s.ToString()).c_str());
      return;
    }
    Dump(f, db, hs);
    for (auto* h : hs) db->DestroyColumnFamilyHandle(h);
    delete db;
  });
  std::string err;
  *out = ParseDump(r.lines, &err);
  Sh("rm -rf " + copy);
  if (!err.empty() || r.exit_code != 0) {
    Finding("measuring " + dir + " failed: " + err + " exit " +
            std::to_string(r.exit_code));
  }
}

void Checker::Life(const LifePlan& p) {
  const int life = next_life_++;
  // The images this life's checkpoints and backups make.
  std::vector<Op> ops = p.ops;
  for (Op& op : ops) {
    if (op.kind == OpKind::kCheckpoint || op.kind == OpKind::kBackup) {
      op.image = static_cast<int>(images_.size());
      Image im;
      im.kind = op.kind == OpKind::kCheckpoint ? "checkpoint" : "backup";
      im.path = op.kind == OpKind::kCheckpoint
                    ? root_ + "/image" + std::to_string(op.image)
                    : root_ + "/backups";
      images_.push_back(im);
    }
  }
  // A recovery that may be killed at one of its phases.
  std::string crash = p.crash_point;
  const bool lists = pool_model_.lists;
  if (lists && On("recovery_kill") && Chance(30) && interrupted_in_a_row_ < 6) {
    static const char* kPoints[] = {
        "recovery_after_mark",        "recovery_before_ingest",
        "recovery_after_ingest",      "recovery_after_list",
        "recovery_after_record",      "recovery_after_flush",
        "recovery_after_reset_begin", "recovery_after_clock_import"};
    crash = kPoints[R(sizeof(kPoints) / sizeof(kPoints[0]))];
  }
  std::string desc = std::string("life ") + std::to_string(life) + " " +
                     ModeName(p.mode) + (p.two_pools ? " two-pools" : "") +
                     " ops=" + std::to_string(p.ops.size()) +
                     (p.end == End::kKill ? " kill@" + std::to_string(p.kill_at)
                      : p.end == End::kClose ? " close"
                                             : " close-noflush") +
                     (crash.empty() ? "" : " crash@" + crash);
  std::string opnames;
  for (const Op& op : ops) {
    opnames += std::string(" ") + OpName(op.kind);
    if (opt_.verbose) {
      for (const Write& w : op.writes) {
        opnames += "(" + std::string(OpName(w.kind)) + " " + w.cf + "/" +
                   w.key + (w.end.empty() ? "" : ".." + w.end) +
                   (w.value.empty() ? "" : "=" + w.value) + ")";
      }
      if (!op.cf.empty() && op.writes.empty()) opnames += "(" + op.cf + ")";
    }
  }
  Note(desc + ":" + opnames);
  counts["lives"]++;
  counts[std::string("mode_") + ModeName(p.mode)]++;

  ChildResult r = RunChild(
      [&](FILE* out) {
        rocksdb::Options o = BaseOptions();
        if (p.mode != Mode::kWrapper) o.memtable_factory = Factory(pool_);
        std::vector<rocksdb::ColumnFamilyDescriptor> cfds = Cfds(o);
        if (p.two_pools) cfds[2].options.memtable_factory = Factory(pool2_);
        std::vector<rocksdb::ColumnFamilyHandle*> hs;
        rocksdb::DB* db = nullptr;
        rocksdb::Status s =
            OpenAsLife(out, p.mode == Mode::kWrapper, !p.two_pools, o, db_,
                       pool_, cfds, &hs, &db);
        if (!s.ok()) {
          std::fprintf(out, "X\t%s\n", OneLine(s.ToString()).c_str());
          return;
        }
        std::fprintf(out, "O\n");
        Dump(out, db, hs);
        std::fprintf(out, "S\n");  // the dump is complete
        std::map<std::string, rocksdb::ColumnFamilyHandle*> cfh;
        for (auto* h : hs) cfh[h->GetName()] = h;
        for (size_t i = 0; i < ops.size(); i++) {
          if (p.end == End::kKill && i == p.kill_at) raise(SIGKILL);
          if (!ExecOp(out, db, o, db_, &cfh, ops[i], p.mode)) return;
          std::fprintf(out, "A\t%zu\n", i);
        }
        if (p.end == End::kKill) raise(SIGKILL);
        if (p.end == End::kCloseNoFlush) {
          s = db->SetDBOptions({{"avoid_flush_during_shutdown", "true"}});
          if (!s.ok()) {
            std::fprintf(out, "F\t%s\n", OneLine(s.ToString()).c_str());
            return;
          }
        }
        for (auto& [n, h] : cfh) db->DestroyColumnFamilyHandle(h);
        s = db->Close();
        delete db;
        if (!s.ok()) {
          std::fprintf(out, "F\tclose: %s\n", OneLine(s.ToString()).c_str());
          return;
        }
        std::fprintf(out, "C\n");
      },
      crash);

  // What the open did.
  bool opened = false, closed = false;
  std::string refusal, failure, asked;
  std::vector<std::string> dump;
  bool in_dump = false;
  std::vector<size_t> acks;
  for (const std::string& l : r.lines) {
    if (l == "O") {
      opened = in_dump = true;
    } else if (l == "S") {
      in_dump = false;
    } else if (in_dump) {
      dump.push_back(l);
    } else if (l.rfind("X\t", 0) == 0) {
      refusal = l.substr(2);
    } else if (l.rfind("R\t", 0) == 0) {
      asked = l.substr(2);
    } else if (l.rfind("F\t", 0) == 0) {
      failure = l.substr(2);
    } else if (l.rfind("A\t", 0) == 0) {
      acks.push_back(std::strtoul(l.c_str() + 2, nullptr, 10));
    } else if (l.rfind("B\t", 0) == 0) {
      char* end = nullptr;
      const long image = std::strtol(l.c_str() + 2, &end, 10);
      images_[image].backup_id =
          static_cast<uint32_t>(std::strtoul(end + 1, nullptr, 10));
    } else if (l == "C") {
      closed = true;
    } else if (l.rfind("N\t", 0) == 0) {
      counts[l.substr(2)]++;
    }
  }
  if (!r.killed && r.exit_code != 0) {
    Finding(desc + ": the process failed (exit " + std::to_string(r.exit_code) +
            ") " + refusal + failure);
    return;
  }
  if (!opened && r.killed) {
    // Killed inside the open: a recovery phase.
    counts["kills_in_recovery"]++;
    interrupted_in_a_row_++;
    mid_recovery_ = true;
    Note("killed inside the open (" + crash + ")");
    return;
  }
  interrupted_in_a_row_ = 0;
  if (!asked.empty()) Note("the open asked for recovery: " + asked);
  const PoolModel& pm = pool_model_;
  const bool extends = !pm.lists || pm.base == dir_;
  if (!opened) {
    // Refused. Allowed only when the pool's lists do not extend this
    // directory's state, or the directory was replaced offline.
    counts["refusals"]++;
    Note("refused: " + refusal);
    if (p.two_pools) {
      if (refusal.find("two pools") == std::string::npos) {
        Finding(
            "a DB with column families on two pool_dirs was refused "
            "without naming the pools: " +
            refusal);
      }
      counts["two_pools_refused"]++;
      return;  // nothing changed; the next life uses one pool
    }
    if (mid_recovery_ || (extends && !touched_)) {
      Finding(
          "dead end: the open of a DB whose pool holds lists extending "
          "exactly its state was refused: " +
          refusal);
      return;
    }
    if (refusal.find("flintkv_tool") == std::string::npos &&
        refusal.find("RecoveryOptions") == std::string::npos) {
      Finding("a refusal names no way forward: " + refusal);
      return;
    }
    // Nothing changed: the directory still holds what it held. Then the
    // remedy: drop the leftovers.
    const State before = dir_;
    MeasureDir();
    if (dir_ != before) {
      Finding("a refused open changed the DB:" + dir_.Diff(before));
      return;
    }
    Discard();
    return;
  }
  // Opened: the DB must hold a state the model allows.
  std::string err;
  State got = ParseDump(dump, &err);
  if (!err.empty()) {
    Finding(desc + ": reading the DB after the open failed: " + err);
    return;
  }
  bool ok;
  std::string want_desc;
  State want;
  if (!pm.lists) {
    want = dir_;
    ok = got == want;
    want_desc = "the directory's state (the pool had no lists)";
  } else if (extends) {
    want = pm.full;
    ok = pm.Completes(got);
    want_desc = "every acknowledged write";
  } else if (absorbed_.count(pm.id) || pm.Completes(pm.base)) {
    // Lists already recovered into this DB (or holding nothing the
    // directory of their own DB lacked): dropping them keeps the DB. Or,
    // as below, replayed into every acknowledged write of their life.
    want = dir_;
    ok = got == want || pm.Completes(got);
    want_desc =
        "the DB unchanged (its lists were recovered already), or every "
        "acknowledged write of the life that left them";
  } else {
    // A copy of the DB the lists' life made no later change durable in
    // (docs/identity_model.md: a copy of the same life, no flush or drop
    // since) is completed by them: exactly every acknowledged write of
    // that life. Anything else must be refused.
    want = pm.full;
    ok = pm.Completes(got);
    want_desc =
        "a refusal (the pool's lists extend another state of the DB), or "
        "every acknowledged write of the life that left them";
  }
  if (!ok) {
    Finding(desc + ": after the open the DB holds" + got.Diff(want) +
            "; the model allows " + want_desc +
            (got == pm.full ? " [it holds the pool's state]" : "") +
            (got == dir_ ? " [it holds the directory's state: lists dropped]"
                         : ""));
    return;
  }
  if (pm.lists && !extends && got != dir_) counts["copies_completed"]++;
  if (pm.lists && pm.base != pm.full) absorbed_.insert(pm.id);
  acked_ = got;
  dir_ = got;  // recovery flushes what it replayed; an open is as before
  touched_ = false;
  mid_recovery_ = false;
  pool_model_ = PoolModel();
  if (p.two_pools) counts["two_pools_opened"]++;

  // The life's operations.
  for (size_t i : acks) {
    const Op& op = ops[i];
    counts[std::string("op_") + OpName(op.kind)]++;
    switch (op.kind) {
      case OpKind::kPut:
      case OpKind::kMerge:
      case OpKind::kDelete:
      case OpKind::kDeleteRange:
      case OpKind::kBatch:
        for (const Write& w : op.writes) ApplyWrite(&acked_, w);
        break;
      case OpKind::kDropCreateCf:
        acked_.cf[op.cf].clear();
        break;
      case OpKind::kCheckpoint:
      case OpKind::kBackup: {
        // A checkpoint flushes first; a backup without flush is measured
        // below, from a restored copy.
        Image& im = images_[op.image];
        im.state = acked_;
        im.absorbed = absorbed_;
        im.measured = op.kind == OpKind::kCheckpoint || op.flag;
        break;
      }
      default:
        break;
    }
  }
  if (!failure.empty()) {
    Note("failed: " + failure);
    if (failure.find("flintkv") == std::string::npos || p.two_pools) {
      Finding(desc + ": an operation failed: " + failure);
      return;
    }
  }
  if (r.killed) {
    counts["kills"]++;
    Note("killed after " + std::to_string(acks.size()) + " acknowledged ops");
  }
  // A column family dropped with unflushed data leaves its list in the pool
  // (the next recovery discards it): the pool may hold lists then too.
  bool dropped = false;
  for (size_t i : acks) dropped |= ops[i].kind == OpKind::kDropCreateCf;
  const bool unflushed = !closed || p.end == End::kCloseNoFlush ||
                         p.mode == Mode::kPlainWal || p.two_pools || dropped;
  // What the directory alone holds now (after a clean close too, which the
  // check below holds to every acknowledged write), and what the pool's
  // lists complete.
  MeasureDir();
  pool_model_.lists = unflushed;
  pool_model_.base = dir_;
  pool_model_.full = acked_;
  pool_model_.id = life;
  if (r.killed && !crash.empty() && acks.size() < ops.size() &&
      !ops[acks.size()].writes.empty()) {
    pool_model_.has_alt = true;
    pool_model_.alt_full = acked_;
    for (const Write& w : ops[acks.size()].writes) {
      ApplyWrite(&pool_model_.alt_full, w);
    }
  }
  if (closed && !unflushed && dir_ != acked_) {
    Finding(desc + ": a clean close left the directory without" +
            dir_.Diff(acked_));
  }
  // Backups without a flush hold what the directory held then: measure
  // them from a restored copy.
  for (Image& im : images_) {
    if (im.measured || im.backup_id == 0) continue;
    const std::string tmp = root_ + "/restored";
    Sh("rm -rf " + tmp);
    if (!RestoreBackup(im, tmp)) return;
    Measure(tmp, &im.state);
    im.measured = true;
    Sh("rm -rf " + tmp);
  }
}

// BackupEngine restores backup im into dir, in a child.
bool Checker::RestoreBackup(const Image& im, const std::string& dir) {
  ChildResult r = RunChild([&](FILE* f) {
    rocksdb::BackupEngineReadOnly* be = nullptr;
    rocksdb::Status s = rocksdb::BackupEngineReadOnly::Open(
        rocksdb::Env::Default(), rocksdb::BackupEngineOptions(im.path), &be);
    if (s.ok()) {
      s = be->RestoreDBFromBackup(rocksdb::RestoreOptions(), im.backup_id, dir,
                                  dir);
      delete be;
    }
    if (!s.ok()) std::fprintf(f, "E\t%s\n", OneLine(s.ToString()).c_str());
  });
  if (!r.lines.empty() || r.exit_code != 0) {
    Finding("restoring backup " + std::to_string(im.backup_id) +
            " failed: " + (r.lines.empty() ? "" : r.lines[0]));
    return false;
  }
  return true;
}

void Checker::Discard() {
  counts["discards"]++;
  ChildResult r = RunChild([&](FILE* f) {
    std::vector<std::string> dropped;
    rocksdb::Status s = flintkv::DiscardLeftovers(pool_, 0, false, &dropped);
    if (!s.ok() && !s.IsNotFound()) {
      std::fprintf(f, "E\t%s\n", OneLine(s.ToString()).c_str());
    }
  });
  if (!r.lines.empty() || r.exit_code != 0) {
    Finding("discard failed: " + (r.lines.empty() ? "" : r.lines[0]));
    return;
  }
  Note("discarded the pool's leftovers");
  acked_ = dir_;
  pool_model_ = PoolModel();
  touched_ = false;
}

void Checker::SaveDirCopy() {
  Image im;
  im.kind = "dircopy";
  im.path = root_ + "/image" + std::to_string(images_.size());
  Sh("cp -a " + db_ + " " + im.path);
  im.state = dir_;
  im.measured = true;
  im.absorbed = absorbed_;
  images_.push_back(im);
  counts["dircopies"]++;
  Note("copied the DB directory to " + im.path);
}

const Image* Checker::PickImage() {
  std::vector<int> usable;
  for (size_t i = 0; i < images_.size(); i++) {
    if (images_[i].measured) usable.push_back(static_cast<int>(i));
  }
  return usable.empty() ? nullptr : &images_[usable[R(usable.size())]];
}

bool Checker::PutImage(const Image& im, const std::string& dir) {
  if (im.kind == "backup") return RestoreBackup(im, dir);
  Sh("cp -a " + im.path + " " + dir);
  return true;
}

void Checker::Restore() {
  const Image* pick = PickImage();
  if (!pick) return;
  const Image& im = *pick;
  Sh("rm -rf " + db_);
  if (!PutImage(im, db_)) return;
  counts[std::string("restore_") + im.kind]++;
  Note("restored the DB from " + im.kind + " " + im.path +
       (im.backup_id ? " #" + std::to_string(im.backup_id) : ""));
  dir_ = im.state;
  acked_ = im.state;
  absorbed_ = im.absorbed;
  touched_ = true;
}

// A checkpoint, backup or directory copy opened at a path of its own with
// the DB's pool (the same config), the DB still where it was; then closed.
// The copy must not take the DB's unflushed writes: it is refused, or it
// opens as the image it is (the pool's lists dropped only if the DB's own
// directory holds every acknowledged write: its WAL has them, S5), or,
// when the lists do not extend the DB's directory any more (it was
// restored or replaced), the copy is completed by them.
// Or (a pair) the DB directory and its pool copied together to paths of
// their own, the originals kept: the copy recovers as the DB itself would.
void Checker::OpenCopy() {
  const bool pair = Chance(30);
  const Image* im = pair ? nullptr : PickImage();
  if (!pair && !im) return;
  if (pair && access(db_.c_str(), F_OK) != 0) return;
  const bool wrapper = On("wrapper") && (!On("plain") || Chance(50));
  const std::string other = root_ + "/other", other_pool = root_ + "/opool";
  const std::string pool = pair ? other_pool : pool_;
  Sh("rm -rf " + other + " " + other_pool);
  if (pair) {
    Sh("cp -a " + db_ + " " + other + " && cp -a " + pool_ + " " + pool);
  } else if (!PutImage(*im, other)) {
    return;
  }
  counts[pair ? "pair_copy_opens" : "copy_opens"]++;
  const std::string desc =
      "opened " +
      (pair ? "a copy of the DB and its pool, at " + other + " and " + pool
            : im->kind + " " + im->path + " at " + other +
                  " with the DB's pool") +
      " (" + (wrapper ? "OpenDB" : "plain") + ")";
  ChildResult r = RunChild([&](FILE* out) {
    rocksdb::Options o = BaseOptions();
    if (!wrapper) o.memtable_factory = Factory(pool);
    std::vector<rocksdb::ColumnFamilyHandle*> hs;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s =
        OpenAsLife(out, wrapper, true, o, other, pool, Cfds(o), &hs, &db);
    if (!s.ok()) {
      std::fprintf(out, "X\t%s\n", OneLine(s.ToString()).c_str());
      return;
    }
    Dump(out, db, hs);
    for (auto* h : hs) db->DestroyColumnFamilyHandle(h);
    s = db->Close();
    delete db;
    if (!s.ok()) std::fprintf(out, "E\tclose: %s\n", s.ToString().c_str());
  });
  Sh("rm -rf " + other + " " + other_pool);
  std::string refusal, err;
  for (const std::string& l : r.lines) {
    if (l.rfind("X\t", 0) == 0) refusal = l.substr(2);
  }
  const State got = ParseDump(r.lines, &err);
  const PoolModel& pm = pool_model_;
  const bool extends = pm.base == dir_;
  if (r.exit_code != 0 || !err.empty()) {
    Finding(desc + ": failed (exit " + std::to_string(r.exit_code) + ") " +
            err);
    return;
  }
  if (!refusal.empty()) {
    Note(desc + ": refused: " + refusal);
    counts[pair ? "pair_copy_opens_refused" : "copy_opens_refused"]++;
    if (!pm.lists) {
      Finding(desc + ": refused with no lists in the pool: " + refusal);
    } else if (pair && extends && !touched_) {
      Finding(desc + ": dead end: the copy of a DB with the pool whose " +
              "lists extend exactly its state was refused: " + refusal);
    } else if (refusal.find("flintkv_tool") == std::string::npos &&
               refusal.find("RecoveryOptions") == std::string::npos) {
      Finding(desc + ": a refusal names no way forward: " + refusal);
    }
    return;  // nothing changed
  }
  Note(desc);
  const bool full = pm.lists && pm.Completes(got);
  bool ok;
  const State& want = pair ? dir_ : im->state;
  if (pair) {
    // As the DB's own open: every acknowledged write where the lists
    // extend its state; else also the directory's state (lists dropped).
    ok = !pm.lists ? got == dir_
                   : full || ((!extends || touched_) && got == dir_);
  } else {
    // The write in flight at a kill may be in the DB's directory already
    // (its WAL, a flush): then the lists hold nothing it lacks either.
    const bool as_image =
        got == im->state && (!pm.lists || pm.Completes(pm.base));
    ok = as_image || (!extends && full);
  }
  if (!ok) {
    Finding(desc + ": the copy holds" + got.Diff(want) +
            (pm.lists
                 ? std::string(" (the pool held the DB's lists") +
                       (extends ? ", which extend the DB's directory)" : ")")
                 : std::string()) +
            (pm.lists && got == pm.full ? " [it holds the pool's state]" : ""));
    return;
  }
  if (pair) return;  // the DB's own pool is as it was
  if (full) counts["copies_completed_elsewhere"]++;
  // Opened: whatever the pool held of the DB is gone (replayed into the
  // copy, or dropped as in the DB's WAL); the copy's life closed cleanly.
  pool_model_ = PoolModel();
}

void Checker::SavePool() {
  PoolImage pi;
  pi.path = root_ + "/poolimage" + std::to_string(pool_images_.size());
  Sh("cp " + pool_ + "/flintkv.pool " + pi.path);
  pi.model = pool_model_;
  pool_images_.push_back(pi);
  counts["pool_saves"]++;
  Note("copied the pool file to " + pi.path);
}

void Checker::RestorePool() {
  if (pool_images_.empty()) return;
  const PoolImage& pi = pool_images_[R(pool_images_.size())];
  Sh("cp " + pi.path + " " + pool_ + "/flintkv.pool");
  pool_model_ = pi.model;
  // The DB may have had other lives since the image: the pool can no
  // longer tell that its lists extend the DB, and may refuse (naming a
  // remedy) where it would have replayed them.
  touched_ = true;
  counts["pool_restores"]++;
  Note("put the pool image " + pi.path + " back");
}

void Checker::DeleteRecord() {
  const std::string f = db_ + "/FLINTKV_RECOVERED_LISTS";
  if (access(f.c_str(), F_OK) != 0) return;
  if (Chance(50)) {
    Sh("rm -f " + f);
    Note("deleted the record of recovered lists");
  } else {
    Sh("truncate -s 0 " + f);
    Note("truncated the record of recovered lists");
  }
  counts["record_deletes"]++;
}

void Checker::Destroy() {
  ChildResult r = RunChild([&](FILE* f) {
    rocksdb::Status s = rocksdb::DestroyDB(db_, BaseOptions());
    if (!s.ok()) std::fprintf(f, "E\t%s\n", OneLine(s.ToString()).c_str());
  });
  if (!r.lines.empty() || r.exit_code != 0) {
    Finding("DestroyDB failed");
    return;
  }
  Sh("rm -rf " + db_);
  counts["destroys"]++;
  Note("DestroyDB; a new DB will be made at the same path");
  dir_ = State();
  acked_ = State();
  absorbed_.clear();
  touched_ = true;
}

int Checker::Run() {
  Sh("rm -rf " + root_ + " && mkdir -p " + root_);
  for (step_ = 0; step_ < opt_.steps && !finding_; step_++) {
    counts["steps"]++;
    const bool db_exists = access(db_.c_str(), F_OK) == 0;
    const bool pool_exists =
        access((pool_ + "/flintkv.pool").c_str(), F_OK) == 0;
    uint64_t r = R(100);
    if (mid_recovery_ || !db_exists || r < 70) {
      Life(PlanLife());
    } else if (r < 75 && On("dircopy")) {
      SaveDirCopy();
    } else if (r < 84 && On("restore")) {
      Restore();
    } else if (r < 88 && On("pool_image") && pool_exists) {
      SavePool();
    } else if (r < 92 && On("pool_image")) {
      RestorePool();
    } else if (r < 96 && On("record")) {
      DeleteRecord();
    } else if (r < 98 && On("destroy")) {
      Destroy();
    } else if (r >= 98 && On("copy_open") && pool_exists) {
      OpenCopy();
    }
  }
  if (opt_.keep) return finding_ ? 1 : 0;
  // The last check: the DB as its last life left it, recovered.
  if (!finding_) {
    LifePlan p;
    p.mode = Mode::kWrapper;
    p.end = End::kClose;
    Life(p);
    if (mid_recovery_ && !finding_) Life(p);
  }
  if (!finding_) Sh("rm -rf " + root_);
  return finding_ ? 1 : 0;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&](const char* name) -> const char* {
      size_t n = std::strlen(name);
      return a.compare(0, n, name) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = val("--seeds=")) {
      char* end = nullptr;
      o->seed_lo = std::strtoull(v, &end, 10);
      o->seed_hi =
          *end == '-' ? std::strtoull(end + 1, nullptr, 10) : o->seed_lo;
    } else if (const char* v = val("--steps=")) {
      o->steps = std::atoi(v);
    } else if (const char* v = val("--dir=")) {
      o->dir = v;
    } else if (const char* v = val("--ops=")) {
      std::string s = v;
      for (size_t at = 0; at <= s.size();) {
        size_t c = s.find(',', at);
        if (c == std::string::npos) c = s.size();
        if (c > at) o->ops.insert(s.substr(at, c - at));
        at = c + 1;
      }
    } else if (a == "--verbose") {
      o->verbose = true;
    } else if (a == "--keep") {
      o->keep = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s --seeds=A[-B] [--steps=N] [--dir=D] "
                   "[--ops=k1,k2,...] [--verbose] [--keep]\n",
                   argv[0]);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  std::system(("mkdir -p " + o.dir).c_str());
  int findings = 0;
  std::map<std::string, int> totals;
  for (uint64_t s = o.seed_lo; s <= o.seed_hi; s++) {
    Checker c(o, s);
    findings += c.Run();
    for (auto& [k, v] : c.counts) totals[k] += v;
  }
  std::printf("seeds %llu-%llu: %d with findings\n",
              static_cast<unsigned long long>(o.seed_lo),
              static_cast<unsigned long long>(o.seed_hi), findings);
  for (auto& [k, v] : totals) std::printf("  %s %d\n", k.c_str(), v);
  return findings ? 1 : 0;
}

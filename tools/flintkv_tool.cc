// flintkv_tool: recover / inspect / verify FlintKV pools of RocksDB DBs.
//
//   flintkv_tool recover --db=DIR --pool_dir=DIR [--watermark=auto|on|off]
//                        [--quiet] [--allow_foreign_open]
//                        [--accept_incarnation=HEX]
//                        [--allow_wal_delete_range] [--allow_older_db]
//   flintkv_tool inspect --pool_dir=DIR [--db=DIR | --comparator=NAME]
//   flintkv_tool verify  --pool_dir=DIR [--db=DIR | --comparator=NAME]
//   flintkv_tool discard --pool_dir=DIR [--incarnation=HEX] [--confirm]
//
// Exit status (also in --help and docs/rocksdb_recovery.md): 0 success, 1
// an error (verify: the pool is damaged), 2 bad usage, 3 the pool is in use
// by another process (open there; nothing was read or changed).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flintkv/inspect.h"
#include "flintkv/recovery.h"
#include "rocksdb/convenience.h"
#include "rocksdb/env.h"
#include "rocksdb/utilities/options_util.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInUse = 3;

int Usage(FILE* out = stderr) {
  std::fprintf(
      out,
      "usage:\n"
      "  flintkv_tool recover --db=DIR --pool_dir=DIR "
      "[--watermark=auto|on|off] [--quiet]\n"
      "                       [--allow_foreign_open] "
      "[--accept_incarnation=HEX]\n"
      "                       [--allow_wal_delete_range] [--allow_older_db]\n"
      "      replay unflushed memtables of the pool into the DB, flush, "
      "close;\n"
      "      only the DB's own memtables (its OPTIONS file and IDENTITY say "
      "which);\n"
      "      the overrides are named by the refusal they apply to\n"
      "  flintkv_tool inspect --pool_dir=DIR [--db=DIR | --comparator=NAME]\n"
      "      list the pool's memtables: state, entries, sequence range\n"
      "  flintkv_tool verify --pool_dir=DIR [--db=DIR | --comparator=NAME]\n"
      "      structural check (sorted, acyclic, in bounds, headers) and "
      "RocksDB's\n"
      "      per-key checksums (memtable_protection_bytes_per_key); exit 1 "
      "if broken\n"
      "  flintkv_tool discard --pool_dir=DIR [--incarnation=HEX] "
      "[--confirm]\n"
      "      drop the unflushed memtables of a DB that no longer exists "
      "(destroyed,\n"
      "      or replaced by a new DB at its path), and their writes; only "
      "that\n"
      "      life's (or family's) with --incarnation; without --confirm, "
      "only\n"
      "      lists what it would drop\n"
      "  Memtables are sorted by their column family's comparator: --db "
      "reads it\n"
      "  from the DB's OPTIONS file, --comparator names one for all (e.g.\n"
      "  rocksdb.ReverseBytewiseComparator); with neither, bytewise is "
      "assumed\n"
      "  and a list not sorted that way is reported, order unchecked.\n"
      "exit status:\n"
      "  0 success; 1 an error (verify: the pool is damaged); 2 bad usage;\n"
      "  3 the pool is in use by another process (not read, not changed)\n");
  return out == stderr ? kExitUsage : kExitOk;
}

// The exit status for a failed command.
int ErrorExit(const rocksdb::Status& s) {
  return s.IsBusy() ? kExitInUse : kExitError;
}

const char* StateName(uint32_t s) {
  switch (s) {
    case 1:
      return "active";
    case 2:
      return "sealed";
    case 3:
      return "retired";
  }
  return "?";
}

// Recovery's progress lines, one a line on stderr, every level alike.
class StderrLogger : public rocksdb::Logger {
 public:
  void Logv(const char* format, va_list ap) override {
    std::vfprintf(stderr, format, ap);
    std::fputc('\n', stderr);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    if (level >= GetInfoLogLevel()) Logv(format, ap);
  }
};

int Recover(std::map<std::string, std::string>& flags) {
  if (!flags.count("db") || !flags.count("pool_dir")) return Usage();
  const std::string db = flags["db"];
  flintkv::RecoveryOptions ro;
  ro.memtable.pool_dir = flags["pool_dir"];
  if (!flags.count("quiet")) ro.info_log = std::make_shared<StderrLogger>();
  ro.allow_foreign_open = flags.count("allow_foreign_open") != 0;
  ro.allow_wal_delete_range = flags.count("allow_wal_delete_range") != 0;
  ro.allow_older_db = flags.count("allow_older_db") != 0;
  if (flags.count("accept_incarnation")) {
    ro.accept_incarnation =
        std::strtoull(flags["accept_incarnation"].c_str(), nullptr, 16);
  }
  std::string wm = flags.count("watermark") ? flags["watermark"] : "auto";
  if (wm == "on") {
    ro.watermark = flintkv::WatermarkMode::kOn;
  } else if (wm == "off") {
    ro.watermark = flintkv::WatermarkMode::kOff;
  } else if (wm != "auto") {
    return Usage();
  }
  // The DB's own options (comparator, merge operator, CF list) from its
  // OPTIONS file; the memtable factory is replaced by flintkv on pool_dir.
  rocksdb::ConfigOptions co;
  co.ignore_unknown_options = true;
  co.ignore_unsupported_options = true;
  // Prepares no object: the flintkv factory in a moved or restored DB's
  // OPTIONS file names the old pool_dir, which must not be opened (or
  // created); RecoverDB puts a factory on --pool_dir in its place.
  co.invoke_prepare_options = false;
  co.env = rocksdb::Env::Default();
  rocksdb::DBOptions dbo;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  rocksdb::Status s = rocksdb::LoadLatestOptions(co, db, &dbo, &cfs);
  rocksdb::Options options(dbo, rocksdb::ColumnFamilyOptions());
  if (!s.ok()) {
    std::fprintf(stderr,
                 "flintkv_tool: cannot load the OPTIONS file of %s (%s); "
                 "using default options for every column family\n",
                 db.c_str(), s.ToString().c_str());
    options = rocksdb::Options();
    cfs.clear();
  }
  flintkv::RecoveryReport report;
  s = flintkv::RecoverDB(options, db, cfs, ro, &report);
  if (!s.ok()) {
    std::fprintf(stderr, "flintkv_tool recover: %s\n", s.ToString().c_str());
    return ErrorExit(s);
  }
  std::printf("recovered %s from %s: %s\n", db.c_str(),
              ro.memtable.pool_dir.c_str(), report.ToString().c_str());
  return kExitOk;
}

int Inspect(std::map<std::string, std::string>& flags, bool verify) {
  if (!flags.count("pool_dir")) return Usage();
  flintkv::InspectOptions io;
  if (flags.count("db")) io.db = flags["db"];
  if (flags.count("comparator")) io.comparator_name = flags["comparator"];
  flintkv::PoolSummary ps;
  rocksdb::Status s = flintkv::InspectPool(flags["pool_dir"], &ps, io);
  if (s.IsNotFound() || ps.path.empty()) {
    std::fprintf(stderr, "flintkv_tool %s: %s\n", verify ? "verify" : "inspect",
                 s.ToString().c_str());
    return ErrorExit(s);
  }
  if (!verify) {
    std::printf(
        "pool %s: %llu MiB (%s), %llu MiB in use, watermark %s%s\n",
        ps.path.c_str(), (unsigned long long)(ps.size >> 20),
        ps.is_pmem ? "fsdax PMEM" : "emulated PMEM",
        (unsigned long long)(ps.bytes_in_use >> 20),
        ps.watermark_enabled ? "enabled, W=" : "off",
        ps.watermark_enabled ? std::to_string(ps.watermark).c_str() : "");
    std::printf("%8s %-10s %-8s %4s %16s %10s %8s %22s %7s %s\n", "list",
                "kind", "state", "cf", "incarnation", "entries", "uncommit",
                "seq range", "MiB", "created / notes");
    for (const auto& l : ps.lists) {
      char created[64] = "-";
      if (l.created_micros) {
        time_t t = static_cast<time_t>(l.created_micros / 1000000);
        struct tm tm;
        localtime_r(&t, &tm);
        std::strftime(created, sizeof(created), "%F %T", &tm);
      }
      std::string range = l.entries ? std::to_string(l.min_seq) + ".." +
                                          std::to_string(l.max_seq)
                                    : "-";
      char life[24] = "-";
      if (l.kind == 2) {
        std::snprintf(life, sizeof(life), "%016llx",
                      (unsigned long long)l.incarnation);
      }
      std::printf(
          "%8llu %-10s %-8s %4u %16s %10llu %8llu %22s %7.1f %s%s%s%s%s\n",
          (unsigned long long)l.list_id,
          l.kind == 2 ? "memtable" : "standalone", StateName(l.state),
          l.column_family_id, life, (unsigned long long)l.entries,
          (unsigned long long)l.uncommitted, range.c_str(),
          l.chunk_bytes / 1048576.0, created,
          l.leftover ? " UNFLUSHED (run flintkv_tool recover)" : "",
          l.family_dropped ? " family dropped" : "",
          l.batch_mode ? " batch_mode" : "",
          l.error.empty() ? "" : (" ERROR: " + l.error).c_str());
    }
  }
  if (!s.ok()) {
    std::fprintf(stderr, "flintkv_tool %s: FAILED: %s\n",
                 verify ? "verify" : "inspect", s.ToString().c_str());
    return ErrorExit(s);
  }
  if (verify) {
    uint64_t nodes = 0;
    for (const auto& l : ps.lists) nodes += l.entries + l.uncommitted;
    std::printf(
        "pool %s OK: %zu lists, %llu nodes: sorted, acyclic, in "
        "bounds, headers valid, RocksDB entries decode and match their "
        "per-key checksums where stored\n",
        ps.path.c_str(), ps.lists.size(), (unsigned long long)nodes);
  }
  return kExitOk;
}

}  // namespace

int Discard(std::map<std::string, std::string>& flags) {
  if (!flags.count("pool_dir")) return Usage();
  uint64_t inc = 0;
  if (flags.count("incarnation")) {
    char* end = nullptr;
    inc = std::strtoull(flags["incarnation"].c_str(), &end, 16);
    if (inc == 0 || *end != 0) return Usage();
  }
  const bool confirm = flags.count("confirm") != 0;
  std::vector<std::string> dropped;
  rocksdb::Status s =
      flintkv::DiscardLeftovers(flags["pool_dir"], inc, !confirm, &dropped);
  if (!s.ok()) {
    std::fprintf(stderr, "flintkv_tool discard: %s\n", s.ToString().c_str());
    return ErrorExit(s);
  }
  for (const auto& d : dropped) {
    std::printf("%s %s\n", confirm ? "dropped" : "would drop", d.c_str());
  }
  if (dropped.empty()) std::printf("no unflushed memtable to drop\n");
  if (!confirm && !dropped.empty()) {
    std::printf(
        "their writes are lost once dropped; add --confirm to drop them\n");
    return kExitUsage;
  }
  return kExitOk;
}

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") return Usage(stdout);
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; i++) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) return Usage();
    size_t eq = a.find('=');
    flags[a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "" : a.substr(eq + 1);
  }
  if (cmd == "recover") return Recover(flags);
  if (cmd == "inspect") return Inspect(flags, false);
  if (cmd == "verify") return Inspect(flags, true);
  if (cmd == "discard") return Discard(flags);
  return Usage();
}

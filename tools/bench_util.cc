#include "tools/bench_util.h"

#include <errno.h>   // program_invocation_short_name (GNU)
#include <limits.h>  // PATH_MAX
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

namespace flintkv {
namespace bench {

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "%s: FATAL: %s\n", program_invocation_short_name,
               msg.c_str());
  std::fflush(stdout);
  std::exit(1);
}

void Check(const Status& s, const std::string& what) {
  if (!s.ok()) Die(what + ": " + s.ToString());
}

std::string CpuInfoField(const std::string& field) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t b = line.find_first_not_of(" \t", colon + 1);
        return b == std::string::npos ? "" : line.substr(b);
      }
    }
  }
  return "";
}

bool HasFlag(const std::string& flags, const std::string& f) {
  std::stringstream ss(flags);
  std::string w;
  while (ss >> w) {
    if (w == f) return true;
  }
  return false;
}

int AffinityCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  return CPU_COUNT(&set);
}

void CpuTimes(uint64_t* steal, uint64_t* total) {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;
  *steal = *total = 0;
  for (int i = 0; i < 10; i++) {
    uint64_t v = 0;
    if (!(in >> v)) break;
    if (i < 8) *total += v;  // guest time is already in user/nice
    if (i == 7) *steal = v;
  }
}

std::string LoadAvg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

namespace {
// The mount holding `path` (longest mount-point prefix in mountinfo): its
// file system type and super-block options.
bool MountOf(const std::string& path, std::string* fstype,
             std::string* options) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  size_t best = 0;
  bool found = false;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point opts [tags...] - type src super
    std::istringstream f(line);
    std::string id, parent, dev, root, point, opts, tok;
    f >> id >> parent >> dev >> root >> point >> opts;
    while (f >> tok && tok != "-") {
    }
    std::string type, source, super;
    f >> type >> source >> super;
    const bool prefix = path.compare(0, point.size(), point) == 0 &&
                        (point == "/" || path.size() == point.size() ||
                         path[point.size()] == '/');
    if (prefix && point.size() >= best) {
      best = point.size();
      *fstype = type;
      *options = super;
      found = true;
    }
  }
  return found;
}

std::string OptionValue(const std::string& options, const std::string& key,
                        const std::string& absent) {
  std::istringstream f(options);
  std::string item;
  while (std::getline(f, item, ',')) {
    if (item.compare(0, key.size() + 1, key + "=") == 0) {
      return item.substr(key.size() + 1);
    }
  }
  return absent;
}
}  // namespace

std::string PoolPages(const std::string& dir) {
  char real[PATH_MAX];
  const std::string path = realpath(dir.c_str(), real) ? real : dir;
  std::string fstype, options;
  if (!MountOf(path, &fstype, &options)) return "page size unknown";
  if (fstype != "tmpfs") return fstype + ", page size not inspected";
  const std::string huge = OptionValue(options, "huge", "never");
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string all, shmem = "unknown";
  std::getline(in, all);
  const size_t open = all.find('['), close = all.find(']');
  if (open != std::string::npos && close > open) {
    shmem = all.substr(open + 1, close - open - 1);
  }
  // "force" applies huge pages to every tmpfs mount, "deny" to none; else
  // the mount's own option decides (libpmem does not madvise).
  const bool big =
      shmem == "force" ||
      (shmem != "deny" && (huge == "always" || huge == "within_size"));
  return std::string(big ? "2 MiB" : "4 KiB") + " pages: tmpfs huge=" + huge +
         ", shmem_enabled=" + shmem;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

std::string NowString() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S %Z", std::localtime(&t));
  return buf;
}

double PercentileUs(std::vector<uint32_t>* v, double p) {
  if (v->empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(v->size() - 1));
  std::nth_element(v->begin(), v->begin() + k, v->end());
  return (*v)[k] / 1000.0;
}

}  // namespace bench
}  // namespace flintkv

#include "tools/bench_util.h"

#include <errno.h>  // program_invocation_short_name (GNU)
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

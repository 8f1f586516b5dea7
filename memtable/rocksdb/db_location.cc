#include "memtable/rocksdb/db_location.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace flintkv {
namespace rocks {
namespace {

constexpr const char* kHeader = "flintkv-db-location 1";
// The newest lines kept: a life records one directory, two when another
// DB of its process wrote its OPTIONS file at the same moment.
constexpr size_t kLinesKept = 32;

std::string RecordPath(const std::string& pool_dir) {
  return pool_dir + "/flintkv.db_location";
}

// "<incarnation> <dir>" lines, oldest first.
std::vector<std::pair<uint64_t, std::string>> ReadRecord(
    const std::string& pool_dir) {
  std::vector<std::pair<uint64_t, std::string>> out;
  std::ifstream in(RecordPath(pool_dir));
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return out;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp + 1 >= line.size()) continue;
    char* end = nullptr;
    const uint64_t inc = std::strtoull(line.c_str(), &end, 10);
    if (end != line.c_str() + sp || inc == 0) continue;
    out.emplace_back(inc, line.substr(sp + 1));
  }
  return out;
}

}  // namespace

std::vector<std::string> OpenOptionsFileDirs() {
  std::vector<std::string> dirs;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return dirs;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[4096];
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    const std::string path(target, static_cast<size_t>(n));
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0) continue;
    const std::string name = path.substr(slash + 1);
    if (name.rfind("OPTIONS-", 0) != 0 || name.size() < 15 ||
        name.compare(name.size() - 6, 6, ".dbtmp") != 0 ||
        path.find('\n') != std::string::npos) {
      continue;
    }
    const std::string dir = path.substr(0, slash);
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) {
      dirs.push_back(dir);
    }
  }
  closedir(d);
  return dirs;
}

void RecordDbLocation(const std::string& pool_dir, uint64_t incarnation,
                      const std::vector<std::string>& dirs) {
  if (dirs.empty()) return;
  auto lives = ReadRecord(pool_dir);
  for (const auto& dir : dirs) lives.emplace_back(incarnation, dir);
  if (lives.size() > kLinesKept) {
    lives.erase(lives.begin(), lives.end() - kLinesKept);
  }
  std::ostringstream os;
  os << kHeader << "\n";
  for (const auto& [inc, dir] : lives) os << inc << " " << dir << "\n";
  const std::string tmp = RecordPath(pool_dir) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << os.str();
    if (!out.flush()) return;  // a hint: without it the open is refused
  }
  std::rename(tmp.c_str(), RecordPath(pool_dir).c_str());
}

std::vector<std::string> RecordedDbLocations(const std::string& pool_dir,
                                             uint64_t incarnation) {
  std::vector<std::string> out;
  for (const auto& [inc, dir] : ReadRecord(pool_dir)) {
    if (inc == incarnation) out.push_back(dir);
  }
  return out;
}

}  // namespace rocks
}  // namespace flintkv

// pmem/ is the bottom layer: a program linked with libflintkv_pmem alone
// (no memtable/) opens pools and prints their Status (implemented in
// pmem/status.cc). A refused open must say why.
#include <cstdio>
#include <memory>
#include <string>

#include "flintkv/options.h"
#include "flintkv/status.h"
#include "pmem/pool.h"

int main() {
  flintkv::PoolOptions o;
  o.path = "/nonexistent-dir/flintkv-pool";
  o.size = 16 << 20;
  o.info_log = [](const std::string&) {};
  std::unique_ptr<flintkv::pmem::Pool> pool;
  flintkv::Status s = flintkv::pmem::Pool::Open(o, &pool);
  const std::string text = s.ToString();
  std::printf("%s\n", text.c_str());
  return !s.ok() && text.find("flintkv-pool") != std::string::npos ? 0 : 1;
}

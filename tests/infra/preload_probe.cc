// A host program that knows nothing of FlintKV: ctest runs it with
// libflintkv_rocksdb.so in LD_PRELOAD (and once linked with jemalloc) and
// expects exit 0. The plugin must load into any process without imposing
// its allocator: malloc/free, realloc, strdup and new/delete here, across
// threads, must all still pair up.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int Churn(int seed) {
  std::vector<void*> blocks;
  for (int i = 0; i < 2000; i++) {
    size_t n = 1 + static_cast<size_t>((seed * 7919 + i * 104729) % 5000);
    void* p = std::malloc(n);
    if (!p) return 1;
    std::memset(p, i & 0xff, n);
    if (i % 3 == 0) p = std::realloc(p, n * 2);
    if (!p) return 1;
    blocks.push_back(p);
  }
  for (void* p : blocks) std::free(p);
  char* s = strdup("flintkv preload probe");
  std::free(s);
  std::string big(100000, 'x');
  auto* v = new std::vector<std::string>(100, big);
  delete v;
  return 0;
}

}  // namespace

int main() {
  int fails = Churn(1);
  std::vector<std::thread> threads;
  std::vector<int> rc(4, 0);
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&rc, t] { rc[t] = Churn(t + 2); });
  }
  for (auto& th : threads) th.join();
  for (int r : rc) fails += r;
  std::printf("preload_probe: %s\n", fails ? "FAILED" : "ok");
  return fails ? 1 : 0;
}

// Prints, one per line in `ldb scan --hex` form, the keys that db_bench's
// fillrandom writes first, for scripts/check/crash_fillseq_demo.sh's fillrandom
// check: db_bench (RocksDB 7.8-9.11, tools/db_bench_tool.cc) gives its
// first benchmark's only thread Random64(seed + 1) (ThreadState(i,
// ++total_thread_count_)); per write (entries_per_batch 1) DoWrite draws
// Next() to pick the key generator, then KeyGenerator RANDOM Next() % num
// (readrandom draws the same two: SelectDBWithCfh, GetRandomKey); and
// GenerateKeyFromInt writes the 8-byte big-endian number padded with '0'
// to --key_size (16).
//   db_bench_random_keys SEED NUM COUNT
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: db_bench_random_keys SEED NUM COUNT\n");
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[1], nullptr, 10);
  const uint64_t num = std::strtoull(argv[2], nullptr, 10);
  const uint64_t count = std::strtoull(argv[3], nullptr, 10);
  std::mt19937_64 rand(seed + 1);  // rocksdb::Random64
  for (uint64_t i = 0; i < count; i++) {
    rand();  // the key generator's / DB's pick
    std::printf("0x%016" PRIX64 "3030303030303030\n", rand() % num);
  }
  return 0;
}

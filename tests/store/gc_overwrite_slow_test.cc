// The GC's overwrite-forever workload at full size: 10,000 keys overwritten 10
// million times in an 8 MiB pool (about 2.5 copies of the key set fit).
// Labelled 'slow': run by the Release ctest stage (91 s on the shared 2-vCPU VM
// at load ~10), skipped under ASAN. Quick variant: gc_test.
#include <gtest/gtest.h>

#include "tests/store/gc_overwrite.h"

namespace flintkv {
namespace {

TEST(GcOverwriteSlowTest, TenMillionOverwritesOfTenThousandKeys) {
  test::TempPool pool;
  const uint64_t total = test::Scaled(10000000, 20, 10);
  test::OverwriteResult r = test::RunOverwrite(
      test::OverwriteOptions(pool.path(), true), 10000, total);
  test::Print("gc on, full", r);
  EXPECT_TRUE(r.first_error.ok()) << r.first_error.ToString();
  EXPECT_EQ(r.writes, total);
  EXPECT_LE(r.final_stats.nodes, 5u * 10000);
  EXPECT_LE(r.final_stats.dram_index_bytes, 4u << 20);  // index reused too
}

}  // namespace
}  // namespace flintkv

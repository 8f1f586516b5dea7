#!/usr/bin/env bash
# Long crash-injection campaign on the simulated persistence domain:
# crash_sim_test, mutant_test and pool_fuzz_test with FLINTKV_LONG_TESTS=1,
# printing the number of crash states explored per campaign.
#   scripts/dev/crash_campaign.sh [build-dir]     (default: build-crash)
# The quick variants run in CI through scripts/run_tests.sh (ctest).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-crash}
JOBS=${JOBS:-2}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFLINTKV_WITH_ROCKSDB=OFF \
  -DFLINTKV_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target crash_sim_test mutant_test pool_fuzz_test
export FLINTKV_LONG_TESTS=1 FLINTKV_TEST_DIR=${FLINTKV_TEST_DIR:-/dev/shm}
start=$(date +%s)
status=0
for t in crash_sim_test mutant_test pool_fuzz_test; do
  echo "=== $t (long mode)"
  "$BUILD/tests/$t" | grep -E '^\[(crash-sim|mutant|pool-fuzz)\]|^    |FAILED|PASSED' \
    || status=1
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
echo "=== crash campaign finished in $(( $(date +%s) - start )) s, status $status"
exit $status

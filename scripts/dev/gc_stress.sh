#!/usr/bin/env bash
# Long GC stress under TSAN: writers overwrite a few keys while
# GC passes run back to back (GcStressTest in tests/store/gc_race_concurrency_test.cc,
# 2 s in the normal suite). Fails on any TSAN report, a wrong value, or a
# hang (no write for 60 s).
#   scripts/dev/gc_stress.sh [seconds=1800] [build dir=build-tsan]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-1800}
DIR=${2:-build-tsan}
if [ ! -x "$DIR/tests/gc_race_concurrency_test" ]; then
  cmake -S . -B "$DIR" -DFLINTKV_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFLINTKV_BUILD_BENCH=OFF -DFLINTKV_WITH_ROCKSDB=OFF >/dev/null
  cmake --build "$DIR" -j"${JOBS:-2}" --target gc_race_concurrency_test
fi
FLINTKV_TEST_DIR=${FLINTKV_TEST_DIR:-/dev/shm} \
FLINTKV_GC_STRESS_SECONDS=$SECONDS_TO_RUN \
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
  "$DIR/tests/gc_race_concurrency_test" --gtest_filter='GcStressTest.*'

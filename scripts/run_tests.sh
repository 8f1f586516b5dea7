#!/usr/bin/env bash
# The whole test suite: set-up, Release build + all tests, the same build
# under valgrind, then the sanitizer builds (ASAN+UBSAN, TSAN). .ci/run calls
# exactly this.
#   FLINTKV_LONG_TESTS=1  long crash campaigns / kill loops instead of quick
#   --no-sanitizers       Release build and tests only (developer loop)
#   --no-peers            skip RocksDB's own verifiers (db_stress, unit tests)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
SANITIZERS=1
PEERS=1
for a in "$@"; do
  case "$a" in
    --no-sanitizers) SANITIZERS=0 ;;
    --no-peers) PEERS=0 ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done

scripts/setup/setup.sh

# The per-user cache (kept across clones; CI rebuilds it when absent): the
# RocksDB versions built from Debian's source packages, and ccache's store
# for FlintKV's own builds (paths relative to the clone, so that another
# clone of the same commit reuses them).
CACHE=${FLINTKV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flintkv}
export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache} CCACHE_BASEDIR=$ROOT
export CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

build() {  # dir, extra cmake args...
  local dir=$1; shift
  cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" "$@" >/dev/null
  cmake --build "$dir" -j"$JOBS"
}

start=$(date +%s)
stage_start=$start
stage() {  # prints the time of the stage that ended, then the next header
  local now; now=$(date +%s)
  [ "$now" -gt "$start" ] && echo "--- stage took $(( now - stage_start )) s (total $(( now - start )) s)"
  stage_start=$now
  echo "=== $*"
}
stage "source checks: clang-format, history words"
scripts/check/check_format.sh
scripts/check/check_history_words.sh
scripts/check/check_history_words.sh --self-test
stage "Release build and full test suite"
build build
(cd build && ctest --output-on-failure -j1 --timeout 1200 -LE valgrind)
# The default build is portable (no -march=native), so valgrind can run it:
# the library, the plugin in stock db_bench and the tools under memcheck.
# Debian 12's valgrind has no pmemcheck tool, so memcheck only.
stage "valgrind (memcheck) on the Release build: label 'valgrind'"
(cd build && ctest --output-on-failure -j"$JOBS" --timeout 900 -L valgrind \
   --no-tests=error)
# A smoke of the paper's figures (quick mode, ~15 s): every stage runs once
# at tiny sizes and every benchmark run verifies, so the scripts behind the
# published figures cannot rot unnoticed; output in build/paper_figures_quick/
# (full mode by hand writes docs/results/, see docs/results/paper_figures.md).
stage "paper figures, quick mode"
/usr/bin/python3 scripts/paper/paper_figures.py --quick --build build

if [ "$SANITIZERS" = 1 ]; then
  stage "ASAN+UBSAN build: all tests except those labelled 'slow'"
  build build-asan -DFLINTKV_SANITIZE=address -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFLINTKV_BUILD_BENCH=OFF
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure -j1 --timeout 1800 -LE slow)
  # Debian's librocksdb is not TSAN-instrumented (its tests skip there), so
  # the TSAN build covers FlintKV's own concurrency: store, skiplist, sim.
  stage "TSAN build: concurrency tests (label 'concurrency'), without RocksDB"
  build build-tsan -DFLINTKV_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFLINTKV_BUILD_BENCH=OFF -DFLINTKV_WITH_ROCKSDB=OFF
  (cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
     ctest --output-on-failure -j1 --timeout 1800 -L concurrency)
fi
# RocksDB 9.10.0 (Debian 13's), built once from Debian's source package into
# the cache: FlintKV's RocksDB tests against it (differential, kill and
# recover with the WAL off, recovery into SST files, the OpenDB wrapper,
# bit rot, operations, RocksDB 9's features). 9.11.2, RocksDB's own tools
# with ROCKSDB_PLUGINS=flintkv and db_stress: scripts/run_compat_tests.sh.
stage "RocksDB 9.10.0: FlintKV's RocksDB tests against it"
scripts/setup/build_rocksdb.sh 9.10.0 --lib-only
build build-rocksdb-9.10.0 -DFLINTKV_ROCKSDB_ROOT="$CACHE/rocksdb-9.10.0" \
  -DFLINTKV_ONLY_ROCKSDB_TESTS=ON -DFLINTKV_BUILD_BENCH=OFF
(cd build-rocksdb-9.10.0 && ctest --output-on-failure -j1 --timeout 1200)
if [ "$PEERS" = 1 ]; then
  # Built from Debian's rocksdb source package into ~/.cache/flintkv (rebuilt when
  # absent); fails if flintkv fails a check the skiplist passes, beyond the
  # differences listed in scripts/peer/rocksdb_peer_known.txt.
  stage "RocksDB's own verifiers with flintkv vs the skiplist (quick)"
  scripts/peer/rocksdb_peer_tests.sh --quick
fi
stage "all test stages passed in $(( $(date +%s) - start )) s"

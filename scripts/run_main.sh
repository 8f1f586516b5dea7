#!/usr/bin/env bash
# The main job: set up, build, then stock db_bench fillrandom on an emulated
# PMEM pool (tmpfs) with the flintkv memtable and the WAL off, side by side
# with RocksDB's default skiplist memtable + WAL (sync=1), + WAL (no sync),
# + no WAL (volatile), all on the same tmpfs, interleaved rounds
# (scripts/bench/e2e_bench.py). Prints ops/s, p99 and same-round ratios.
#
#   scripts/run_main.sh [--quick] [--threads "1 2 4 8"] [--num 1000000]
#                       [--value_size 128] [--repeats 3] [--out FILE]
#                       [--db_bench release|debian|auto|PATH] [--also_debian]
# --num is the total number of writes per run, split across threads;
# --repeats the number of interleaved rounds. --db_bench release (default):
# RocksDB 7.8.3 built without assertions (Debian's sources and flags), the
# fair baseline: Debian's librocksdb has assertions on, which slow its own
# skiplist and flatter flintkv. The first run builds it into the per-user
# cache (scripts/setup/build_release_rocksdb.sh); later runs reuse it.
# --also_debian adds a second table, measured with Debian's db_bench.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="1 2 4 8"
NUM=1000000
VALUE_SIZE=128
REPEATS=3
OUT=""
DB_BENCH=release
ALSO_DEBIAN=0
while (($#)); do
  case "$1" in
    --quick) THREADS="1 4"; NUM=200000; REPEATS=1 ;;
    --threads) THREADS=$2; shift ;;
    --num) NUM=$2; shift ;;
    --value_size) VALUE_SIZE=$2; shift ;;
    --repeats) REPEATS=$2; shift ;;
    --out) OUT=$2; shift ;;
    --db_bench) DB_BENCH=$2; shift ;;
    --also_debian) ALSO_DEBIAN=1 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

scripts/setup/setup.sh >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target flintkv_rocksdb >/dev/null

if [ "$DB_BENCH" = release ]; then
  CACHE=${FLINTKV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flintkv}
  if [ ! -x "$CACHE/rocksdb-release/bin/db_bench" ]; then
    echo "run_main: building a release RocksDB 7.8.3 (no assertions) once" \
         "into $CACHE/rocksdb-release; later runs reuse it"
  fi
  JOBS=$(nproc) scripts/setup/build_release_rocksdb.sh
fi

fill() {
  scripts/bench/e2e_bench.py --db_bench "$1" --workload fill \
    --threads "${THREADS// /,}" --num "$NUM" --value_size "$VALUE_SIZE" \
    --rounds "$REPEATS" --configs flintkv,walsync,wal,nowal "${@:2}"
}
fill "$DB_BENCH" ${OUT:+--out "$OUT"}
if [ "$ALSO_DEBIAN" = 1 ]; then
  echo
  echo "Second table: Debian's db_bench (assertions on, which slow RocksDB's"
  echo "own skiplist: not the fair baseline)"
  fill debian ${OUT:+--out "$OUT.debian"}
fi

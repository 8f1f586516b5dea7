#!/usr/bin/env bash
# The main job: set up, build, then stock db_bench fillrandom on an emulated
# PMEM pool (tmpfs) with the flintkv memtable and the WAL off, side by side
# with RocksDB's default skiplist memtable + WAL (sync=1), + WAL (no sync),
# + no WAL (volatile), all on the same tmpfs, interleaved rounds
# (scripts/bench/e2e_bench.py). Prints ops/s, p99 and same-round ratios.
#
#   scripts/run_main.sh [--quick] [--threads "1 2 4 8"] [--num 1000000]
#                       [--value_size 128] [--repeats 3] [--out FILE]
#                       [--db_bench auto|release|debian|PATH]
# --num is the total number of writes per run, split across threads;
# --repeats the number of interleaved rounds. --db_bench auto (default)
# uses the release RocksDB when scripts/setup/build_release_rocksdb.sh has built it
# (the fair baseline: Debian's librocksdb has assertions on, which slow its
# own skiplist), else Debian's db_bench, and says which.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="1 2 4 8"
NUM=1000000
VALUE_SIZE=128
REPEATS=3
OUT=""
DB_BENCH=auto
while (($#)); do
  case "$1" in
    --quick) THREADS="1 4"; NUM=200000; REPEATS=1 ;;
    --threads) THREADS=$2; shift ;;
    --num) NUM=$2; shift ;;
    --value_size) VALUE_SIZE=$2; shift ;;
    --repeats) REPEATS=$2; shift ;;
    --out) OUT=$2; shift ;;
    --db_bench) DB_BENCH=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

scripts/setup/setup.sh >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target flintkv_rocksdb >/dev/null

scripts/bench/e2e_bench.py --db_bench "$DB_BENCH" --workload fill \
  --threads "${THREADS// /,}" --num "$NUM" --value_size "$VALUE_SIZE" \
  --rounds "$REPEATS" --configs flintkv,walsync,wal,nowal ${OUT:+--out "$OUT"}

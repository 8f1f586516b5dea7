#!/usr/bin/env bash
# The main job: set up, build, then stock db_bench fillrandom on an emulated
# PMEM pool (tmpfs) with the flintkv memtable and the WAL off, side by side
# with RocksDB's default skiplist memtable + WAL (sync=1), + WAL (no sync),
# + no WAL, all on the same tmpfs. Prints ops/s and ratios.
#
#   scripts/run_main.sh [--quick] [--threads "1 2 4 8"] [--num 1000000]
#                       [--value_size 128] [--repeats 1] [--out FILE]
# --num is the total number of writes per run, split across threads.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
THREADS="1 4"
NUM=1000000
VALUE_SIZE=128
REPEATS=1
OUT=""
while (($#)); do
  case "$1" in
    --quick) THREADS="1 4"; NUM=200000 ;;
    --threads) THREADS=$2; shift ;;
    --num) NUM=$2; shift ;;
    --value_size) VALUE_SIZE=$2; shift ;;
    --repeats) REPEATS=$2; shift ;;
    --out) OUT=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

scripts/setup.sh >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target flintkv_rocksdb >/dev/null
LIB=$ROOT/build/memtable/rocksdb/libflintkv_rocksdb.so

WORK=/dev/shm/flintkv_main.$$
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK"

# One db_bench run; prints ops/s. The plugin is preloaded for every run so
# all four configurations share the same allocator and binary.
run() {  # name threads extra-args...
  local name=$1 threads=$2; shift 2
  rm -rf "$WORK/db" "$WORK/pool" "$WORK/wal"
  local per_thread=$((NUM / threads))
  local out
  out=$(LD_PRELOAD=$LIB db_bench --benchmarks=fillrandom --num=$per_thread \
        --threads=$threads --value_size=$VALUE_SIZE --key_size=16 \
        --db="$WORK/db" --wal_dir="$WORK/wal" --compression_type=none \
        --histogram=0 --stats_interval=0 "$@" 2>"$WORK/err.$name") || {
    echo "db_bench failed for $name:" >&2; tail -5 "$WORK/err.$name" >&2; exit 1; }
  echo "$out" | awk '/^fillrandom/ {for (i=1;i<=NF;i++) if ($(i+1)=="ops/sec") print $i}'
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
{
echo "# db_bench fillrandom: flintkv memtable (WAL off) vs RocksDB defaults"
echo
echo "- command: scripts/run_main.sh --threads \"$THREADS\" --num $NUM --value_size $VALUE_SIZE --repeats $REPEATS"
echo "- machine: $CPU, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%Y-%m-%d)"
echo "- db_bench: $(dpkg-query -W -f='${Version}' rocksdb-tools) (Debian, assertions on), data and WAL on tmpfs ($WORK), 16-byte keys, compression off"
echo "- ops/s are medians of $REPEATS run(s); ratios are flintkv / baseline"
echo
echo "| threads | flintkv (no WAL, durable) | skiplist + WAL sync | skiplist + WAL | skiplist, no WAL (volatile) | vs WAL sync | vs WAL | vs no WAL |"
echo "|---|---|---|---|---|---|---|---|"
} | tee ${OUT:+"$OUT"}
for t in $THREADS; do
  declare -A r=()
  for cfg in flintkv walsync wal nowal; do
    vals=""
    for ((i = 0; i < REPEATS; i++)); do
      case $cfg in
        flintkv) v=$(run $cfg $t --disable_wal=1 \
                 --memtablerep="id=flintkv;pool_dir=$WORK/pool;pool_size=2G") ;;
        walsync) v=$(run $cfg $t --disable_wal=0 --sync=1) ;;
        wal)     v=$(run $cfg $t --disable_wal=0 --sync=0) ;;
        nowal)   v=$(run $cfg $t --disable_wal=1) ;;
      esac
      vals+="$v"$'\n'
    done
    r[$cfg]=$(printf '%s' "$vals" | median)
  done
  ratio() { awk -v a="${r[flintkv]}" -v b="$1" 'BEGIN {printf "%.2f", a / b}'; }
  echo "| $t | ${r[flintkv]} | ${r[walsync]} | ${r[wal]} | ${r[nowal]} | $(ratio "${r[walsync]}") | $(ratio "${r[wal]}") | $(ratio "${r[nowal]}") |" \
    | tee ${OUT:+-a "$OUT"}
  unset r
done

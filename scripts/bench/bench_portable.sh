#!/usr/bin/env bash
# fillrandom with the portable default build vs a FLINTKV_NATIVE=ON build,
# interleaved, median of N: tools/flintkv_bench (standalone skiplist) and
# stock db_bench with each build's plugin LD_PRELOADed (WAL off).
#   scripts/bench/bench_portable.sh [--repeats 3] [--num 1000000] [--threads 1,2]
# Builds ./build (default) and ./build-native (FLINTKV_NATIVE=ON) targets
# flintkv_bench and flintkv_rocksdb. Prints one markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEATS=3 NUM=1000000 THREADS=1,2
while (($#)); do
  case "$1" in
    --repeats) REPEATS=$2; shift ;;
    --num) NUM=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    *) echo "bench_portable.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
for b in build:OFF build-native:ON; do
  dir=${b%%:*}
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DFLINTKV_NATIVE=${b#*:} >/dev/null
  cmake --build "$dir" -j2 --target flintkv_bench flintkv_rocksdb >/dev/null
done
WORK=/dev/shm/flintkv_bench_portable.$$
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A r
for ((i = 1; i <= REPEATS; i++)); do
  for t in ${THREADS//,/ }; do
    for dir in build build-native; do
      v=$("$dir/tools/flintkv_bench" --num="$NUM" --threads="$t" --impl=flintkv \
            --repeats=1 --pool_dir="$WORK" 2>/dev/null |
          awk -F'|' '$2 ~ /flintkv/ {gsub(/ /, "", $5); print $5}')
      r[standalone,$t,$dir]+="$v "
      rm -rf "$WORK/db" "$WORK/pool"
      v=$(LD_PRELOAD=$PWD/$dir/memtable/rocksdb/libflintkv_rocksdb.so db_bench \
            --benchmarks=fillrandom --num=$((NUM / t)) --threads="$t" \
            --value_size=128 --key_size=16 --db="$WORK/db" --disable_wal=1 \
            --compression_type=none --histogram=0 --stats_interval=0 \
            --memtablerep="id=flintkv;pool_dir=$WORK/pool;pool_size=2G" 2>/dev/null |
          awk '/^fillrandom/ {for (i=1;i<=NF;i++) if ($(i+1)=="ops/sec") print $i}')
      r[db_bench,$t,$dir]+="$((v / 1000)) "
    done
  done
done
echo "| benchmark | threads | portable kops/s (runs) | native kops/s (runs) | portable / native |"
echo "|---|---:|---:|---:|---:|"
for b in standalone db_bench; do
  for t in ${THREADS//,/ }; do
    p=$(echo ${r[$b,$t,build]} | tr ' ' '\n' | median)
    n=$(echo ${r[$b,$t,build-native]} | tr ' ' '\n' | median)
    echo "| $b fillrandom | $t | $p (${r[$b,$t,build]% }) | $n (${r[$b,$t,build-native]% }) | $(awk -v a="$p" -v b="$n" 'BEGIN {printf "%.3f", a / b}') |"
  done
done

#!/usr/bin/env bash
# Stock db_bench with the plugin LD_PRELOADed and RocksDB's default WAL on,
# run twice on one DB and pool_dir, as a user restarts a service: run 1
# fills the DB (its Close leaves the memtables in the pool: RocksDB does not
# flush WAL-logged data at Close), run 2 opens the existing DB with no tool
# run in between and must read every key; then run 1 again killed with
# SIGKILL mid-fill, and run 2 again. Fails on a refused open or a lost key.
#
#   scripts/check/check_db_bench_wal_restart.sh LIB [DB_BENCH]
set -euo pipefail
LIB=$(realpath "$1")
DB_BENCH=${2:-/usr/bin/db_bench}
NUM=20000
DIR=$(mktemp -d /dev/shm/flintkv_wal_restart.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "check_db_bench_wal_restart: FAIL: $*" >&2; exit 1; }

bench() {  # name, extra db_bench flags...
  local name=$1; shift
  env LD_PRELOAD="$LIB" "$DB_BENCH" --db="$DIR/db" \
    --memtablerep="id=flintkv;pool_dir=$DIR/pool;pool_size=256M;chunk_size=64K" \
    --disable_wal=0 --num=$NUM --threads=1 --value_size=100 \
    --compression_type=none --seed=42 --progress_reports=0 \
    --write_buffer_size=$((8 << 20)) "$@" >"$DIR/$name.out" 2>&1
}

read_all() {  # run name: every key of fillseq must be found
  bench "$1" --use_existing_db=1 --benchmarks=readrandom ||
    { tail -20 "$DIR/$1.out"; fail "$1: db_bench failed (refused open?)"; }
  grep -q "($NUM of $NUM found)" "$DIR/$1.out" ||
    { grep readrandom "$DIR/$1.out"; fail "$1: keys lost"; }
  echo "  $1: $NUM of $NUM found"
}

echo "check_db_bench_wal_restart: fillseq, WAL on, clean exit"
bench fill --use_existing_db=0 --benchmarks=fillseq ||
  { tail -20 "$DIR/fill.out"; fail "fillseq failed"; }
[ -z "$(find "$DIR/db" -name '*.sst')" ] ||
  fail "the fill flushed: the pool keeps nothing to check"
read_all reopen

echo "check_db_bench_wal_restart: overwrite, WAL on, killed after it wrote"
# Overwrites keys of the existing DB, then SIGKILL once db_bench reports
# the writes done (it is reading then): the memtables are live at the kill.
env LD_PRELOAD="$LIB" "$DB_BENCH" --db="$DIR/db" \
  --memtablerep="id=flintkv;pool_dir=$DIR/pool;pool_size=256M;chunk_size=64K" \
  --disable_wal=0 --num=$NUM --threads=1 --value_size=100 \
  --compression_type=none --seed=42 --progress_reports=0 \
  --write_buffer_size=$((8 << 20)) --use_existing_db=1 \
  --benchmarks=overwrite,readrandom --reads=1000000000 \
  >"$DIR/kill.out" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q '^overwrite' "$DIR/kill.out" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
grep -q '^overwrite' "$DIR/kill.out" || { cat "$DIR/kill.out"; fail "fill did not finish"; }
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
read_all after_kill
echo "check_db_bench_wal_restart: PASS"

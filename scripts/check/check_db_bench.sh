#!/usr/bin/env bash
# Runs Debian's stock /usr/bin/db_bench with the FlintKV memtable loaded by
# LD_PRELOAD (no patched binary) and fails on any error, abort or lost key.
#
#   scripts/check/check_db_bench.sh [--quick] [--lib PATH] [--db_bench PATH]
#                             [--dir DIR] [--num N] [--keep] [--runs N]
#                             [--benchmarks LIST]
#
#   --quick     small --num for CI (ctest runs this as db_bench_stock)
#   --lib       libflintkv_rocksdb.so (default: build/memtable/rocksdb/...)
#   --dir       scratch directory for the DB and the pool (default: a fresh
#               directory under /dev/shm, removed at the end unless --keep)
#   --runs      run db_bench N times on the same DB and pool_dir (default 1):
#               later runs open and check the pool earlier ones left
#   --benchmarks  instead of the list below (read checks apply to those run)
#
# Runs, with --threads=4 and WAL off, in one db_bench process:
#   fillrandom, overwrite, fillseq (fresh DB: every key 0..num-1),
#   readrandom (must find every key), readwhilewriting (likewise),
#   seekrandom, mergerandom (--merge_operator=put), deleterandom
# with a small --write_buffer_size so that memtables fill, switch and
# flush many times. Checks: exit status 0; no "Assertion", "Aborted",
# "Corruption", "error" or flintkv warning in the output; db_bench really
# used FlintKVFactory; "(N of N found)" for the read benchmarks; flushes
# happened (SST files and flush events in the DB's LOG).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

QUICK=0
KEEP=0
LIB="$ROOT/build/memtable/rocksdb/libflintkv_rocksdb.so"
DB_BENCH=/usr/bin/db_bench
DIR=""
NUM=""
RUNS=1
BENCHMARKS=fillrandom,overwrite,fillseq,readrandom,readwhilewriting,seekrandom,mergerandom,deleterandom
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --keep) KEEP=1 ;;
    --lib) LIB=$2; shift ;;
    --db_bench) DB_BENCH=$2; shift ;;
    --dir) DIR=$2; shift ;;
    --num) NUM=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --benchmarks) BENCHMARKS=$2; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "check_db_bench: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

fail() { echo "check_db_bench: FAIL: $*" >&2; exit 1; }

[ -x "$DB_BENCH" ] || fail "$DB_BENCH not found (apt-get install rocksdb-tools)"
[ -f "$LIB" ] || fail "$LIB not found (build the flintkv_rocksdb target)"
LIB=$(realpath "$LIB")

if [ -z "$NUM" ]; then
  if [ "$QUICK" = 1 ]; then NUM=20000; else NUM=100000; fi
fi
if [ -z "$DIR" ]; then
  DIR=$(mktemp -d /dev/shm/flintkv_db_bench.XXXXXX)
else
  mkdir -p "$DIR"
fi
cleanup() { if [ "$KEEP" = 0 ]; then rm -rf "$DIR"; fi; }
trap cleanup EXIT
rm -rf "$DIR/db" "$DIR/pool"

WBS=$((512 << 10))
MEMTABLEREP="id=flintkv;pool_dir=$DIR/pool;pool_size=256M;chunk_size=64K"

run_once() {  # run number
  OUT="$DIR/db_bench.$1.out"
  ERR="$DIR/db_bench.$1.err"
  echo "check_db_bench: run $1/$RUNS: $DB_BENCH with LD_PRELOAD=$LIB," \
       "--num=$NUM --threads=4"
  echo "  --memtablerep=\"$MEMTABLEREP\""
  start=$(date +%s)
  set +e
  # LD_PRELOAD on db_bench itself only (not on `env`/`timeout`).
  env LD_PRELOAD="$LIB" "$DB_BENCH" \
    --benchmarks="$BENCHMARKS" \
    --db="$DIR/db" \
    --use_existing_db=0 \
    --num="$NUM" \
    --threads=4 \
    --disable_wal=1 \
    --allow_concurrent_memtable_write=1 \
    --memtablerep="$MEMTABLEREP" \
    --write_buffer_size="$WBS" \
    --max_write_buffer_number=4 \
    --target_file_size_base=$((2 << 20)) \
    --max_bytes_for_level_base=$((8 << 20)) \
    --merge_operator=put \
    --compression_type=none \
    --value_size=100 \
    --seed=42 \
    --progress_reports=0 \
    >"$OUT" 2>"$ERR"
  rc=$?
  set -e
  elapsed=$(( $(date +%s) - start ))

  show() {
    echo "---- stdout ($OUT)"; tail -n 40 "$OUT"
    echo "---- stderr ($ERR)"; tail -n 40 "$ERR"
  }
  if [ "$rc" != 0 ]; then show; fail "db_bench exited with status $rc"; fi
  # (db_bench's "WARNING: Assertions are enabled" banner is not an error.)
  BAD='Assertion .*failed|abort|corruption|error|flintkv: .*(waiting|fatal)'
  if grep -Eiq "$BAD" "$OUT" "$ERR"; then
    show
    grep -Ein "$BAD" "$OUT" "$ERR" | head -5
    fail "db_bench reported an error"
  fi
  grep -q 'Memtablerep: *FlintKVFactory' "$OUT" ||
    { show; fail "db_bench did not use the flintkv memtable"; }

  for b in ${BENCHMARKS//,/ }; do
    grep -Eq "^$b +:" "$OUT" || { show; fail "no result line for $b"; }
  done
  # Every key 0..num-1 exists after fillseq: reads must find all of them.
  for b in readrandom readwhilewriting; do
    [[ ",$BENCHMARKS," == *",$b,"* ]] || continue
    line=$(grep -E "^$b +:" "$OUT")
    if [[ "$line" =~ \(([0-9]+)\ of\ ([0-9]+)\ found\) ]]; then
      found=${BASH_REMATCH[1]}
      total=${BASH_REMATCH[2]}
      if [ "$found" != "$total" ] || [ "$total" = 0 ]; then
        show; fail "$b found $found of $total keys"
      fi
      echo "  $b: $found of $total found"
    else
      show; fail "$b: no '(N of N found)' in: $line"
    fi
  done

  # Flushes happened (small write buffers): SST files and flush events.
  ssts=$(find "$DIR/db" -name '*.sst' | wc -l)
  flushes=$(grep -c '"event": "flush_finished"' "$DIR/db/LOG" || true)
  [ "$ssts" -gt 0 ] || { show; fail "no SST files: memtables never flushed"; }
  [ "$flushes" -gt 2 ] || { show; fail "only $flushes flushes in the LOG"; }
  grep -E '^[a-z]+ +:' "$OUT" | sed 's/^/  /'
}

for run in $(seq 1 "$RUNS"); do
  run_once "$run"
done
echo "check_db_bench: PASS ($flushes flushes in the last DB, $ssts SST files," \
     "${elapsed} s)"

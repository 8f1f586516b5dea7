#!/usr/bin/env bash
# Issue #4 "done when": stock db_bench fillseq (single thread, WAL off) with
# the flintkv memtable, killed with SIGKILL mid-run; flintkv_tool recover;
# stock ldb scan must show exactly keys 0..k-1 with k >= the last progress
# count db_bench printed. Then stock db_bench (no plugin) reads the DB.
#
#   scripts/crash_fillseq_demo.sh [BUILD_DIR] [ROUNDS]
# Env: DEMO_DIR (default /dev/shm/flintkv_demo.$$), NUM (keys, 5000000),
#      WBS (write_buffer_size, 8 MiB: several memtable switches and flushes
#      happen before the kill).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
ROUNDS=${2:-3}
NUM=${NUM:-5000000}
WBS=${WBS:-8388608}
DIR=${DEMO_DIR:-/dev/shm/flintkv_demo.$$}
PLUGIN=$BUILD/memtable/rocksdb/libflintkv_rocksdb.so
TOOL=$BUILD/recovery/flintkv_tool
for f in "$PLUGIN" "$TOOL" "$(command -v db_bench)" "$(command -v ldb)"; do
  [ -x "$f" ] || [ -f "$f" ] || { echo "missing $f" >&2; exit 1; }
done
cleanup() { [ -n "${PID:-}" ] && kill -9 "$PID" 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

progress() {  # last "finished N ops" of db_bench's stderr
  { tr '\r' '\n' < "$1" || true; } 2>/dev/null | { grep -o 'finished [0-9]* ops' || true; } | tail -1 | awk '{print $2}'
}

for round in $(seq 1 "$ROUNDS"); do
  rm -rf "$DIR"; mkdir -p "$DIR"
  # Kill after 150k..~1.1M acknowledged ops (random), i.e. mid-run.
  target=$(( 150000 + (RANDOM * 32768 + RANDOM) % 1000000 ))
  echo "=== round $round: db_bench fillseq, kill -9 after >= $target ops"
  env LD_PRELOAD="$PLUGIN" db_bench --benchmarks=fillseq --num="$NUM" \
    --threads=1 --db="$DIR/db" --disable_wal=1 --write_buffer_size="$WBS" \
    --memtablerep="id=flintkv;pool_dir=$DIR/pool;pool_size=1G" \
    > "$DIR/stdout.txt" 2> "$DIR/stderr.txt" &
  PID=$!
  while kill -0 "$PID" 2>/dev/null; do
    p=$(progress "$DIR/stderr.txt"); p=${p:-0}
    [ "$p" -ge "$target" ] && break
    sleep 0.01
  done
  kill -9 "$PID" 2>/dev/null || { echo "db_bench ended before the kill" >&2; cat "$DIR/stderr.txt" >&2; exit 1; }
  wait "$PID" 2>/dev/null || true
  PID=
  last=$(progress "$DIR/stderr.txt")
  echo "killed; last progress line: finished $last ops"

  "$TOOL" verify --pool_dir="$DIR/pool"
  "$TOOL" inspect --pool_dir="$DIR/pool" 2>/dev/null
  "$TOOL" recover --db="$DIR/db" --pool_dir="$DIR/pool" --quiet 2>/dev/null

  # fillseq key i = 8-byte big-endian i, padded with '0' to 16 bytes.
  ldb --db="$DIR/db" scan --hex 2>/dev/null | awk -v last="$last" '
    { want = sprintf("0x%08X%08X3030303030303030", int((NR-1) / 4294967296),
                     (NR-1) % 4294967296)
      split($0, kv, " : ")
      if (kv[1] != want) { printf "key #%d is %s, want %s\n", NR-1, kv[1], want; bad = 1; exit 1 } }
    END { if (bad) exit 1
          printf "ldb scan: exactly keys 0..%d (k=%d), last progress %d\n", NR-1, NR, last
          if (NR < last) { print "FAIL: lost acknowledged writes"; exit 1 } }'

  # Stock db_bench (no plugin) sees the data too.
  k=$(ldb --db="$DIR/db" scan --hex 2>/dev/null | wc -l)
  found=$(db_bench --use_existing_db=1 --benchmarks=readrandom --num="$k" \
            --reads=20000 --threads=1 --db="$DIR/db" 2>/dev/null |
          grep -o '([0-9]* of [0-9]* found)')
  echo "stock db_bench readrandom over $k keys: $found"
  case "$found" in "(20000 of 20000 found)") ;; *) echo "FAIL" >&2; exit 1 ;; esac
done
echo "PASS: $ROUNDS rounds"

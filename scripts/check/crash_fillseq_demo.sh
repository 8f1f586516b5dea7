#!/usr/bin/env bash
# db_bench fillseq (single thread, WAL off) with the flintkv memtable,
# killed with SIGKILL mid-run; flintkv_tool recover; ldb scan must show
# exactly keys 0..k-1 with k >= the last progress count db_bench printed.
# Then db_bench without FlintKV reads the DB. Two ways to get the memtable:
#   scripts/check/crash_fillseq_demo.sh [BUILD_DIR] [ROUNDS]
#       Debian's stock db_bench/ldb with BUILD_DIR's plugin LD_PRELOADed
#   scripts/check/crash_fillseq_demo.sh --tools DIR --tool FLINTKV_TOOL [ROUNDS]
#       DIR/db_bench and DIR/ldb of a RocksDB built with
#       ROCKSDB_PLUGINS=flintkv (scripts/setup/build_rocksdb.sh): FlintKV is
#       compiled in, no LD_PRELOAD; the plugin-less reader is then the same
#       db_bench with the default memtable.
# Env: BENCH=fillrandom: db_bench fillrandom (--seed=42) instead; the
#      check is then that every key of the first k writes (k >= the last
#      progress count) is in the DB (scripts/check/db_bench_random_keys.cc derives
#      them the way db_bench does).
#      DEMO_DIR (default /dev/shm/flintkv_demo.$$), NUM (keys, 5000000),
#      WBS (write_buffer_size, 8 MiB: several memtable switches and flushes
#      happen before the kill).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOOLS=""
TOOL=""
if [ "${1:-}" = --tools ]; then
  TOOLS=$(cd "$2" && pwd); shift 2
  [ "${1:-}" = --tool ] || { echo "--tools needs --tool FLINTKV_TOOL" >&2; exit 2; }
  TOOL=$2; shift 2
  ROUNDS=${1:-3}
  DB_BENCH=$TOOLS/db_bench
  LDB=$TOOLS/ldb
  PRE=(env)
else
  BUILD=$(cd "${1:-$ROOT/build}" && pwd)
  ROUNDS=${2:-3}
  PLUGIN=$BUILD/memtable/rocksdb/libflintkv_rocksdb.so
  TOOL=$BUILD/tools/flintkv_tool
  DB_BENCH=$(command -v db_bench)
  LDB=$(command -v ldb)
  [ -f "$PLUGIN" ] || { echo "missing $PLUGIN" >&2; exit 1; }
  PRE=(env LD_PRELOAD="$PLUGIN")
fi
NUM=${NUM:-5000000}
BENCH=${BENCH:-fillseq}
case "$BENCH" in fillseq|fillrandom) ;; *) echo "BENCH: fillseq or fillrandom" >&2; exit 2 ;; esac
WBS=${WBS:-8388608}
DIR=${DEMO_DIR:-/dev/shm/flintkv_demo.$$}
KEYGEN=$DIR.keygen
for f in "$TOOL" "$DB_BENCH" "$LDB"; do
  [ -x "$f" ] || { echo "missing $f" >&2; exit 1; }
done
cleanup() { [ -n "${PID:-}" ] && kill -9 "$PID" 2>/dev/null || true; rm -rf "$DIR" "$KEYGEN"; }
trap cleanup EXIT

progress() {  # last "finished N ops" of db_bench's stderr
  { tr '\r' '\n' < "$1" || true; } 2>/dev/null | { grep -o 'finished [0-9]* ops' || true; } | tail -1 | awk '{print $2}'
}

for round in $(seq 1 "$ROUNDS"); do
  rm -rf "$DIR"; mkdir -p "$DIR"
  # Kill after 150k..~1.1M acknowledged ops (random), i.e. mid-run.
  target=$(( 150000 + (RANDOM * 32768 + RANDOM) % 1000000 ))
  echo "=== round $round: db_bench $BENCH, kill -9 after >= $target ops"
  "${PRE[@]}" "$DB_BENCH" --benchmarks="$BENCH" --seed=42 --num="$NUM" \
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

  if [ "$BENCH" = fillrandom ]; then
    [ -x "$KEYGEN" ] || c++ -O2 -o "$KEYGEN" "$ROOT/scripts/check/db_bench_random_keys.cc"
    # ldb prints "key : value" (7.8) or "key ==> value" (9.x).
    "$LDB" --db="$DIR/db" scan --hex 2>/dev/null | sed -E 's/ (:|==>) .*//' | sort -u >"$DIR/have"
    "$KEYGEN" 42 "$NUM" "$last" | sort -u >"$DIR/want"
    missing=$(comm -23 "$DIR/want" "$DIR/have" | wc -l)
    echo "ldb scan: $(wc -l <"$DIR/have") keys; the first $last writes touched $(wc -l <"$DIR/want") keys, $missing missing"
    [ "$missing" = 0 ] || { echo "FAIL: lost acknowledged writes"; exit 1; }
  else
    # fillseq key i = 8-byte big-endian i, padded with '0' to 16 bytes.
    "$LDB" --db="$DIR/db" scan --hex 2>/dev/null | awk -v last="$last" '
      { want = sprintf("0x%08X%08X3030303030303030", int((NR-1) / 4294967296),
                       (NR-1) % 4294967296)
        split($0, kv, / (:|==>) /)
        if (kv[1] != want) { printf "key #%d is %s, want %s\n", NR-1, kv[1], want; bad = 1; exit 1 } }
      END { if (bad) exit 1
            printf "ldb scan: exactly keys 0..%d (k=%d), last progress %d\n", NR-1, NR, last
            if (NR < last) { print "FAIL: lost acknowledged writes"; exit 1 } }'
  fi

  # db_bench without the flintkv memtable sees the data too: fillseq's keys
  # 0..k-1, or (fillrandom) readrandom with the writer's seed, which reads
  # the keys of the writer's first writes again.
  if [ "$BENCH" = fillrandom ]; then
    reads=$last; rnum=$NUM
  else
    reads=20000; rnum=$("$LDB" --db="$DIR/db" scan --hex 2>/dev/null | wc -l)
  fi
  found=$("$DB_BENCH" --use_existing_db=1 --benchmarks=readrandom --num="$rnum" \
            --seed=42 --reads="$reads" --threads=1 --db="$DIR/db" 2>/dev/null |
          grep -o '([0-9]* of [0-9]* found)')
  echo "db_bench (default memtable) readrandom, $reads reads: $found"
  case "$found" in "($reads of $reads found)") ;; *) echo "FAIL" >&2; exit 1 ;; esac
done
echo "PASS: $ROUNDS rounds"

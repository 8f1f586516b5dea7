#!/usr/bin/env bash
# Runs FlintKV's stock-tool paths under valgrind (memcheck); ctest runs each
# mode as a test labelled 'valgrind' (tests/CMakeLists.txt). Fails on any
# memcheck error, any definite leak outside tests/infra/valgrind.supp, or a wrong
# result.
#
#   scripts/check/valgrind_check.sh db_bench BUILD_DIR
#     stock db_bench fillrandom + readrandom with libflintkv_rocksdb.so
#     LD_PRELOADed (as scripts/run_main.sh loads it), memtables small enough
#     to switch and flush; checks the factory was FlintKVFactory.
#   scripts/check/valgrind_check.sh tool BUILD_DIR
#     db_bench fillseq with the plugin (native speed) killed with SIGKILL once
#     it has acknowledged writes, then flintkv_tool verify, inspect and recover
#     under valgrind; ldb must then see keys 0..k-1 with k >= the acknowledged
#     count. Any kill point gives a pool with unflushed memtables.
#   scripts/check/valgrind_check.sh run BUILD_DIR COMMAND [ARGS...]
#     COMMAND (e.g. a googletest binary with a --gtest_filter) under memcheck.
#   scripts/check/valgrind_check.sh bench BUILD_DIR
#     tools/flintkv_bench (its own correctness check on) at 1 and 2 threads.
# Env: VALGRIND (default: valgrind), WORK (default /dev/shm/flintkv_vg.$$).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODE=${1:?usage: valgrind_check.sh db_bench|tool|run|bench BUILD_DIR}
BUILD=$(cd "${2:?usage: valgrind_check.sh MODE BUILD_DIR}" && pwd)
shift 2
VALGRIND=${VALGRIND:-valgrind}
PLUGIN=$BUILD/memtable/rocksdb/libflintkv_rocksdb.so
TOOL=$BUILD/tools/flintkv_tool
WORK=${WORK:-/dev/shm/flintkv_vg.$$}
PID=
cleanup() { [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
rm -rf "$WORK"; mkdir -p "$WORK"
progress() {  # last "finished N ops" db_bench printed, 0 before the first
  { tr '\r' '\n' < "$WORK/fill.err" | grep -o 'finished [0-9]* ops' |
    tail -1 | awk '{print $2}'; } 2>/dev/null || true
}
acked_writes() { local n; n=$(progress); echo "${n:-0}"; }
fail() { echo "valgrind_check $MODE: FAIL: $*" >&2; exit 1; }

# memcheck: every error, and definite leaks, fail the run.
VG=("$VALGRIND" --tool=memcheck --error-exitcode=99 --quiet
    --leak-check=full --show-leak-kinds=definite
    --errors-for-leak-kinds=definite
    --suppressions="$ROOT/tests/infra/valgrind.supp")
vg() {  # name command... : runs under memcheck, output in $WORK/name.{out,err}
  local name=$1; shift
  echo "valgrind_check: memcheck $*"
  if ! "${VG[@]}" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"; then
    tail -40 "$WORK/$name.out" >&2
    tail -40 "$WORK/$name.err" >&2
    fail "$name under memcheck exited non-zero (99 = memcheck error)"
  fi
}

case "$MODE" in
  db_bench)
    MTR="id=flintkv;pool_dir=$WORK/pool;pool_size=64M;chunk_size=64K"
    LD_PRELOAD=$PLUGIN vg db_bench db_bench --benchmarks=fillrandom,readrandom \
      --num=3000 --threads=2 --disable_wal=1 --db="$WORK/db" \
      --compression_type=none --write_buffer_size=262144 --memtablerep="$MTR"
    grep -q 'Options.memtable_factory: FlintKVFactory' "$WORK/db/LOG" ||
      fail "db_bench did not use FlintKVFactory"
    grep -q '"event": "flush_finished"' "$WORK/db/LOG" ||
      fail "no memtable was flushed"
    grep -E '^(fillrandom|readrandom) ' "$WORK/db_bench.out"
    ;;
  tool)
    env LD_PRELOAD="$PLUGIN" db_bench --benchmarks=fillseq --num=50000000 \
      --threads=1 --db="$WORK/db" --disable_wal=1 --write_buffer_size=1048576 \
      --memtablerep="id=flintkv;pool_dir=$WORK/pool;pool_size=256M" \
      > "$WORK/fill.out" 2> "$WORK/fill.err" &
    PID=$!
    acked=0
    while kill -0 "$PID" 2>/dev/null && [ "$acked" -lt 20000 ]; do
      sleep 0.05
      acked=$(acked_writes)
    done
    kill -9 "$PID" 2>/dev/null || fail "db_bench ended before the kill"
    wait "$PID" 2>/dev/null || true
    PID=
    acked=$(acked_writes)
    echo "valgrind_check: db_bench killed after >= $acked acknowledged writes"
    vg verify "$TOOL" verify --pool_dir="$WORK/pool" --db="$WORK/db"
    vg inspect "$TOOL" inspect --pool_dir="$WORK/pool" --db="$WORK/db"
    grep -qE 'active|sealed' "$WORK/inspect.out" "$WORK/inspect.err" ||
      fail "the killed run left no unflushed memtable to recover"
    vg recover "$TOOL" recover --db="$WORK/db" --pool_dir="$WORK/pool"
    k=$(ldb --db="$WORK/db" scan --hex 2>/dev/null | wc -l)
    echo "valgrind_check: recovered DB holds $k keys (>= $acked acknowledged)"
    [ "$k" -ge "$acked" ] || fail "lost acknowledged writes: $k < $acked"
    ;;
  run)
    vg run "$@"
    tail -3 "$WORK/run.out"
    ;;
  bench)
    vg bench "$BUILD/tools/flintkv_bench" --num=20000 --threads=1,2 \
      --impl=flintkv --repeats=1 --pool_dir="$WORK" --prefault=false
    grep '^| flintkv' "$WORK/bench.out"
    ;;
  *) fail "unknown mode (db_bench|tool|run|bench)" ;;
esac
echo "valgrind_check $MODE: PASS"

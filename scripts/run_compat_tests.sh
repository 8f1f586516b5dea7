#!/usr/bin/env bash
# FlintKV against the newer RocksDB versions users run, each built once from
# Debian's source packages into the per-user cache (scripts/setup/build_rocksdb.sh):
# 9.10.0 (Debian 13, trixie) and 9.11.2 (Debian unstable, sid). The README
# test command covers 9.10.0's FlintKV tests; this script adds, per version:
#   1. FlintKV's RocksDB tests built against it (differential against its
#      own skiplist, kill and recover with the WAL off, recovery into SST
#      files, the OpenDB wrapper, bit rot, operations, RocksDB 9 features);
#   2. RocksDB's own db_bench and ldb built with ROCKSDB_PLUGINS=flintkv
#      (no LD_PRELOAD): db_bench fillseq and fillrandom with the flintkv
#      memtable and the WAL off, killed, flintkv_tool recover, every
#      acknowledged key present (scripts/check/crash_fillseq_demo.sh --tools);
#   3. RocksDB's own db_stress of that version with flintkv vs the skiplist
#      (scripts/peer/rocksdb_peer_tests.sh --rocksdb V --stress-only).
#
#   scripts/run_compat_tests.sh [--versions "9.10.0 9.11.2"] [--full]
#       [--report FILE]
#
# Cold (nothing cached): about 25 min of building per version on 2 cores;
# warm: about 10 min per version. Exit 1 if any check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSIONS="9.10.0 9.11.2"
PEER_MODE=--quick
REPORT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --versions) VERSIONS=$2; shift ;;
    --full) PEER_MODE=--full ;;
    --report) REPORT=$2; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "run_compat_tests: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
scripts/setup/setup.sh
CACHE=${FLINTKV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flintkv}
JOBS=${JOBS:-$(nproc)}
T0=$(date +%s)
SUMMARY=$(mktemp)
trap 'rm -f "$SUMMARY"' EXIT
status=0
row() {  # version check result
  printf '| %s | %s | %s |\n' "$1" "$2" "$3" >>"$SUMMARY"
  [ "$3" = PASS ] || status=1
}
run() {  # version check command... : runs, records PASS/FAIL
  local v=$1 what=$2; shift 2
  local t=$(date +%s)
  echo "=== RocksDB $v: $what"
  if "$@"; then
    row "$v" "$what" PASS
  else
    row "$v" "$what" FAIL
  fi
  echo "--- $what: $(( $(date +%s) - t )) s"
}

for v in $VERSIONS; do
  echo "=== RocksDB $v: build (cached in $CACHE)"
  if ! scripts/setup/build_rocksdb.sh "$v"; then
    row "$v" "build from Debian's source package" FAIL
    continue
  fi
  b=build-rocksdb-$v
  cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release \
    -DFLINTKV_ROCKSDB_ROOT="$CACHE/rocksdb-$v" -DFLINTKV_ONLY_ROCKSDB_TESTS=ON \
    -DFLINTKV_BUILD_BENCH=OFF >/dev/null
  if ! cmake --build "$b" -j"$JOBS" >"$b/compat-build.log" 2>&1; then
    tail -30 "$b/compat-build.log"
    row "$v" "FlintKV build" FAIL
    continue
  fi
  run "$v" "FlintKV's RocksDB tests ($(cd "$b" && ctest -N | tail -1 | grep -o '[0-9]*') tests)" \
    bash -c "cd '$b' && ctest --output-on-failure -j1 --timeout 1200"
  tools=$CACHE/rocksdb-$v-flintkv/bin
  run "$v" "ROCKSDB_PLUGINS=flintkv db_bench fillseq, kill -9, recover, ldb: every acknowledged key" \
    env NUM=3000000 scripts/check/crash_fillseq_demo.sh --tools "$tools" \
      --tool "$b/tools/flintkv_tool" 2
  run "$v" "ROCKSDB_PLUGINS=flintkv db_bench fillrandom, kill -9, recover: every acknowledged key" \
    env BENCH=fillrandom NUM=3000000 scripts/check/crash_fillseq_demo.sh --tools "$tools" \
      --tool "$b/tools/flintkv_tool" 2
  run "$v" "db_stress $PEER_MODE, flintkv vs skiplist" \
    scripts/peer/rocksdb_peer_tests.sh --rocksdb "$v" "$PEER_MODE" --stress-only
done

{
  echo "RocksDB compatibility, $(git rev-parse --short HEAD), $(date -u +%F)," \
       "$(nproc) cores, $(( $(date +%s) - T0 )) s"
  echo
  echo "| RocksDB | check | result |"
  echo "|---|---|---|"
  cat "$SUMMARY"
} | tee "${REPORT:-/dev/null}"
[ "$status" = 0 ] && echo "run_compat_tests: PASS" || echo "run_compat_tests: FAIL"
exit $status

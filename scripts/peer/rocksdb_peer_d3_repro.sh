#!/usr/bin/env bash
# Reproduces peer-test defect D3 (docs/results/rocksdb_peer_tests.md) with
# RocksDB's default skiplist memtable only: no FlintKV library, no
# FLINTKV_TEST_MEMTABLE.
#
#   scripts/peer/rocksdb_peer_d3_repro.sh [DB_TEST2_BINARY]
#       (default: $FLINTKV_CACHE/peer-build/bin/db_test2, FLINTKV_CACHE
#        defaulting to ~/.cache/flintkv as in scripts/peer/rocksdb_peer_tests.sh)
#
# Runs db_test2 --gtest_filter='DBTest2.*' under gdb and makes one ASSERT in
# DBTest2.SharedWriteBufferLimitAcrossDB fail, after the test opened its
# second DB: the first Put(2, ...) returns Corruption (gdb rewrites the
# returned Status), so ASSERT_OK returns from the test body, as the FlintKV
# run's accounting differences did. Unpatched, the test leaks that DB; its
# periodic DumpStats task (PeriodicTaskScheduler's process-wide timer) then
# runs in a later test and calls CacheEntryStatsCollector::CollectStats with
# the SystemClock of the deleted SpecialEnv -> SIGSEGV. With the hook
# patch's fix (db2 held by a unique_ptr) the test fails as forced and every
# other DBTest2 test runs to the end.
#
# Exit 0: no crash (fixed binary). Exit 1: the D3 crash. Exit 2: the forced
# failure did not happen (the script has no teeth).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-${FLINTKV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flintkv}/peer-build/bin/db_test2}
[ -x "$BIN" ] || { echo "no $BIN (build it with scripts/peer/rocksdb_peer_tests.sh --tests db_test2)" >&2; exit 2; }
command -v gdb >/dev/null || { echo "gdb is required" >&2; exit 2; }
TMP=$(mktemp -d /dev/shm/flintkv_d3.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
OUTF=$TMP/out
env -u LD_PRELOAD -u FLINTKV_TEST_MEMTABLE TEST_TMPDIR="$TMP" GTEST_COLOR=no \
  GTEST_FILTER='DBTest2.*' \
  gdb -batch -nx -ex "set confirm off" -ex "set pagination off" \
    -ex "set startup-with-shell off" -ex "handle SIGPIPE nostop noprint" \
    -ex "break rocksdb::DBTest2_SharedWriteBufferLimitAcrossDB_Test::TestBody" \
    -ex run \
    -ex "tbreak 'rocksdb::DBTestBase::Put(int, rocksdb::Slice const&, rocksdb::Slice const&, rocksdb::WriteOptions)'" \
    -ex continue \
    -ex 'set $status = (unsigned char*)$rdi' -ex finish \
    -ex 'set *$status = 2' -ex 'echo == D3 repro: Put(2, ...) now returns Corruption\n' \
    -ex "delete" -ex continue -ex "bt 8" \
    --args "$BIN" >"$OUTF" 2>&1
grep -v '^\[New Thread\|^\[Thread' "$OUTF" | grep -E 'D3 repro|SharedWriteBufferLimitAcrossDB|SIGSEGV|CollectStats|DumpStats|^\[  PASSED|^\[  FAILED|exited' | head -20
if grep -q 'SIGSEGV' "$OUTF"; then
  echo "D3 reproduced: SIGSEGV after the leaked DB's DumpStats ran ($(grep -c '^\[       OK' "$OUTF") tests OK before it)"
  exit 1
fi
if ! grep -q 'FAILED  \] DBTest2.SharedWriteBufferLimitAcrossDB' "$OUTF"; then
  echo "forced failure did not happen" >&2
  exit 2
fi
echo "no crash: $(grep -c '^\[       OK' "$OUTF") tests OK after the forced failure"
exit 0

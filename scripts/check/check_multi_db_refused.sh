#!/usr/bin/env bash
# Two DBs on one pool, with stock tools: `db_bench --num_multi_db=2` opens two
# DBs on one pool_dir in one process; the second DB::Open must be refused
# with a message that says each DB needs its own pool_dir (before, both DBs
# wrote into the pool and a later recovery crossed their data). With one
# pool_dir per DB, the same run succeeds.
#   scripts/check/check_multi_db_refused.sh LIBFLINTKV_ROCKSDB_SO
set -euo pipefail
LIB=${1:?usage: $0 path/to/libflintkv_rocksdb.so}
DIR=$(mktemp -d /dev/shm/flintkv_multidb.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
common=(--benchmarks=fillrandom --num=2000 --disable_wal=1 --num_multi_db=2
        --write_buffer_size=1048576 --compression_type=none)
rc=0
LD_PRELOAD=$LIB db_bench "${common[@]}" --db="$DIR/shared" \
  --memtablerep="id=flintkv;pool_dir=$DIR/pool;pool_size=256M" \
  >"$DIR/out" 2>&1 || rc=$?
cat "$DIR/out"
[ "$rc" -ne 0 ] || { echo "FAIL: two DBs opened on one pool_dir"; exit 1; }
grep -q "each DB needs its own pool_dir" "$DIR/out" ||
  { echo "FAIL: refused without saying why"; exit 1; }
# db_bench names its DBs <db>/0 and <db>/1, each may have its own pool only
# through separate processes; one DB per process on separate pools works.
for i in 0 1; do
  LD_PRELOAD=$LIB db_bench --benchmarks=fillrandom --num=2000 --disable_wal=1 \
    --db="$DIR/own$i" --memtablerep="id=flintkv;pool_dir=$DIR/pool$i;pool_size=256M" \
    >"$DIR/out$i" 2>&1 || { cat "$DIR/out$i"; echo "FAIL: DB $i on its own pool"; exit 1; }
done
echo "PASS: the second DB on one pool_dir was refused; separate pools work"

#!/usr/bin/env bash
# The layering of recovery/ and the RocksDB adapter (memtable/rocksdb/),
# as the includes show it:
#   - recovery/ includes from the adapter only its one interface,
#     recovery_port.h, and the records both sides read and write in the
#     pool (memtable_meta.h, memtable_entry.h, watermark.h, and the version
#     gate memtable_entry.h stands on, rocksdb_version_gate.h);
#   - the adapter includes nothing of recovery/ (it does not know who
#     calls it).
# What both share besides lives in rocksdb_common/.
#   scripts/check/check_recovery_imports.sh [ROOT]   (ctest: recovery_imports)
#   scripts/check/check_recovery_imports.sh --self-test
set -euo pipefail
if [ "${1:-}" = --self-test ]; then
  T=$(mktemp -d "${TMPDIR:-/tmp}/recovery_imports.XXXXXX")
  trap 'rm -rf "$T"' EXIT
  mkdir -p "$T/recovery" "$T/memtable/rocksdb"
  echo '#include "memtable/rocksdb/recovery_port.h"' >"$T/recovery/ok.inc"
  echo '#include "memtable/rocksdb/pool_session.h"' >"$T/recovery/bad.inc"
  echo '#include "recovery/replay.h"' >"$T/memtable/rocksdb/bad.inc"
  out=$("$0" "$T" 2>&1) && { echo "self-test: FAIL: passed"; exit 1; }
  for want in recovery/bad.inc memtable/rocksdb/bad.inc; do
    grep -q "$want" <<<"$out" || { echo "self-test: FAIL: $want"; exit 1; }
  done
  grep -q "recovery/ok.inc" <<<"$out" && { echo "self-test: FAIL: ok.inc"; exit 1; }
  echo "self-test: ok"
  exit 0
fi
cd "${1:-$(dirname "$0")/../..}"
ALLOWED='recovery_port|memtable_meta|memtable_entry|watermark|rocksdb_version_gate'
bad=0
while IFS= read -r hit; do
  echo "check_recovery_imports: recovery/ reaches past the adapter's port: $hit"
  bad=1
done < <(grep -rnE '^#include "memtable/rocksdb/' recovery |
         grep -vE "\"memtable/rocksdb/($ALLOWED)\.h\"" || true)
while IFS= read -r hit; do
  echo "check_recovery_imports: the adapter includes recovery/: $hit"
  bad=1
done < <(grep -rnE '^#include "recovery/' memtable || true)
[ "$bad" = 0 ] || exit 1
echo "check_recovery_imports: recovery/ uses the adapter through recovery_port.h"

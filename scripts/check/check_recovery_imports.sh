#!/usr/bin/env bash
# The layering of recovery/, the RocksDB adapter (memtable/rocksdb/) and
# what both share (rocksdb_common/), as the includes show it:
#   - recovery/ includes from the adapter only its one interface,
#     memtable/rocksdb/recovery_port.h;
#   - the adapter includes nothing of recovery/ (it does not know who
#     calls it);
#   - rocksdb_common/ (the pool's records, the RocksDB version gate, the
#     Status conversion, the crash points) includes neither.
#   scripts/check/check_recovery_imports.sh [ROOT]   (ctest: recovery_imports)
#   scripts/check/check_recovery_imports.sh --self-test
set -euo pipefail
if [ "${1:-}" = --self-test ]; then
  T=$(mktemp -d "${TMPDIR:-/tmp}/recovery_imports.XXXXXX")
  trap 'rm -rf "$T"' EXIT
  mkdir -p "$T/recovery" "$T/memtable/rocksdb" "$T/rocksdb_common"
  {
    echo '#include "memtable/rocksdb/recovery_port.h"'
    echo '#include "rocksdb_common/memtable_meta.h"'
  } >"$T/recovery/ok.inc"
  echo '#include "memtable/rocksdb/pool_session.h"' >"$T/recovery/bad.inc"
  # Names of no file, put together from $A so that check_doc_refs.sh does
  # not read them as references: the pool's records are not the adapter's
  # (they live in rocksdb_common/), and a name that only starts like the
  # port's is not the port.
  A=memtable/rocksdb
  echo "#include \"$A/watermark.h\"" >"$T/recovery/bad_record.inc"
  echo "#include \"$A/recovery_port_impl.h\"" >"$T/recovery/bad_prefix.inc"
  echo '#include "recovery/replay.h"' >"$T/memtable/rocksdb/bad.inc"
  echo '#include "memtable/rocksdb/flintkv_rep.h"' >"$T/rocksdb_common/bad.inc"
  echo '#include "recovery/replay.h"' >"$T/rocksdb_common/bad2.inc"
  out=$("$0" "$T" 2>&1) && { echo "self-test: FAIL: passed"; exit 1; }
  for want in recovery/bad.inc recovery/bad_record.inc recovery/bad_prefix.inc \
              memtable/rocksdb/bad.inc rocksdb_common/bad.inc \
              rocksdb_common/bad2.inc; do
    grep -q "$want" <<<"$out" || { echo "self-test: FAIL: $want"; exit 1; }
  done
  grep -q "recovery/ok.inc" <<<"$out" && { echo "self-test: FAIL: ok.inc"; exit 1; }
  echo "self-test: ok"
  exit 0
fi
cd "${1:-$(dirname "$0")/../..}"
bad=0
while IFS= read -r hit; do
  echo "check_recovery_imports: recovery/ reaches past the adapter's port: $hit"
  bad=1
done < <(grep -rnE '^#include "memtable/rocksdb/' recovery |
         grep -vE '"memtable/rocksdb/recovery_port\.h"' || true)
while IFS= read -r hit; do
  echo "check_recovery_imports: the adapter includes recovery/: $hit"
  bad=1
done < <(grep -rnE '^#include "recovery/' memtable || true)
while IFS= read -r hit; do
  echo "check_recovery_imports: rocksdb_common/ includes a side: $hit"
  bad=1
done < <(grep -rnE '^#include "(memtable/rocksdb|recovery)/' rocksdb_common ||
         true)
[ "$bad" = 0 ] || exit 1
echo "check_recovery_imports: recovery/ uses the adapter through recovery_port.h"

#!/usr/bin/env bash
# Long kill -9 campaign with RocksDB's own WAL-off crash check: stock
# db_stress (RocksDB 7.8.3, or --rocksdb 9.10.0|9.11.2) in its crash_nowal
# mode with the flintkv memtable, killed KILLS times, each kill followed by
# flintkv_tool recover and a restart on which db_stress restores its
# expected state to the DB's recovered sequence number and verifies every
# key; then the same for crash_nowal_durable (every acknowledged write).
# The skiplist runs beside it, as in the test command's peer stage (it
# fails the durable mode at its first kill: the negative control).
#   scripts/dev/crash_nowal_campaign.sh [KILLS] [SECONDS_BEFORE_EACH_KILL]
#                                      [--rocksdb VERSION]
# Defaults: 200 kills, 3 s. Needs the Release build in build/.
set -euo pipefail
cd "$(dirname "$0")/../.."
KILLS=${1:-200}
AFTER=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
start=$(date +%s)
REPORT=$(mktemp)
trap 'rm -f "$REPORT"' EXIT
# The verdict is flintkv's: RocksDB's skiplist is the reference, and with
# short kill intervals it fails some restarts of the stock crash_nowal check
# itself (docs/results/rocksdb_peer_tests.md).
PEER_KILLS=$KILLS PEER_KILL_AFTER=$AFTER \
  scripts/peer/rocksdb_peer_tests.sh --quick --stress-only \
  --modes "crash_nowal crash_nowal_durable" --report "$REPORT" "$@" || true
echo "crash_nowal campaign: $KILLS kills per mode and memtable," \
     "$(( $(date +%s) - start )) s"
status=0
for mode in crash_nowal crash_nowal_durable; do
  row=$(grep -E "^\| db_stress \| $mode \|" "$REPORT" || true)
  flintkv=$(echo "$row" | awk -F'|' '{print $5}')
  echo "flintkv $mode:$flintkv"
  [[ "$flintkv" == " PASS ("*"$KILLS/$KILLS restarts verified"* ]] || status=1
done
exit $status

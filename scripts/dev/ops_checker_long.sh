#!/usr/bin/env bash
# Long run of the operations model checker (tests/opcheck/ops_checker.cc):
# seeds from FIRST on, STEPS steps each, every operation kind, until
# MINUTES have passed; prints each finding (seed, step, history) and the
# totals: steps, lives, kills (in a life and inside recovery), refusals,
# and the operations of each kind.
#   scripts/dev/ops_checker_long.sh [MINUTES] [FIRST_SEED] [STEPS] [--ops=...]
# Defaults: 60 minutes, seed 1000, 40 steps, all kinds. Needs the Release
# build in build/ (scripts/run_tests.sh or scripts/run_main.sh makes it),
# or the checker binary named by OPS_CHECKER_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
MINUTES=${1:-60}
SEED=${2:-1000}
STEPS=${3:-40}
shift $(( $# > 3 ? 3 : $# ))
BIN=${OPS_CHECKER_BIN:-build/tests/flintkv_ops_checker}
[ -x "$BIN" ] || { echo "no $BIN: build the Release tree first" >&2; exit 2; }
DIR=${OPS_CHECKER_DIR:-/dev/shm/flintkv_ops_checker_long.$$}
LOG=$(mktemp)
trap 'rm -rf "$DIR" "$LOG"' EXIT
end=$(( $(date +%s) + MINUTES * 60 ))
first=$SEED
found=0
while [ "$(date +%s)" -lt "$end" ]; do
  # 20 seeds per batch: totals are summed over batches below.
  if ! "$BIN" --seeds="$SEED-$((SEED + 19))" --steps="$STEPS" --dir="$DIR" \
       "$@" >>"$LOG" 2>&1; then
    found=1
  fi
  SEED=$((SEED + 20))
done
grep -A40 '^FINDING' "$LOG" | grep -v '^  [a-z_]* [0-9]*$' || true
echo "ops checker: seeds $first-$((SEED - 1)), $STEPS steps each, $MINUTES min"
awk '/^  [a-zA-Z_+]+ [0-9]+$/ { t[$1] += $2 }
     END { for (k in t) printf "  %-22s %d\n", k, t[k] }' "$LOG" | sort
echo "seeds with findings: $(grep -c '^FINDING' "$LOG" || true)"
exit $found

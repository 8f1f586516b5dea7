#!/usr/bin/env bash
# Checks that shipped binaries carry no test hook (ctest
# release_has_no_test_hooks): rocksdb_common/crash_point.h's crash points
# compile to nothing unless FLINTKV_TEST_HOOKS is defined, which only the
# test-only libraries *_testing are built with.
#
#   scripts/check/check_no_test_hooks.sh FILE...
#     fails if any FILE (library, archive or executable) contains the string
#     FLINTKV_CRASH_POINT (the environment variable a hook reads) or a
#     crash point's name, or defines or calls a CrashPoint symbol.
#   scripts/check/check_no_test_hooks.sh --expect-hooks FILE...
#     self-test: succeeds only if every FILE is found to carry a hook (the
#     *_testing libraries), so the check is known to be able to fail.
set -euo pipefail

expect_hooks=0
if [[ "${1:-}" == "--expect-hooks" ]]; then
  expect_hooks=1
  shift
fi
[[ $# -gt 0 ]] || { echo "usage: $0 [--expect-hooks] FILE..." >&2; exit 2; }

names='FLINTKV_CRASH_POINT|flintkv_mark_flushed|recovery_after_list|recovery_before_ingest|recovery_after_ingest|recovery_after_flush'
bad=0
for f in "$@"; do
  [[ -f "$f" ]] || { echo "$f: missing" >&2; exit 2; }
  found=""
  n=$(grep -a -c -E "$names" "$f" || true)
  [[ "$n" -eq 0 ]] || found+=" strings($n)"
  # nm -A names the archive member; a stripped file has no symbols to show.
  syms=$( { nm -C "$f" 2>/dev/null; nm -C -D "$f" 2>/dev/null; } |
          grep -c 'CrashPoint' || true)
  [[ "$syms" -eq 0 ]] || found+=" CrashPoint-symbols($syms)"
  if [[ -n "$found" ]]; then
    echo "$f: test hook found:$found"
    [[ $expect_hooks -eq 1 ]] || bad=1
  else
    echo "$f: no test hook"
    [[ $expect_hooks -eq 0 ]] || bad=1
  fi
done
exit $bad

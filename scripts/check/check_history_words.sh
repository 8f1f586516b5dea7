#!/usr/bin/env bash
# The tree speaks of the product only (CONTRIBUTING.md, "Commits"): no
# development history in code, tests, docs, scripts or CMake. Lists every
# file:line that names
#   - a tracker item: "issue" + number ("issue 23", "Issue 8j", "issues
#     10.1, 11.1", "issue #5"), "tracker" + number, "(#12)", "fixes #12",
#     "closes #12", "see #12", "PR #12", "bug #12";
#   - a working session: "session" + number ("session 3", "Session 13");
#   - review history: "decision of", "review finding", "adversarial review",
#     "adversarial operations review", "found by review", "(review)";
#   - a commit cited as history in code, scripts or CMake (not in Markdown):
#     a word of 7-12 lowercase hex digits with a digit and a letter, as in a
#     comment "(7ff2f8c: k came back)".
# Deliberately allowed:
#   - '#' + digits that is no tracker reference: "#include", "#pragma",
#     "#define", Markdown headings, "node #3", backtrace frames "#1 Foo()";
#   - URLs: http(s) URLs are removed from a line before it is matched, so an
#     upstream project's issue page (RocksDB's, PMDK's) that documents a bug
#     the code relies on may be cited, as a URL only;
#   - "session" and "issue" without a number, technical words here (the
#     pool's session, "an SST file of this session", "issues CLWB");
#     invariant names such as PR1;
#   - commit hashes in Markdown: docs/results name the commit a figure was
#     measured at (provenance, CONTRIBUTING.md "Docs and results"); 0x
#     constants; full 40-digit hashes (pinned upstream commits).
# The verb with a digit ("issues 2 fences") is flagged too: spell the number.
#   scripts/check/check_history_words.sh [FILE...]   (run by run_tests.sh)
#     without FILEs: every tracked file (git ls-files; outside a git
#     checkout every file, build*/ and .cache*/ pruned), this script excepted
#   scripts/check/check_history_words.sh --self-test
#     plants each kind of word in a temporary file and expects each to be
#     reported and nothing allowed to be, so the check cannot pass silently.
set -euo pipefail
cd "$(dirname "$0")/../.."
SELF=scripts/check/check_history_words.sh

words='\bissues? +#?[0-9]|\btracker +#?[0-9]|\(#[0-9]+\)'
words+='|\b(fix(e[sd])?|close[sd]?|see|pr|bug) +#[0-9]'
words+='|\bsessions? +#?[0-9]'
words+='|decision of|review finding|adversarial (operations )?review'
words+='|found by (an? |the )?review|\(review\)'
hex='(^|[^0-9A-Za-z_])[0-9a-f]{7,12}($|[^0-9A-Za-z_])'

scan() {  # FILE...: prints file:line:text of every hit
  grep -nIHiE "$words" -- "$@" | sed -E 's#https?://[^[:space:])>"]*##g' |
    grep -iE "^[^:]*:[0-9]+:.*($words)" || true
  local f
  for f in "$@"; do
    case "$f" in *.md) continue ;; esac
    grep -nIHE "$hex" -- "$f" | sed -E 's#https?://[^[:space:])>"]*##g' |
      while IFS= read -r hit; do
        grep -oE "$hex" <<<"${hit#*:*:}" | grep -E '[0-9]' | grep -qE '[a-f]' &&
          echo "$hit"
      done || true
  done
}

if [ "${1:-}" = "--self-test" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cat >"$tmp/planted.cc" <<'EOF'
// planted: fixed in issue 12
// planted: Session 3 measured it
// planted: (7ff2f8c: k came back as v1)
// planted: found by an adversarial operations review
// planted: see #4
#include <cstdint>
#pragma once
// allowed: node #3 at offset 64; invariant PR1; the pool's session
// allowed: https://github.com/facebook/rocksdb/issues/12345
constexpr uint64_t kMagic = 0x7ff2f8c1d;
EOF
  cat >"$tmp/planted.md" <<'EOF'
## End to end (issue 23)
## Allowed heading, measured at commit 7ff2f8c
EOF
  rc=0
  out=$("$0" "$tmp/planted.cc" "$tmp/planted.md" 2>&1) || rc=$?
  flagged=$(grep -c 'planted: \|(issue 23)' <<<"$out" || true)
  if [ "$rc" -ne 1 ] || [ "$flagged" -ne 6 ] || grep -q 'allowed\|Allowed\|#include\|#pragma\|kMagic' <<<"$out"; then
    echo "check_history_words: FAIL: self-test (exit $rc, $flagged of 6 planted lines flagged):" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "check_history_words: self-test OK, the 6 planted lines are flagged, the allowed ones not"
  exit 0
fi

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(
    { git ls-files 2>/dev/null ||
        find . \( -name 'build*' -o -name '.cache*' -o -name .git \) -prune -o -type f -print |
        sed 's|^\./||'; } |
      grep -vxF -e "$SELF")
fi
hits=$(scan "${files[@]}")
if [ -n "$hits" ]; then
  echo "$hits" | cut -c1-200 >&2
  echo "check_history_words: say the technical fact without its history (no issue," \
       "session or review numbers, no commit hashes in code; CONTRIBUTING.md)" >&2
  exit 1
fi
echo "check_history_words: ${#files[@]} files speak of the product only"

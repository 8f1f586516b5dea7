#!/usr/bin/env bash
# Every C++ file of the tree is as clang-format (the repository's
# .clang-format, Google style) writes it; lists the ones that are not.
#   scripts/check/check_format.sh        (the test command runs it)
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v clang-format >/dev/null ||
  { echo "check_format: clang-format not found (apt-get install clang-format)" >&2; exit 1; }
bad=()
while IFS= read -r f; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cc' '*.h')
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check_format: not clang-formatted: %s\n' "${bad[@]}" >&2
  echo "check_format: run clang-format -i on them" >&2
  exit 1
fi
echo "check_format: $(git ls-files '*.cc' '*.h' | wc -l) files formatted"

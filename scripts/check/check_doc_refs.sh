#!/usr/bin/env bash
# Fails on file references that point nowhere: every path-like token
# (include/..., memtable/..., pmem/..., recovery/..., rocksdb_common/...,
# tests/..., tools/..., scripts/..., docs/..., cmake/..., db_bench_patches/...)
# in the docs, the READMEs and the code's comments must name a file or
# directory of the tree
# (from its root, or relative to the file that names it).
# Only names of source-tree files count (by extension: .h .cc .md .sh .py
# .patch .mk .txt .in .supp .csv .png), not build outputs; glob patterns,
# placeholders and RocksDB's own files (include/rocksdb/..., its
# tools/db_bench_tool.cc) are skipped.
#   scripts/check/check_doc_refs.sh [FILE...]   (ctest: doc_file_references)
# With FILEs, only those are scanned (ctest doc_file_references_selftest
# scans tests/infra/doc_refs_selftest.md, which names a missing file, and expects
# the failure).
set -euo pipefail
cd "$(dirname "$0")/../.."
bad=0
while IFS= read -r src; do
  # shellcheck disable=SC2013
  for ref in $(grep -oE '(^|[^A-Za-z0-9_./-])(include|memtable|pmem|recovery|rocksdb_common|tests|tools|scripts|docs|cmake|db_bench_patches)/[A-Za-z0-9_./*<>{}-]*[A-Za-z0-9_]' "$src" |
               sed -E 's/^[^a-z]//' | sort -u); do
    case "$ref" in *'*'*|*'<'*|*'>'*|*'{'*|*'}'*) continue ;; esac
    case "$ref" in include/rocksdb/*|tools/db_bench_tool.cc) continue ;; esac
    case "$ref" in *.h|*.cc|*.md|*.sh|*.py|*.patch|*.mk|*.txt|*.in|*.supp|*.csv|*.png) ;;
      *) continue ;; esac
    # A path from the tree's root, or relative to the naming file (CMake).
    [ -e "$ref" ] || [ -e "$(dirname "$src")/$ref" ] && continue
    echo "$src: $ref does not exist"
    bad=1
  done
done < <(if [ $# -gt 0 ]; then printf '%s\n' "$@"; else
           { git ls-files '*.md' '*.h' '*.cc' '*.sh' '*.py' '*.txt' '*.mk' 2>/dev/null ||
             find . -path './build*' -prune -o -type f \( -name '*.md' -o -name '*.h' \
               -o -name '*.cc' -o -name '*.sh' -o -name '*.py' -o -name '*.txt' \
               -o -name '*.mk' \) -print | sed 's|^\./||'; } |
             grep -v -e '^docs/results/' -e '^tests/infra/doc_refs_selftest.md$'; fi)
if [ "$bad" = 0 ]; then echo "check_doc_refs: every file reference resolves"; fi
exit $bad

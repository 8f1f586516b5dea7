#!/usr/bin/env bash
# Builds a release (NDEBUG) RocksDB 7.8.3 -- the same sources, Debian patches
# and configure options as Debian's librocksdb7.8 / rocksdb-tools, only with
# assertions off -- into a cached directory, for the end-to-end benchmarks
# (scripts/paper/paper_figures.py) to compare FlintKV with a RocksDB that does not
# pay for its own assertions. Not run in CI (about an hour of one core).
#
#   scripts/setup/build_release_rocksdb.sh [--jobs N] [--force]
#
# Output ($FLINTKV_CACHE, default ~/.cache/flintkv: per user, kept across
# clones; delete it to rebuild):
#   $CACHE/rocksdb-release/lib/librocksdb.so.7.8   (same soname as Debian's)
#   $CACHE/rocksdb-release/bin/db_bench            (linked against it: run it
#       with LD_LIBRARY_PATH=$CACHE/rocksdb-release/lib so that it and the
#       FlintKV plugin LD_PRELOADed into it both bind to the release lib)
#   $CACHE/rocksdb-release/BUILD_INFO              (flags used)
#
# Flags: debian/rules configures with cmake, build type None, -DPORTABLE=ON,
# -DWITH_{BZ2,LZ4,ZLIB,ZSTD,SNAPPY}=ON, -DROCKSDB_BUILD_SHARED=ON,
# -DFAIL_ON_WARNINGS=OFF and dpkg-buildflags' CFLAGS/CPPFLAGS/LDFLAGS
# (-O2, -fstack-protector-strong, -D_FORTIFY_SOURCE=2, -z relro). We use
# exactly those, plus -DNDEBUG, minus -g (debug info does not change the
# code, it only makes the build slower). Tests and the other tools are not
# built (only the targets rocksdb-shared and db_bench).
#
# Runs under nice -n 10 with -j2 by default (JOBS or --jobs to change): the
# machine is shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
# shellcheck source=scripts/setup/rocksdb_source.sh
. "$ROOT/scripts/setup/rocksdb_source.sh"

JOBS=${JOBS:-2}
FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) JOBS=$2; shift ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "build_release_rocksdb: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

CACHE=${FLINTKV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flintkv}
SRC=$CACHE/rocksdb-7.8.3-release-src
BUILD=$CACHE/rocksdb-release-build
OUT=$CACHE/rocksdb-release
if [ "$FORCE" = 0 ] && [ -x "$OUT/bin/db_bench" ] && [ -f "$OUT/lib/librocksdb.so.7.8" ]; then
  echo "build_release_rocksdb: $OUT is up to date (--force to rebuild)"
  exit 0
fi
command -v dpkg-buildflags >/dev/null || { echo "needs dpkg-dev" >&2; exit 1; }

if [ ! -f "$SRC/CMakeLists.txt" ]; then
  rocksdb_source_extract "$CACHE" "$SRC"   # applies debian/patches
fi

strip_g() { sed -E 's/(^| )-g( |$)/ /g'; }
CFLAGS_D=$(dpkg-buildflags --get CFLAGS | strip_g)
CXXFLAGS_D=$(dpkg-buildflags --get CXXFLAGS | strip_g)
CPPFLAGS_D=$(dpkg-buildflags --get CPPFLAGS)
LDFLAGS_D=$(dpkg-buildflags --get LDFLAGS)
export CFLAGS="$CPPFLAGS_D $CFLAGS_D -DNDEBUG"
export CXXFLAGS="$CPPFLAGS_D $CXXFLAGS_D -DNDEBUG"
export LDFLAGS="$LDFLAGS_D"

mkdir -p "$BUILD"
# The options of debian/rules' override_dh_auto_configure, with tests and
# the non-benchmark tools off (they are not built here anyway).
nice -n 10 cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=None \
  -DWITH_BZ2=ON -DWITH_LZ4=ON -DWITH_ZLIB=ON -DWITH_ZSTD=ON -DWITH_SNAPPY=ON \
  -DROCKSDB_BUILD_SHARED=ON -DWITH_BENCHMARK_TOOLS=ON -DWITH_CORE_TOOLS=OFF \
  -DWITH_TOOLS=OFF -DWITH_TESTS=OFF -DPORTABLE=ON -DFAIL_ON_WARNINGS=OFF \
  -DWITH_GFLAGS=ON >"$BUILD/configure.log"
T0=$(date +%s)
echo "build_release_rocksdb: building rocksdb-shared and db_bench (nice -n 10, -j$JOBS)"
nice -n 10 cmake --build "$BUILD" -j"$JOBS" --target rocksdb-shared db_bench \
  >"$BUILD/build.log" 2>&1 || { tail -30 "$BUILD/build.log"; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT/lib" "$OUT/bin"
cp -a "$BUILD"/librocksdb.so* "$OUT/lib/"
cp "$BUILD/db_bench" "$OUT/bin/db_bench"
{
  echo "rocksdb $(grep -m1 '^Version' "$(rocksdb_source_dsc "$CACHE")" | cut -d' ' -f2) (Debian source package, debian/patches applied)"
  echo "CXXFLAGS=$CXXFLAGS"
  echo "LDFLAGS=$LDFLAGS"
  grep -E '^CMAKE_CXX_FLAGS:|^PORTABLE:|^CMAKE_BUILD_TYPE:' "$BUILD/CMakeCache.txt"
  echo "built $(date -u +%FT%TZ) in $(( $(date +%s) - T0 )) s, -j$JOBS"
} >"$OUT/BUILD_INFO"
echo "build_release_rocksdb: done: $OUT ($(( $(date +%s) - T0 )) s)"
echo "  run: LD_LIBRARY_PATH=$OUT/lib $OUT/bin/db_bench ..."

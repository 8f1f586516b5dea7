#!/usr/bin/env bash
# Builds a newer RocksDB than Debian 12's from Debian's source packages
# (9.10.0 from trixie, 9.11.2 from sid) into the per-user cache, once, lean:
# the static library and the three tools FlintKV is checked with.
#
#   scripts/setup/build_rocksdb.sh VERSION [--lib-only] [--jobs N]
#
#   VERSION      9.10.0 or 9.11.2
#   --lib-only   only the library (what FlintKV's own build links against)
#
# Output ($FLINTKV_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/flintkv; per
# user, kept across clones, delete it to rebuild):
#   $CACHE/rocksdb-VERSION/            `cmake --install` prefix of the plain
#       library (lib/librocksdb.a, include/, lib/cmake/rocksdb/RocksDBConfig.cmake):
#       FlintKV's CMake finds it with -DFLINTKV_ROCKSDB_ROOT=<this dir>
#   $CACHE/rocksdb-VERSION-flintkv/bin/{db_bench,ldb,db_stress}
#       RocksDB's own tools from a build with ROCKSDB_PLUGINS=flintkv
#       (RocksDB's plugin/ convention, memtable/rocksdb/plugin): FlintKV is
#       compiled into them, no LD_PRELOAD. Rebuilt (the plugin's one source
#       and the links) when the FlintKV tree changes; RocksDB's own objects
#       are shared with the plain library's build.
#
# Sources: `apt-get source --download-only rocksdb=VERSION-1` through a
# deb-src entry for trixie and sid (only source indexes are added: no binary
# package of another suite is ever installed). The upstream tarball's
# SHA-256 is checked against the Sources index; Debian's own patches are
# packaging-only and are not applied.
#
# Configuration: Release (NDEBUG, -O2 from RocksDB's CMake), PORTABLE=1,
# RTTI on (so that code built with RTTI can subclass RocksDB's classes),
# snappy/lz4/zstd/zlib/bz2 and gflags as Debian's build, no liburing, no
# jemalloc, tests off. Runs under nice -n 10, -j$JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
VERSION=${1:-}
shift || true
LIB_ONLY=0
JOBS=${JOBS:-2}
while [ $# -gt 0 ]; do
  case "$1" in
    --lib-only) LIB_ONLY=1 ;;
    --jobs) JOBS=$2; shift ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "build_rocksdb: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
case "$VERSION" in
  9.10.0|9.11.2) ;;
  -h|--help|"") sed -n '2,33p' "$0"; exit 2 ;;
  *) echo "build_rocksdb: unsupported version '$VERSION' (9.10.0, 9.11.2)" >&2
     exit 2 ;;
esac
CACHE=${FLINTKV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flintkv}
SRC=$CACHE/src/rocksdb-$VERSION
BUILD=$CACHE/build/rocksdb-$VERSION
PREFIX=$CACHE/rocksdb-$VERSION
TOOLS=$CACHE/rocksdb-$VERSION-flintkv
T0=$(date +%s)
log() { echo "[build_rocksdb $VERSION $(( $(date +%s) - T0 ))s] $*"; }
die() { echo "build_rocksdb $VERSION: FAIL: $*" >&2; exit 1; }

# ---------------------------------------------------------------- sources
fetch_source() {
  local tarball=$CACHE/rocksdb_$VERSION.orig.tar.gz
  if [ ! -f "$tarball" ]; then
    if ! apt-cache showsrc rocksdb 2>/dev/null | grep -q "^Version: $VERSION-1$"; then
      log "adding deb-src entries for trixie and sid (source indexes only)"
      local SUDO=""
      [ "$(id -u)" -ne 0 ] && SUDO=sudo
      $SUDO tee /etc/apt/sources.list.d/flintkv-newer-rocksdb-src.sources >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
      $SUDO apt-get update -qq >/dev/null
    fi
    log "fetching Debian's rocksdb $VERSION-1 source package"
    # Some mirrors serve the tarballs but not the .dsc; the tarball is
    # checked against the index below either way.
    (cd "$CACHE" && apt-get source -qq --download-only "rocksdb=$VERSION-1" \
       >/dev/null 2>&1) || true
    [ -f "$tarball" ] || die "apt-get source rocksdb=$VERSION-1 gave no $tarball"
  fi
  local want got
  want=$(apt-cache showsrc rocksdb 2>/dev/null |
         awk -v f="rocksdb_$VERSION.orig.tar.gz" \
           '/^Checksums-Sha256/{s=1;next} /^[A-Za-z]/{s=0} s && $3==f {print $1; exit}')
  got=$(sha256sum "$tarball" | cut -d' ' -f1)
  if [ -n "$want" ] && [ "$want" != "$got" ]; then
    rm -f "$tarball"
    die "rocksdb_$VERSION.orig.tar.gz: SHA-256 $got is not the index's $want (removed; rerun)"
  fi
  [ -n "$want" ] || log "warning: no Sources index entry to check the tarball against"
  if [ ! -f "$SRC/.flintkv_extracted" ]; then
    rm -rf "$SRC" && mkdir -p "$SRC"
    tar -xzf "$tarball" -C "$SRC" --strip-components=1
    echo "$got" >"$SRC/.flintkv_extracted"
  fi
}

configure() {  # plugins ("" or flintkv)
  local plugins=$1
  local args=(-DCMAKE_BUILD_TYPE=Release -DPORTABLE=1 -DUSE_RTTI=1
    -DFAIL_ON_WARNINGS=OFF -DWITH_GFLAGS=ON -DWITH_SNAPPY=ON -DWITH_LZ4=ON
    -DWITH_ZSTD=ON -DWITH_ZLIB=ON -DWITH_BZ2=ON -DWITH_LIBURING=OFF
    -DWITH_JEMALLOC=OFF -DWITH_TESTS=OFF -DWITH_ALL_TESTS=OFF
    -DWITH_BENCHMARK_TOOLS=ON -DWITH_CORE_TOOLS=ON -DWITH_TOOLS=ON
    -DWITH_TRACE_TOOLS=OFF -DROCKSDB_BUILD_SHARED=OFF
    -DCMAKE_INSTALL_PREFIX="$PREFIX" -DROCKSDB_PLUGINS="$plugins")
  if [ -n "$plugins" ]; then
    ln -sfn "$ROOT/memtable/rocksdb/plugin" "$SRC/plugin/flintkv"
    args+=(-DFLINTKV_ROOT="$ROOT")
  fi
  # Ninja: it rebuilds an object only when its own command line changed, so
  # adding the plugin (per-source flags) recompiles the plugin alone; the
  # Makefile generator rewrote flags.make and rebuilt all of RocksDB.
  if [ -f "$BUILD/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja' "$BUILD/CMakeCache.txt"; then
    rm -rf "$BUILD"
  fi
  mkdir -p "$BUILD"
  nice -n 10 cmake -S "$SRC" -B "$BUILD" -G Ninja "${args[@]}" >"$BUILD/configure.log" 2>&1 ||
    { tail -20 "$BUILD/configure.log"; die "cmake configure failed"; }
}

build() {  # targets...
  nice -n 10 cmake --build "$BUILD" -j"$JOBS" --target "$@" >"$BUILD/build.log" 2>&1 ||
    { grep -m5 -B2 -A5 'error' "$BUILD/build.log" || tail -30 "$BUILD/build.log"
      die "build of $* failed (log: $BUILD/build.log)"; }
}

mkdir -p "$CACHE"
fetch_source
if [ ! -f "$PREFIX/.flintkv_built" ]; then
  log "building the library (once; about 10 min on 2 cores)"
  configure ""
  build rocksdb
  rm -rf "$PREFIX"
  nice -n 10 cmake --install "$BUILD" >"$BUILD/install.log" 2>&1 ||
    die "cmake --install failed (log: $BUILD/install.log)"
  {
    echo "rocksdb $VERSION (Debian source package rocksdb_$VERSION.orig.tar.gz)"
    grep -E '^CMAKE_BUILD_TYPE:|^PORTABLE:|^USE_RTTI:' "$BUILD/CMakeCache.txt"
    echo "built $(date -u +%FT%TZ), -j$JOBS"
  } >"$PREFIX/BUILD_INFO"
  touch "$PREFIX/.flintkv_built"
  log "library installed in $PREFIX"
fi
[ "$LIB_ONLY" = 1 ] && exit 0

# The plugin build: same build tree, so only the plugin, build_version.cc and
# the links are redone. The stamp is the FlintKV tree the tools were built
# from (its path and the content of the sources the plugin compiles).
stamp=$( { echo "$ROOT"; cat memtable/rocksdb/plugin/* memtable/*.cc memtable/*.h \
  memtable/rocksdb/*.cc memtable/rocksdb/*.h pmem/*.cc pmem/*.h include/flintkv/*.h; } |
  sha256sum | cut -d' ' -f1)
if [ -f "$TOOLS/.stamp" ] && [ "$(cat "$TOOLS/.stamp")" = "$stamp" ] &&
   [ -x "$TOOLS/bin/db_stress" ]; then
  log "tools with the flintkv plugin are up to date in $TOOLS/bin"
  exit 0
fi
log "building db_bench, ldb and db_stress with ROCKSDB_PLUGINS=flintkv"
configure flintkv
build db_bench ldb db_stress
rm -rf "$TOOLS" && mkdir -p "$TOOLS/bin"
cp "$BUILD/db_bench" "$BUILD/tools/ldb" "$BUILD/db_stress_tool/db_stress" "$TOOLS/bin/"
echo "$stamp" >"$TOOLS/.stamp"
log "tools in $TOOLS/bin"

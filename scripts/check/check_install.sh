#!/usr/bin/env bash
# Installs a FlintKV build into a scratch prefix and builds a user's project
# against it the two ways users do: CMake find_package(flintkv)
# (tests/infra/install_consumer) and pkg-config (flintkv.pc); runs both, and the
# installed flintkv_tool. Checks the installed plugin's soname and that it
# exports only the public API (scripts/check/check_exports.sh). The same
# project also adds the source tree with add_subdirectory (in
# BUILD_DIR/check_install_subdir). Last, the Debian package is built,
# installed, used and removed (scripts/check/check_deb.sh); exit 77 (ctest:
# skipped) when it could not be installed here.
#   scripts/check/check_install.sh BUILD_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$1" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/flintkv_install.XXXXXX")
DATA=$(mktemp -d /dev/shm/flintkv_install_data.XXXXXX)
trap 'rm -rf "$T" "$DATA"' EXIT
cmake --install "$BUILD" --prefix "$T/prefix" >"$T/install.log"
for f in include/flintkv/rocksdb_memtable.h include/flintkv/recovery.h \
         include/flintkv/open_db.h include/flintkv/inspect.h \
         lib/libflintkv.a lib/libflintkv_rocksdb_memtable.a \
         lib/libflintkv_recovery.a lib/cmake/flintkv/flintkvConfig.cmake \
         lib/pkgconfig/flintkv.pc bin/flintkv_tool \
         lib/libflintkv_rocksdb.so lib/libflintkv_rocksdb.so.0; do
  [ -e "$T/prefix/$f" ] || { echo "check_install: FAIL: $f not installed"; exit 1; }
done
echo "== the installed plugin: soname, exported symbols"
readelf -d "$T/prefix/lib/libflintkv_rocksdb.so" |
  grep -q 'SONAME.*\[libflintkv_rocksdb\.so\.0\]' ||
  { echo "check_install: FAIL: libflintkv_rocksdb.so has no soname .so.0"; exit 1; }
"$ROOT/scripts/check/check_exports.sh" "$T/prefix/lib/libflintkv_rocksdb.so"
# The generated version header is installed and says the package's version.
want=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' \
  "$T/prefix/lib/cmake/flintkv/flintkvConfigVersion.cmake")
grep -q "^#define FLINTKV_VERSION_STRING \"$want\"\$" \
  "$T/prefix/include/flintkv/version.h" ||
  { echo "check_install: FAIL: version.h does not say $want"; exit 1; }
echo "== find_package(flintkv)"
cmake -S "$ROOT/tests/infra/install_consumer" -B "$T/cmake-build" \
  -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/configure.log" ||
  { cat "$T/configure.log"; exit 1; }
cmake --build "$T/cmake-build" >"$T/build.log" 2>&1 || { cat "$T/build.log"; exit 1; }
"$T/cmake-build/consumer" "$DATA/cmake"
echo "== pkg-config flintkv"
# shellcheck disable=SC2046
PKG_CONFIG_PATH="$T/prefix/lib/pkgconfig" \
  c++ -std=c++17 "$ROOT/tests/infra/install_consumer/consumer.cc" -o "$T/pc-consumer" \
  $(PKG_CONFIG_PATH="$T/prefix/lib/pkgconfig" pkg-config --cflags --libs flintkv)
"$T/pc-consumer" "$DATA/pc"
echo "== add_subdirectory(FlintKV), the parent's own Release flags"
# In the build directory (incremental, ccache paths under the tree), only
# what the consumer links.
SUB=$BUILD/check_install_subdir
LAUNCHER=$(sed -n 's/^CMAKE_CXX_COMPILER_LAUNCHER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
cmake -S "$ROOT/tests/infra/install_consumer" -B "$SUB" -DFLINTKV_SOURCE_DIR="$ROOT" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  ${LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER="$LAUNCHER"} >"$T/sub-configure.log" ||
  { cat "$T/sub-configure.log"; exit 1; }
cmake --build "$SUB" --target consumer -j"${JOBS:-2}" >"$T/sub-build.log" 2>&1 ||
  { cat "$T/sub-build.log"; exit 1; }
"$SUB/consumer" "$DATA/subdir"
echo "== installed flintkv_tool"
"$T/prefix/bin/flintkv_tool" --help >/dev/null
echo "== the Debian package: apt-get install, use, remove"
rc=0
"$ROOT/scripts/check/check_deb.sh" "$BUILD" || rc=$?
if [ "$rc" = 77 ]; then
  echo "check_install: ok, but the package's install was skipped"
  exit 77
fi
[ "$rc" = 0 ] || exit "$rc"
echo "check_install: ok"

#!/usr/bin/env bash
# Builds the Debian package of a FlintKV build (cpack -G DEB), checks its
# Depends and contents, installs it with apt-get, builds and runs the
# consumer project (tests/infra/install_consumer) against the installed
# package, loads the installed plugin into stock db_bench, and removes the
# package again (also on failure). Run by scripts/check/check_install.sh.
# Installing needs root (or sudo without a password); without it, or when
# a flintkv package is already installed, only the package is checked and
# the script exits 77 (ctest: skipped), never 0.
#   scripts/check/check_deb.sh BUILD_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/flintkv_deb.XXXXXX")
DATA=$(mktemp -d /dev/shm/flintkv_deb_data.XXXXXX)
INSTALLED=0
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n)
export DEBIAN_FRONTEND=noninteractive
# --purge: dpkg forgets the package (its ldconfig scripts) as well.
remove() {
  "${SUDO[@]}" apt-get remove --purge -y -o DPkg::Lock::Timeout=120 flintkv \
    >"$T/remove.log" 2>&1
}
cleanup() {
  if [ "$INSTALLED" = 1 ]; then
    remove || { cat "$T/remove.log"; echo "check_deb: FAIL: apt-get remove"; }
  fi
  rm -rf "$T" "$DATA"
}
trap cleanup EXIT
fail() { echo "check_deb: FAIL: $*"; exit 1; }

# The package (cpack installs the build tree; it is built already).
cpack --config "$BUILD/CPackConfig.cmake" -B "$T/pkg" >"$T/cpack.log" 2>&1 ||
  { cat "$T/cpack.log"; fail "cpack"; }
DEB=$(echo "$T"/pkg/flintkv_*.deb)
[ -f "$DEB" ] || fail "no flintkv_*.deb in $T/pkg"
depends=$(dpkg-deb -f "$DEB" Depends)
echo "check_deb: $(basename "$DEB"): Depends: $depends"
for d in librocksdb-dev libpmemobj-dev pkg-config 'libpmemobj1 ' 'libpmem1 ' \
         'librocksdb[0-9.]+ ' 'libstdc\+\+6 '; do
  grep -Eq "(^|, )$d" <<<"$depends" || fail "Depends lacks $d"
done
contents=$(dpkg -c "$DEB")
for f in usr/lib/libflintkv_rocksdb.so.0 usr/lib/cmake/flintkv/flintkvConfig.cmake \
         usr/lib/cmake/flintkv/flintkvTargets.cmake usr/lib/pkgconfig/flintkv.pc \
         usr/include/flintkv/version.h usr/include/flintkv/export.h \
         usr/lib/libflintkv_recovery.a usr/bin/flintkv_tool; do
  grep -q " \./$f\( \|$\)" <<<"$contents" || fail "$f not in the package"
done

if [ ${#SUDO[@]} -gt 0 ] && ! sudo -n true 2>/dev/null; then
  echo "check_deb: package ok; SKIPPED the install (needs root or sudo -n)"
  exit 77
fi
# One run at a time on a machine: another one's remove would pull the
# package from under this one.
exec 9>"${TMPDIR:-/tmp}/flintkv_check_deb.lock"
flock -w 600 9 || fail "another check_deb.sh holds the lock"
if dpkg-query -W flintkv >/dev/null 2>&1; then
  echo "check_deb: package ok; SKIPPED the install (dpkg knows a flintkv package here)"
  exit 77
fi
INSTALLED=1
"${SUDO[@]}" apt-get install -y -o DPkg::Lock::Timeout=120 "$DEB" \
  >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "apt-get install"; }
echo "== the installed package: find_package(flintkv)"
cmake -S "$ROOT/tests/infra/install_consumer" -B "$T/build" >"$T/configure.log" ||
  { cat "$T/configure.log"; fail "configure against the package"; }
grep -q '^flintkv_DIR:PATH=/usr/lib/cmake/flintkv$' "$T/build/CMakeCache.txt" ||
  fail "the consumer did not find the package's flintkvConfig.cmake"
cmake --build "$T/build" >"$T/build.log" 2>&1 || { cat "$T/build.log"; fail "build"; }
"$T/build/consumer" "$DATA/consumer"
/usr/bin/flintkv_tool --help >/dev/null
echo "== the installed plugin in stock db_bench"
"$ROOT/scripts/check/check_db_bench.sh" --quick --lib /usr/lib/libflintkv_rocksdb.so \
  --benchmarks fillseq,readrandom --dir "$DATA/db_bench" | tail -n 1
remove || { cat "$T/remove.log"; fail "apt-get remove"; }
INSTALLED=0
if dpkg-query -W flintkv >/dev/null 2>&1 || [ -e /usr/lib/libflintkv_rocksdb.so.0 ]; then
  fail "flintkv is still installed after apt-get remove"
fi
echo "check_deb: ok (installed, used and removed $(basename "$DEB"))"

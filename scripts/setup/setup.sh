#!/usr/bin/env bash
# Installs everything FlintKV needs on a fresh Debian 12 machine (idempotent).
set -euo pipefail
PKGS=(build-essential cmake pkg-config git python3
      librocksdb-dev rocksdb-tools
      libpmem-dev libpmemobj-dev pmdk-tools
      libgflags-dev libgtest-dev libjemalloc-dev libbenchmark-dev
      clang-format valgrind ccache ninja-build
      libsnappy-dev liblz4-dev libzstd-dev zlib1g-dev libbz2-dev  # RocksDB 9 from source
      python3-matplotlib)  # plots of scripts/paper/paper_figures.py
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Versions the project is written against (warn, do not fail, on others).
dpkg-query -W -f='${Version}\n' librocksdb-dev | grep -q '^7\.8\.3' \
  || echo "setup: warning: librocksdb-dev is not 7.8.3" >&2
dpkg-query -W -f='${Version}\n' libpmemobj-dev | grep -q '^1\.12' \
  || echo "setup: warning: libpmemobj-dev is not 1.12" >&2
echo "setup: dependencies installed"

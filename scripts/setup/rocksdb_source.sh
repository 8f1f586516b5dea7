# Sourced (not run) by the scripts that need RocksDB 7.8.3's sources:
# rocksdb_peer_tests.sh and build_release_rocksdb.sh.
#
#   rocksdb_source_dsc CACHE   prints the path of Debian's rocksdb 7.8.3
#                              .dsc in CACHE, fetching it first if absent
#   rocksdb_source_extract CACHE DIR   a fresh tree of that .dsc in DIR
#
# Sources come only from Debian's package registry: `apt-get source rocksdb`
# (adds a deb-src entry mirroring the configured Debian mirror if needed).
# The cache directory can be deleted at any time; it is refetched.

rocksdb_source_dsc() {
  local cache=$1 dsc
  mkdir -p "$cache"
  dsc=$(ls "$cache"/rocksdb_7.8.3-*.dsc 2>/dev/null | head -1 || true)
  if [ -z "$dsc" ]; then
    echo "fetching Debian's rocksdb 7.8.3 source package into $cache" >&2
    command -v dpkg-source >/dev/null || apt-get install -y -qq dpkg-dev >/dev/null
    if ! apt-cache showsrc rocksdb 2>/dev/null | grep -q '^Version: 7\.8\.3'; then
      # Mirror the configured Debian binary sources as deb-src.
      if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
          >/etc/apt/sources.list.d/flintkv-deb-src.sources
      else
        grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | sed 's/^deb /deb-src /' \
          >/etc/apt/sources.list.d/flintkv-deb-src.list
      fi
      apt-get update -qq >/dev/null
    fi
    (cd "$cache" && { apt-get source -qq --download-only rocksdb=7.8.3-2 >/dev/null 2>&1 ||
       apt-get source -qq --download-only rocksdb >/dev/null 2>&1; }) ||
      { echo "apt-get source rocksdb failed" >&2; return 1; }
    dsc=$(ls "$cache"/rocksdb_7.8.3-*.dsc 2>/dev/null | head -1 || true)
    [ -n "$dsc" ] || { echo "Debian's source package is not rocksdb 7.8.3" >&2; return 1; }
  fi
  echo "$dsc"
}

rocksdb_source_extract() {  # cache dir
  local dsc
  dsc=$(rocksdb_source_dsc "$1") || return 1
  rm -rf "$2"
  (cd "$(dirname "$2")" && dpkg-source -x "$dsc" "$(basename "$2")" >/dev/null)
}

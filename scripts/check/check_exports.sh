#!/usr/bin/env bash
# Fails unless libflintkv_rocksdb.so exports exactly FlintKV's public API
# (what include/flintkv/ marks FLINTKV_EXPORT and its objects define), the
# registrar flintkv_register, and the C++ library's template instances
# (libstdc++ declares namespace std with default visibility; they name no
# FlintKV type). Anything else is an internal that leaked past the hidden
# visibility of CMakeLists.txt. Run by scripts/check/check_install.sh on
# the installed library.
#   scripts/check/check_exports.sh path/to/libflintkv_rocksdb.so
set -euo pipefail
LIB=${1:?usage: $0 path/to/libflintkv_rocksdb.so}
syms=$(nm -D --defined-only "$LIB" | awk '{print $3}')
[ -n "$syms" ] || { echo "check_exports: FAIL: $LIB exports nothing"; exit 1; }
# The public API, demangled: free functions and the exported classes'
# members, vtables and typeinfo.
API='flintkv::(NewMemTableRepFactory|RegisterFlintKV|RecoverInto|BeginRecovery|EndRecovery|RecoverDB|OpenDB|DiscardLeftovers|InspectPool)\('
CLASSES='(Status|Store|WriteBatch|Snapshot|Iterator|RecoveryReport)'
API="^($API|flintkv::$CLASSES::|(vtable|typeinfo|typeinfo name) for flintkv::$CLASSES\$)"
bad=0
while read -r sym; do
  case "$sym" in  # the registrar; section markers some linkers export
    flintkv_register|_init|_fini|_edata|_end|__bss_start) continue ;;
  esac
  if [[ "$sym" =~ ^_Z(T[ISV]|GVZ?|ZNK?|NK?)?St ]] && [[ "$sym" != *7flintkv* ]]; then
    continue
  fi
  name=$(c++filt "$sym")
  [[ "$name" =~ $API ]] && continue
  echo "check_exports: not public API: $name"
  bad=1
done <<<"$syms"
for want in flintkv_register _ZN7flintkv21NewMemTableRepFactory \
            _ZN7flintkv15RegisterFlintKV; do
  grep -q "^$want" <<<"$syms" ||
    { echo "check_exports: FAIL: $want is not exported"; bad=1; }
done
[ "$bad" = 0 ] || { echo "check_exports: FAIL: $LIB"; exit 1; }
echo "check_exports: $(wc -l <<<"$syms") symbols, FlintKV's public API only"

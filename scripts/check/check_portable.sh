#!/usr/bin/env bash
# Checks that a default (portable, FLINTKV_NATIVE=OFF) build imposes no CPU
# beyond baseline x86-64 on its users (ctest: portable_isa_check).
#
#   scripts/check/check_portable.sh BUILD_DIR
#     1. objdump -d of the libraries, the RocksDB plugin and the tools built in
#        BUILD_DIR: no instruction of a later ISA (AVX/AVX2/AVX-512 = any VEX or
#        EVEX instruction or ymm/zmm/mask register; SSSE3/SSE4.x; BMI1/2,
#        LZCNT, POPCNT, MOVBE, CRC32, AES, PCLMUL, SHA; CLWB, CLFLUSHOPT:
#        libpmem picks those at run time). Functions that are runtime-
#        dispatched clones (GCC target_clones / target multiversioning, symbol
#        suffix .avx2, .arch_x86_64_v3, ...) are skipped; there are none today.
#     2. cmake --install into a scratch prefix: the exported CMake targets
#        carry no compile options (no -m flags reach a host).
#   scripts/check/check_portable.sh --expect-violation FILE...
#     self-test: succeeds only if step 1 finds a violation in FILE (an object
#     compiled with -mavx2), so the check is known to be able to fail.
set -euo pipefail

# Prints "file: function: instruction" for every non-baseline instruction.
scan() {
  objdump -d --no-show-raw-insn "$@" | awk '
    BEGIN {
      n = split("lzcnt popcnt andn bextr blsi blsmsk blsr bzhi pdep pext " \
                "rorx sarx shlx shrx mulx adcx adox movbe crc32 " \
                "pshufb palignr pabsb pabsw pabsd phaddw phaddd phaddsw " \
                "phsubw phsubd phsubsw pmaddubsw pmulhrsw psignb psignw " \
                "psignd pblendvb blendvpd blendvps blendpd blendps pblendw " \
                "dppd dpps insertps extractps pextrb pextrd pextrq pinsrb " \
                "pinsrd pinsrq pminsb pmaxsb pminuw pmaxuw pminud pmaxud " \
                "pminsd pmaxsd pmulld pmuldq ptest pcmpeqq pcmpgtq packusdw " \
                "pmovsxbw pmovsxbd pmovsxbq pmovsxwd pmovsxwq pmovsxdq " \
                "pmovzxbw pmovzxbd pmovzxbq pmovzxwd pmovzxwq pmovzxdq " \
                "roundps roundpd roundss roundsd mpsadbw phminposuw movntdqa " \
                "pcmpestri pcmpestrm pcmpistri pcmpistrm aesenc aesenclast " \
                "aesdec aesdeclast aesimc aeskeygenassist pclmulqdq " \
                "sha1rnds4 sha1nexte sha1msg1 sha1msg2 sha256rnds2 " \
                "sha256msg1 sha256msg2 clwb clflushopt prefetchw xgetbv", l)
      for (i = 1; i <= n; i++) bad[l[i]] = 1
      prefix["lock"] = prefix["rep"] = prefix["repz"] = prefix["repnz"] = 1
      prefix["notrack"] = prefix["bnd"] = prefix["data16"] = prefix["cs"] = 1
      prefix["ds"] = prefix["xacquire"] = prefix["xrelease"] = 1
    }
    /^In archive/ { next }
    /file format/ { file = $1; sub(/:$/, "", file); next }
    /^[0-9a-f]+ <.*>:$/ {
      fn = $2; sub(/^</, "", fn); sub(/>:$/, "", fn)
      dispatched = (fn ~ /\.(avx|arch_|sse4|ssse3|bmi|popcnt|fma|lzcnt|movbe)/)
      next
    }
    dispatched { next }
    /^ *[0-9a-f]+:\t/ {
      split($0, parts, "\t"); insn = parts[2]
      k = split(insn, w, " ")
      m = w[1]; if ((m in prefix) && k > 1) m = w[2]
      if ((m ~ /^v/ && m != "verr" && m != "verw") || (m in bad) ||
          insn ~ /%[yz]mm[0-9]|%k[0-7]/)
        print file ": " fn ": " insn
    }'
}

if [ "${1:-}" = "--expect-violation" ]; then
  shift
  found=$(scan "$@" | head -3)
  [ -n "$found" ] || { echo "check_portable: FAIL: no violation found in $*" >&2; exit 1; }
  echo "check_portable: self-test OK, the scan rejects $*:"
  echo "$found"
  exit 0
fi

BUILD=$(cd "${1:?usage: check_portable.sh BUILD_DIR}" && pwd)
grep -q '^FLINTKV_NATIVE:BOOL=ON' "$BUILD/CMakeCache.txt" &&
  { echo "check_portable: $BUILD is a FLINTKV_NATIVE=ON build" >&2; exit 1; }
files=()
for f in libflintkv.a libflintkv_pmem.a memtable/rocksdb/libflintkv_rocksdb.so \
         recovery/libflintkv_recovery.a tools/flintkv_tool \
         tools/flintkv_bench; do
  [ -f "$BUILD/$f" ] && files+=("$BUILD/$f")
done
[ "${#files[@]}" -ge 2 ] || { echo "check_portable: nothing built in $BUILD" >&2; exit 1; }
bad=$(scan "${files[@]}")
if [ -n "$bad" ]; then
  echo "check_portable: FAIL: non-baseline x86-64 instructions outside runtime dispatch:" >&2
  echo "$bad" | head -20 >&2
  echo "($(echo "$bad" | wc -l) in all)" >&2
  exit 1
fi
echo "check_portable: baseline x86-64 only in: ${files[*]#$BUILD/}"

prefix=$(mktemp -d /tmp/flintkv_portable_install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$BUILD" --prefix "$prefix" >/dev/null
exports=$(find "$prefix" -name '*.cmake' -o -name '*.pc')
[ -n "$exports" ] || { echo "check_portable: FAIL: install exported nothing" >&2; exit 1; }
if grep -nE 'INTERFACE_COMPILE_OPTIONS|-march|-mtune|-m(avx|sse|bmi|clwb)' $exports; then
  echo "check_portable: FAIL: the exported targets impose compile options (above)" >&2
  exit 1
fi
echo "check_portable: exported targets carry no compile options:" $(echo "$exports" | sed "s|$prefix/||")

// Compiled with -mavx2 only for portable_isa_check_selftest: a loop the
// compiler vectorises with AVX2, so scripts/check/check_portable.sh must reject
// it.
void IsaProbeAddArrays(int* a, const int* b, int n) {
  for (int i = 0; i < n; i++) a[i] += b[i];
}

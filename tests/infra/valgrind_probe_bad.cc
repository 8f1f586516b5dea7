// A program with one heap read past the end of an allocation, and exit code
// 0: the valgrind stage's negative control (valgrind_check_selftest) must
// see memcheck fail it, or the stage could not catch anything.
#include <cstdio>
#include <cstdlib>

int main() {
  volatile char* p = static_cast<volatile char*>(std::malloc(16));
  for (int i = 0; i < 16; i++) p[i] = static_cast<char>(i);
  int past_end = p[16];
  std::printf("%d\n", past_end & 1);
  std::free(const_cast<char*>(p));
  return 0;
}

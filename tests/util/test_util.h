// Shared helpers for the standalone engine's tests: unique temporary pool
// paths (removed on destruction), quiet default options, test-mode switches
// and printable forms of binary keys.
//
// Pools live in $FLINTKV_TEST_DIR (ctest sets /dev/shm), else /dev/shm.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "flintkv/options.h"

#if defined(__SANITIZE_THREAD__)
#define FLINTKV_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FLINTKV_TEST_TSAN 1
#endif
#endif
#ifndef FLINTKV_TEST_TSAN
#define FLINTKV_TEST_TSAN 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define FLINTKV_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FLINTKV_TEST_ASAN 1
#endif
#endif
#ifndef FLINTKV_TEST_ASAN
#define FLINTKV_TEST_ASAN 0
#endif

namespace flintkv {
namespace test {

inline std::string TestDir() {
  const char* d = std::getenv("FLINTKV_TEST_DIR");
  return (d && *d) ? d : "/dev/shm";
}

// A test binary re-executed as a child process (crash scenarios) runs its
// child code from main(), as a gtest global environment's SetUp, never from
// a static initialiser: with a statically linked librocksdb, RocksDB's own
// statics may not be initialised yet then (DB::Open crashed in
// ImmutableDBOptions::Dump against RocksDB 9.10's librocksdb.a).
// `child` must not return. Usage, at namespace scope:
//   const int kChild = test::RunInMainIf("FLINTKV_X_CHILD", [] { ... });
class ChildEnvironment : public ::testing::Environment {
 public:
  explicit ChildEnvironment(std::function<void()> child)
      : child_(std::move(child)) {}
  void SetUp() override {
    child_();
    std::abort();  // a child that returns is a test bug
  }

 private:
  std::function<void()> child_;
};
inline int RunInMainIf(const char* env_var, std::function<void()> child) {
  if (std::getenv(env_var) != nullptr) {
    ::testing::AddGlobalTestEnvironment(new ChildEnvironment(std::move(child)));
  }
  return 0;
}

// FLINTKV_LONG_TESTS=1 turns on the long variants.
inline bool LongMode() {
  const char* v = std::getenv("FLINTKV_LONG_TESTS");
  return v && std::strcmp(v, "0") != 0 && *v;
}

inline bool SanitizerBuild() { return FLINTKV_TEST_TSAN || FLINTKV_TEST_ASAN; }

// Scales an iteration count down for sanitizer builds (several times slower).
inline int Scaled(int n, int tsan_divisor = 4, int asan_divisor = 2) {
  if (FLINTKV_TEST_TSAN) return n / tsan_divisor > 0 ? n / tsan_divisor : 1;
  if (FLINTKV_TEST_ASAN) return n / asan_divisor > 0 ? n / asan_divisor : 1;
  return n;
}

// A unique pool path for the running test. The file (if any) is removed
// when the object is destroyed, and before first use.
class TempPool {
 public:
  explicit TempPool(const std::string& tag = "") {
    static std::atomic<int> counter{0};
    const ::testing::TestInfo* info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        info ? std::string(info->test_suite_name()) + "." + info->name()
             : "notest";
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = TestDir() + "/flintkv_test_" + name + (tag.empty() ? "" : "_") +
            tag + "_" + std::to_string(getpid()) + "_" +
            std::to_string(counter.fetch_add(1));
    unlink(path_.c_str());
  }
  ~TempPool() { unlink(path_.c_str()); }
  TempPool(const TempPool&) = delete;
  TempPool& operator=(const TempPool&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A fresh directory under the test dir, removed (with its contents) on
// destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = TestDir() + "/flintkv_dir_" + tag + "_" + std::to_string(getpid()) +
            "_" + std::to_string(counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Starts n threads that each run fn(i), and keeps all of them alive until
// every one has finished fn: the threads are live at the same time.
template <class Fn>
void RunLiveThreads(int n, Fn fn) {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; i++) {
    threads.emplace_back([&, i] {
      fn(i);
      std::unique_lock<std::mutex> l(mu);
      if (++done == n) cv.notify_all();
      cv.wait(l, [&] { return done == n; });
    });
  }
  for (auto& t : threads) t.join();
}

// Pool options for tests: small pool, notices swallowed (tests that check
// the notice install their own info_log).
inline PoolOptions QuietPoolOptions(const std::string& path,
                                    uint64_t size = 64ull << 20,
                                    uint64_t chunk_size = 256ull << 10) {
  PoolOptions o;
  o.path = path;
  o.size = size;
  o.chunk_size = chunk_size;
  o.info_log = [](const std::string&) {};
  return o;
}

inline StoreOptions QuietStoreOptions(const std::string& path,
                                      uint64_t size = 64ull << 20,
                                      uint64_t chunk_size = 256ull << 10) {
  StoreOptions o;
  o.pool = QuietPoolOptions(path, size, chunk_size);
  return o;
}

// Printable form of a binary string for failure messages.
inline std::string Printable(std::string_view s, size_t max_len = 80) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_len; i++) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > max_len) {
    out += "...(" + std::to_string(s.size()) + " bytes)";
  }
  return out;
}

// Reads a whole file ("" if it cannot be read).
// For a test whose failure is a thread blocked forever (nothing left to
// join or free under it): returns once `done` is set, or, if it is still
// unset after `limit`, reports "FAILED: <what>" and exits the process.
inline void ExitUnlessDoneWithin(const std::atomic<bool>& done,
                                 std::chrono::milliseconds limit,
                                 const char* what) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done.load() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!done.load()) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    std::fflush(stdout);
    std::_Exit(1);
  }
}

// ExitUnlessDoneWithin on a thread of its own, for a test whose own thread
// is the one that may block forever: Done() (or the destructor) ends it.
class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds limit, const char* what)
      : thread_([this, limit, what] {
          ExitUnlessDoneWithin(done_, limit, what);
        }) {}
  ~Watchdog() { Done(); }
  void Done() {
    done_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> done_{false};  // before thread_, which reads it
  std::thread thread_;
};

inline std::string ReadFile(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// Runs the shell command `cmd` with its stdout and stderr in file `out`,
// prints what it wrote, and returns its exit status (-1: it did not exit).
inline int RunCommand(const std::string& cmd, const std::string& out) {
  int rc = std::system((cmd + " >" + out + " 2>&1").c_str());
  std::fputs(ReadFile(out).c_str(), stdout);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Writes `data` to `path` (truncating). Returns false on failure.
inline bool WriteFile(const std::string& path, std::string_view data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  return std::fclose(f) == 0 && ok;
}

// n random bytes; printable: lowercase letters only.
inline std::string RandomBytes(std::mt19937_64* rng, size_t n, bool printable) {
  std::string s(n, '\0');
  for (char& c : s) {
    c = printable ? static_cast<char>('a' + (*rng)() % 26)
                  : static_cast<char>((*rng)() & 0xff);
  }
  return s;
}

// Orders test threads deterministically: threads wait until the step
// counter reaches a value another thread sets.
class Steps {
 public:
  void WaitFor(int s) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return step_ >= s; });
  }
  void Set(int s) {
    std::lock_guard<std::mutex> l(mu_);
    step_ = s;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int step_ = 0;
};

}  // namespace test
}  // namespace flintkv

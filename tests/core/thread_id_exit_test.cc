// A thread that still holds a writer-thread id when the process's static
// destructors run returns its id afterwards. RocksDB does this: it joins its
// background threads from its own static destructors, after FlintKV's.
// The free-id list must still exist then; it was a destroyed std::vector,
// and the id's push_back wrote into freed memory (heap corruption at exit,
// "corrupted size vs. prev_size", seen in RocksDB's transaction_test).
// Under ASAN (the test command's second stage) the old code fails with
// heap-use-after-free; the program exits 0 otherwise.
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "memtable/thread_id.h"

using flintkv::memtable::ThreadId;

namespace {

// Joins the worker from a static destructor, as RocksDB's Env does.
struct LateJoiner {
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::thread worker;
  ~LateJoiner() {
    {
      std::lock_guard<std::mutex> g(mu);
      go = true;
    }
    cv.notify_all();
    worker.join();  // the worker's id goes back to the free list now
  }
};

}  // namespace

int main() {
  // Constructed before FlintKV's free-id list, so destroyed after it.
  static LateJoiner joiner;
  // A first thread takes an id and returns it: the list now owns heap
  // storage.
  std::thread([] { std::printf("first id %d\n", ThreadId::Get()); }).join();
  std::mutex started_mu;
  std::condition_variable started_cv;
  bool started = false;
  joiner.worker = std::thread([&] {
    int id = ThreadId::Get();
    {
      std::lock_guard<std::mutex> g(started_mu);
      started = true;
    }
    started_cv.notify_all();
    std::unique_lock<std::mutex> l(joiner.mu);
    joiner.cv.wait(l, [] { return joiner.go; });
    std::printf("worker exits with id %d\n", id);
  });
  std::unique_lock<std::mutex> l(started_mu);
  started_cv.wait(l, [&] { return started; });
  return 0;
}

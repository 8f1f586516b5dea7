// Writer-thread slots: any number of concurrently live writer
// threads, and thread_local destructors that write after their thread's id
// was returned, never share a slot or wait for an id.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/list_fixture.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

using memtable::ThreadId;
using test::ListFixture;

std::string Key(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "key%06d", i);
  return buf;
}

Status Put(ListFixture* f, int i) {
  return f->list->Insert(f->Node(Key(i), ""));
}

// Before: the 513th live thread got Busy (and FlintRep retried forever).
TEST(ThreadSlotsConcurrencyTest, MoreLiveThreadsThanIds) {
  ListFixture f;
  const int kThreads = ThreadId::kMaxThreads + 88;
  test::RunLiveThreads(kThreads, [&](int t) {
    Status s = Put(&f, t);
    EXPECT_TRUE(s.ok()) << "thread " << t << ": " << s.ToString();
  });
  EXPECT_EQ(static_cast<size_t>(kThreads), f.Count());
  EXPECT_EQ(static_cast<size_t>(kThreads), f.list->NumEntries());
}

// A thread_local constructed before the thread's first write is destroyed
// after its id was returned; if it writes then (RocksDB's do), it must not
// use the id a new thread has meanwhile taken.
struct LateWriter {
  ListFixture* f = nullptr;
  int* id_seen = nullptr;
  std::mutex* mu = nullptr;
  std::condition_variable* cv = nullptr;
  bool* other_done = nullptr;
  int* other_id = nullptr;
  ~LateWriter() {
    if (!f) return;
    *id_seen = ThreadId::Get();
    // Let a new thread take an id while this one is still writing.
    std::thread other([this] {
      *other_id = ThreadId::Get();
      EXPECT_TRUE(Put(f, 1).ok());
    });
    EXPECT_TRUE(Put(f, 2).ok());
    other.join();
    std::lock_guard<std::mutex> l(*mu);
    *other_done = true;
    cv->notify_all();
  }
};
thread_local LateWriter late_writer;

TEST(ThreadSlotsConcurrencyTest, ThreadLocalDestructorAfterIdReturned) {
  ListFixture f;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int id_in_dtor = -100, other_id = -100, id_alive = -100;
  std::thread t([&] {
    late_writer.f = &f;  // constructed before this thread's id
    late_writer.id_seen = &id_in_dtor;
    late_writer.mu = &mu;
    late_writer.cv = &cv;
    late_writer.other_done = &done;
    late_writer.other_id = &other_id;
    EXPECT_TRUE(Put(&f, 0).ok());
    id_alive = ThreadId::Get();
  });
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return done; });
  }
  t.join();
  EXPECT_GE(id_alive, 0);
  EXPECT_GE(other_id, 0);
  // The exiting thread no longer owns an id (it takes the overflow path).
  EXPECT_EQ(-1, id_in_dtor);
  EXPECT_EQ(3u, f.Count());
}

}  // namespace
}  // namespace flintkv

// Durability modes of the standalone store: weak writes
// (WriteOptions::sync = false), Store::Persist(), the background persistence
// bound, and group commit, through the public API.
//
// A SIGKILL leaves every store in the page cache, so it cannot show a lost
// write-back (the crash simulator does, tests/crash/crash_sim_test.cc); what it
// does show is the recovery rule of weak durability: a pool killed with
// weak writes not yet persisted comes back without them (the durable cut,
// P17), as a prefix, and with everything a Persist(), a later sync write or
// the background bound covered. Each kill test forks a child that writes
// and then kills itself; the parent reopens the pool.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/store.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

StoreOptions Options(const std::string& path, bool group, uint32_t interval) {
  StoreOptions o;
  o.pool.path = path;
  o.pool.size = 64 << 20;
  o.pool.chunk_size = 256 << 10;
  o.pool.info_log = [](const std::string&) {};
  o.durability.group_commit = group;
  o.durability.persist_interval_us = interval;
  return o;
}

WriteOptions Weak() {
  WriteOptions w;
  w.sync = false;
  return w;
}

std::string K(const char* p, int i) { return p + std::to_string(i); }

// Runs body(store) in a forked child that then SIGKILLs itself, reopens the
// pool in the parent and returns it.
std::unique_ptr<Store> KillAndReopen(const StoreOptions& o,
                                     const std::function<void(Store*)>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    std::unique_ptr<Store> s;
    if (!Store::Open(o, &s).ok()) _exit(3);
    body(s.get());
    raise(SIGKILL);
    _exit(4);
  }
  EXPECT_GT(pid, 0);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child failed, status " << status;
  std::unique_ptr<Store> s;
  Status st = Store::Open(o, &s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return s;
}

bool Has(Store* s, const std::string& k, const std::string& v) {
  std::string got;
  return s->Get(k, &got).ok() && got == v;
}

bool Absent(Store* s, const std::string& k) {
  std::string got;
  return s->Get(k, &got).IsNotFound();
}

class StoreDurabilityTest : public ::testing::TestWithParam<bool> {};

TEST_P(StoreDurabilityTest, WeakWriteIsVisibleAtOnceAndPersistClearsIt) {
  test::TempPool pool;
  std::unique_ptr<Store> s;
  ASSERT_TRUE(Store::Open(Options(pool.path(), GetParam(), 0), &s).ok());
  ASSERT_TRUE(s->Put(Weak(), "a", "1").ok());
  std::string v;
  ASSERT_TRUE(s->Get("a", &v).ok());
  EXPECT_EQ(v, "1");
  EXPECT_TRUE(s->GetStats().weak_writes_pending);
  ASSERT_TRUE(s->Persist().ok());
  EXPECT_FALSE(s->GetStats().weak_writes_pending);
  ASSERT_TRUE(s->Persist().ok());  // nothing pending: a no-op
  ASSERT_TRUE(s->Close().ok());
  EXPECT_FALSE(s->Persist().ok());  // closed
}

TEST_P(StoreDurabilityTest, KillWithoutPersistDropsTheWeakSuffixWhole) {
  test::TempPool pool;
  StoreOptions o = Options(pool.path(), GetParam(), 0);
  auto s = KillAndReopen(o, [](Store* st) {
    for (int i = 0; i < 10; i++) st->Put(K("s", i), "v");
    for (int i = 0; i < 10; i++) st->Put(Weak(), K("w", i), "v");
    WriteBatch b;
    for (int i = 0; i < 5; i++) b.Put(K("b", i), "v");
    st->Write(Weak(), b);
    st->Delete(Weak(), "s0");
  });
  ASSERT_TRUE(s);
  for (int i = 0; i < 10; i++) EXPECT_TRUE(Has(s.get(), K("s", i), "v")) << i;
  for (int i = 0; i < 10; i++) EXPECT_TRUE(Absent(s.get(), K("w", i))) << i;
  for (int i = 0; i < 5; i++) EXPECT_TRUE(Absent(s.get(), K("b", i))) << i;
  EXPECT_EQ(s->GetStats().dropped_unpersisted, 10u + 5u + 1u);
  // The store goes on with fresh versions after the dropped ones.
  ASSERT_TRUE(s->Put("after", "x").ok());
  EXPECT_TRUE(Has(s.get(), "after", "x"));
}

TEST_P(StoreDurabilityTest, PersistAndSyncWritesCoverEarlierWeakWrites) {
  test::TempPool pool;
  StoreOptions o = Options(pool.path(), GetParam(), 0);
  auto s = KillAndReopen(o, [](Store* st) {
    for (int i = 0; i < 10; i++) st->Put(Weak(), K("p", i), "v");
    st->Persist();  // p* durable
    for (int i = 0; i < 10; i++) st->Put(Weak(), K("q", i), "v");
    st->Put("sync", "v");  // q* durable with it (prefix)
    for (int i = 0; i < 10; i++) st->Put(Weak(), K("r", i), "v");
  });
  ASSERT_TRUE(s);
  for (int i = 0; i < 10; i++) {
    EXPECT_TRUE(Has(s.get(), K("p", i), "v")) << i;
    EXPECT_TRUE(Has(s.get(), K("q", i), "v")) << i;
    EXPECT_TRUE(Absent(s.get(), K("r", i))) << i;
  }
  EXPECT_TRUE(Has(s.get(), "sync", "v"));
}

TEST_P(StoreDurabilityTest, BackgroundBoundPersistsWithoutABarrier) {
  test::TempPool pool;
  StoreOptions o = Options(pool.path(), GetParam(), 2000);
  auto s = KillAndReopen(o, [](Store* st) {
    for (int i = 0; i < 10; i++) st->Put(Weak(), K("w", i), "v");
    // The bound is a few ms; allow a loaded machine 20 s before giving up
    // (the parent then sees the writes missing and fails).
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (st->GetStats().weak_writes_pending &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  ASSERT_TRUE(s);
  for (int i = 0; i < 10; i++) EXPECT_TRUE(Has(s.get(), K("w", i), "v")) << i;
  EXPECT_EQ(s->GetStats().dropped_unpersisted, 0u);
}

// Threads mixing weak and sync writes, batches and Persist() calls, with the
// background thread running; Close() persists the rest. Everything written
// is there after reopening. Run under TSAN (label concurrency).
TEST_P(StoreDurabilityTest, ConcurrentWeakStrongAndPersist) {
  test::TempPool pool;
  StoreOptions o = Options(pool.path(), GetParam(), 200);
  const int kThreads = 4;
  const int kOps = test::Scaled(2000, 8, 2);
  {
    std::unique_ptr<Store> s;
    ASSERT_TRUE(Store::Open(o, &s).ok());
    std::vector<std::thread> th;
    std::atomic<int> errors{0};
    for (int t = 0; t < kThreads; t++) {
      th.emplace_back([&, t] {
        for (int i = 0; i < kOps; i++) {
          std::string k = "t" + std::to_string(t) + "." + std::to_string(i);
          WriteOptions w;
          w.sync = (i % 5) == 0;
          Status st;
          if (i % 7 == 0) {
            WriteBatch b;
            b.Put(k, "b");
            b.Put(k + "x", "b");
            st = s->Write(w, b);
          } else {
            st = s->Put(w, k, "v");
          }
          if (!st.ok()) errors++;
          if (i % 97 == 0 && !s->Persist().ok()) errors++;
          std::string got;
          if (!s->Get(k, &got).ok()) errors++;  // visible on return
        }
      });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(errors.load(), 0);
    ASSERT_TRUE(s->Close().ok());
  }
  std::unique_ptr<Store> s;
  ASSERT_TRUE(Store::Open(o, &s).ok());
  EXPECT_EQ(s->GetStats().dropped_unpersisted, 0u);
  for (int t = 0; t < kThreads; t++) {
    for (int i = 0; i < kOps; i++) {
      std::string k = "t" + std::to_string(t) + "." + std::to_string(i);
      ASSERT_TRUE(Has(s.get(), k, i % 7 == 0 ? "b" : "v")) << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PerPutAndGroup, StoreDurabilityTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "group" : "perput";
                         });

}  // namespace
}  // namespace flintkv

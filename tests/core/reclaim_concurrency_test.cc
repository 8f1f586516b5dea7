// Reclaimer (memtable/reclaim.h) on its own: the snapshot horizon (G2) and
// when retired nodes may be freed (G3; force at shutdown), with readers
// held at known points by latches (no timing), and a pin or a reader taken
// after a generation bump not holding back what was retired before it.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "memtable/reclaim.h"

namespace flintkv {
namespace memtable {
namespace {

// A one-shot latch (std::latch is C++20).
class Latch {
 public:
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// A reader on its own thread inside a Guard until released.
class HeldReader {
 public:
  explicit HeldReader(Reclaimer* r) {
    thread_ = std::thread([this, r] {
      Reclaimer::Guard g(r, /*read=*/true);
      version_ = g.version();
      in_.Open();
      leave_.Wait();
    });
    in_.Wait();
  }
  ~HeldReader() { Release(); }
  void Release() {
    if (!thread_.joinable()) return;
    leave_.Open();
    thread_.join();
  }
  uint64_t version() const { return version_; }

 private:
  Latch in_, leave_;
  uint64_t version_ = 0;
  std::thread thread_;
};

std::vector<IndexNode*> Nodes(int n) {
  std::vector<IndexNode*> v;
  for (int i = 0; i < n; i++) v.push_back(NewIndexNode(nullptr, "", 0, 1, 0));
  return v;
}

size_t FreeAll(Reclaimer* r, bool force = false) {
  return r->Reclaim([](IndexNode* n) { DeleteIndexNode(n); }, force);
}

TEST(ReclaimerTest, HorizonIsTheOldestVersionStillRead) {
  std::atomic<uint64_t> visible{7};
  Reclaimer r(&visible);
  EXPECT_EQ(7u, r.Horizon(7));
  uint64_t pinned = 0;
  const uint64_t pin = r.AddPin(4, /*memory=*/false, &pinned);
  EXPECT_EQ(4u, pinned);
  EXPECT_EQ(4u, r.Horizon(7));
  r.RemovePin(pin);
  {
    HeldReader reader(&r);  // reads at 7
    EXPECT_EQ(7u, reader.version());
    visible.store(20);
    EXPECT_EQ(7u, r.Horizon(20));
    const uint64_t now = r.AddPin(Reclaimer::kCurrent, false, &pinned);
    EXPECT_EQ(20u, pinned);
    EXPECT_EQ(7u, r.Horizon(20));
    r.RemovePin(now);
    reader.Release();
    EXPECT_EQ(20u, r.Horizon(20));
  }
  // A writer's guard holds memory but announces no version.
  std::thread writer([&r] {
    Reclaimer::Guard g(&r, /*read=*/false);
    EXPECT_EQ(Reclaimer::kNoVersion, g.version());
    EXPECT_EQ(20u, r.Horizon(20));
  });
  writer.join();
}

TEST(ReclaimerTest, RetiredNodesWaitForEarlierHolders) {
  std::atomic<uint64_t> visible{1};
  Reclaimer r(&visible);
  // A memory pin taken before the retirement holds it back.
  const uint64_t pin =
      r.AddPin(Reclaimer::kNoVersion, /*memory=*/true, nullptr);
  r.Retire(Nodes(3));
  EXPECT_EQ(0u, FreeAll(&r));
  EXPECT_EQ(3u, r.RetiredCount());
  r.RemovePin(pin);
  EXPECT_EQ(3u, FreeAll(&r));
  EXPECT_EQ(0u, r.RetiredCount());

  // So does a reader inside a Guard.
  {
    HeldReader reader(&r);
    r.Retire(Nodes(2));
    EXPECT_EQ(0u, FreeAll(&r));
    reader.Release();
    EXPECT_EQ(2u, FreeAll(&r));
  }
  // force (the owner shuts down, no reader left) frees what a pin holds.
  const uint64_t last = r.AddPin(Reclaimer::kNoVersion, true, nullptr);
  r.Retire(Nodes(4));
  EXPECT_EQ(4u, FreeAll(&r, /*force=*/true));
  r.RemovePin(last);
}

TEST(ReclaimerTest, HoldersFromAfterABumpDoNotHoldEarlierNodes) {
  std::atomic<uint64_t> visible{1};
  Reclaimer r(&visible);
  r.Retire(Nodes(2));
  r.Horizon(1);  // a GC pass bumps the generation
  const uint64_t pin = r.AddPin(Reclaimer::kNoVersion, true, nullptr);
  HeldReader reader(&r);
  EXPECT_EQ(2u, FreeAll(&r));  // the pin and the reader came later
  // But what is retired now waits for them.
  r.Retire(Nodes(1));
  EXPECT_EQ(0u, FreeAll(&r));
  r.RemovePin(pin);
  EXPECT_EQ(0u, FreeAll(&r));
  reader.Release();
  EXPECT_EQ(1u, FreeAll(&r));
}

}  // namespace
}  // namespace memtable
}  // namespace flintkv

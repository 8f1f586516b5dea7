// The internal debug checks (pmem/debug_check.h) fire: the combiner lock's
// holder check (memtable/combiner_lock.h) and the ordering preconditions
// the commit path checks (P1, P17). They exist only with
// FLINTKV_DEBUG_CHECKS (sanitizer and Debug builds); elsewhere the death
// tests are skipped, never reported as passing.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "memtable/combiner_lock.h"
#include "memtable/durable_skiplist.h"
#include "pmem/debug_check.h"
#include "tests/util/list_fixture.h"

namespace flintkv {
namespace memtable {

// Reaches the list's lock-requiring internals (a friend of DurableSkipList).
struct DurableSkipListTestPeer {
  template <class P>
  static CombinerLock& Lock(DurableSkipList<P>* l) {
    return l->combiner_lock_;
  }
  template <class P>
  static void DrainWeakLocked(DurableSkipList<P>* l) {
    l->DrainWeakLocked();
  }
  template <class P>
  static void BeginWeakEpoch(DurableSkipList<P>* l, uint64_t first) {
    l->BeginWeakEpoch(first, nullptr);
  }
};

namespace {

using Peer = DurableSkipListTestPeer;
using Fixture = test::ListFixture;

#ifdef FLINTKV_DEBUG_CHECKS
#define SKIP_WITHOUT_DEBUG_CHECKS()
#else
#define SKIP_WITHOUT_DEBUG_CHECKS() \
  GTEST_SKIP() << "built without FLINTKV_DEBUG_CHECKS: nothing to check"
#endif

TEST(CombinerLockDeathTest, AssertHeldFiresUnlessTheCallerHoldsIt) {
  SKIP_WITHOUT_DEBUG_CHECKS();
  CombinerLock lock;
  EXPECT_DEATH(lock.AssertHeld(), "FLINTKV_DCHECK failed: HeldByCurrentThread");
  lock.Lock();
  lock.AssertHeld();  // the holder passes
  // Another thread holds nothing, and may not release.
  EXPECT_DEATH(std::thread([&] { lock.AssertHeld(); }).join(),
               "FLINTKV_DCHECK failed: HeldByCurrentThread");
  EXPECT_DEATH(std::thread([&] { lock.Unlock(); }).join(),
               "FLINTKV_DCHECK failed: HeldByCurrentThread");
  lock.Unlock();
  EXPECT_TRUE(lock.TryLock());
  lock.Unlock();
}

// DrainWeakLocked is documented "under the combiner lock" (the GC's P12
// drain): called without it, it dies before touching the weak state.
TEST(DebugChecksDeathTest, LockedFunctionWithoutTheCombinerLockDies) {
  SKIP_WITHOUT_DEBUG_CHECKS();
  Fixture f;
  ASSERT_TRUE(f.list->Insert(f.Node("w", "v"), nullptr, /*sync=*/false).ok());
  ASSERT_TRUE(f.list->HasUnpersisted());
  EXPECT_DEATH(Peer::DrainWeakLocked(f.list.get()),
               "FLINTKV_DCHECK failed: HeldByCurrentThread");
  // With the lock it drains (P16).
  Peer::Lock(f.list.get()).Lock();
  Peer::DrainWeakLocked(f.list.get());
  Peer::Lock(f.list.get()).Unlock();
  EXPECT_FALSE(f.list->HasUnpersisted());
}

// P17: a weak epoch's cut must lie above every published version (else
// recovery would drop acknowledged writes).
TEST(DebugChecksDeathTest, WeakEpochCutAtAPublishedVersionDies) {
  SKIP_WITHOUT_DEBUG_CHECKS();
  Fixture f;
  ASSERT_TRUE(f.list->Insert(f.Node("s", "v")).ok());
  ASSERT_EQ(1u, f.list->VisibleVersion());
  Peer::Lock(f.list.get()).Lock();
  EXPECT_DEATH(Peer::BeginWeakEpoch(f.list.get(), 1),
               "FLINTKV_DCHECK failed: .*first_unpersisted >");
  Peer::Lock(f.list.get()).Unlock();
  EXPECT_EQ(0u, f.root->durable_cut);  // the parent opened no epoch
}

// P1: the combiner links only a sealed node (its header is complete, and
// was persisted with it by Prepare).
TEST(DebugChecksDeathTest, LinkingANodeWithABadHeaderDies) {
  SKIP_WITHOUT_DEBUG_CHECKS();
  Fixture f;
  pmem::NvmNode* node = f.Node("k", "v");
  node->check ^= 1;
  EXPECT_DEATH(f.list->Insert(node).ok(),
               "FLINTKV_DCHECK failed: pn->HeaderValid");
  EXPECT_EQ(0u, f.list->VisibleVersion());
}

// Without FLINTKV_DEBUG_CHECKS the condition is not evaluated.
TEST(DebugChecksTest, ConditionIsEvaluatedOnlyWithDebugChecks) {
  int evaluated = 0;
  FLINTKV_DCHECK(++evaluated > 0);
#ifdef FLINTKV_DEBUG_CHECKS
  EXPECT_EQ(1, evaluated);
#else
  EXPECT_EQ(0, evaluated);
#endif
}

}  // namespace
}  // namespace memtable
}  // namespace flintkv

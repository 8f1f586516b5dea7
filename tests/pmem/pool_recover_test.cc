// Recovery of a corrupt pool (invariants W1-W3 of
// docs/invariants.md): the walk checks that every node lies inside its own
// list's chunks, ends on a cycle within a few times the list's node count
// whatever the pool size, and a refused pool is left byte-for-byte
// unchanged (nothing is unlinked before the whole list validated).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "flintkv/store.h"
#include "memtable/coding.h"
#include "memtable/durable_skiplist.h"
#include "memtable/key_comparator.h"
#include "memtable/list_walk.h"
#include "pmem/layout.h"
#include "pmem/persist.h"
#include "pmem/pool.h"
#include "tests/util/node_builder.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

using List = memtable::DurableSkipList<pmem::PmemPersist>;

// Offset in `data` of the NvmNode whose key is `key` (the only one).
size_t NodeOffset(const std::string& data, const std::string& key) {
  const std::string needle = test::PrefixKey(key);
  size_t pos = data.find(needle);
  EXPECT_NE(pos, std::string::npos) << key;
  EXPECT_EQ(data.find(needle, pos + 1), std::string::npos) << key;
  return pos - sizeof(pmem::NvmNode);
}

// A node recovery would drop (version MAX) ahead of a corrupt one: the old
// recovery unlinked (and flushed) the first before it found the second.
TEST(PoolRecoverTest, RefusedPoolHeapIsByteForByteUnchanged) {
  test::TempPool pool;
  {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(
        Store::Open(test::QuietStoreOptions(pool.path(), 16 << 20), &store)
            .ok());
    for (const char* k : {"key-a", "key-b", "key-c", "key-d", "key-e"}) {
      ASSERT_TRUE(store->Put(k, std::string("value of ") + k).ok());
    }
  }
  std::string data = test::ReadFile(pool.path());
  ASSERT_FALSE(data.empty());
  const size_t b = NodeOffset(data, "key-b");
  const size_t d = NodeOffset(data, "key-d");
  const uint64_t max = pmem::kUncommittedVersion;
  std::memcpy(&data[b + offsetof(pmem::NvmNode, version)], &max, sizeof(max));
  data[d + offsetof(pmem::NvmNode, data_size)] ^= 0x5a;  // header check fails
  ASSERT_TRUE(test::WriteFile(pool.path(), data));

  StoreOptions o = test::QuietStoreOptions(pool.path(), 16 << 20);
  o.pool.create_if_missing = false;
  std::unique_ptr<Store> store;
  Status s = Store::Open(o, &store);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  // Names the list, the node (its index in the list) and its offset.
  const std::string want =
      "list 1: node #3 at offset " + std::to_string(d) + ": bad node header";
  EXPECT_NE(s.message().find(want), std::string::npos) << s.ToString();
  // Every byte from the pool's root object on (the heap: the root, the
  // list and every chunk) is unchanged. Before it lies libpmemobj's own
  // metadata, which pmemobj_open rewrites on every open (its run id and
  // lane state), whether FlintKV then accepts the pool or not.
  const std::string magic(reinterpret_cast<const char*>(&pmem::kPoolMagic),
                          sizeof(pmem::kPoolMagic));
  const size_t heap = data.find(magic);
  ASSERT_NE(heap, std::string::npos);
  ASSERT_LT(heap, b);
  const std::string after = test::ReadFile(pool.path());
  ASSERT_EQ(after.size(), data.size());
  std::string diffs;
  for (size_t i = heap; i < data.size(); i++) {
    if (data[i] != after[i] && diffs.size() < 200) {
      diffs += " " + std::to_string(i);
    }
  }
  EXPECT_TRUE(diffs.empty())
      << "a refused pool was modified at offsets" << diffs;
}

// A pool with two lists; list A's first node is made to point at a node
// in list B's chunk (in key order, so only the chunk rule can catch it).
TEST(PoolRecoverTest, NodeInAnotherListsChunkIsCorruption) {
  test::TempPool tmp;
  std::unique_ptr<pmem::Pool> pool;
  ASSERT_TRUE(pmem::Pool::Open(
                  test::QuietPoolOptions(tmp.path(), 64 << 20, 64 << 10), &pool)
                  .ok());
  memtable::BytewiseKeyComparator cmp;
  memtable::SkipListOptions lo;
  lo.chunk_size = 64 << 10;
  lo.reclaim_space = true;
  pmem::ListRoot *ra, *rb;
  ASSERT_TRUE(pool->CreateList(pmem::kListStandalone, &ra).ok());
  ASSERT_TRUE(pool->CreateList(pmem::kListStandalone, &rb).ok());
  pmem::NvmNode *a1, *b2;
  {
    List la(&cmp, pool.get(), ra, lo), lb(&cmp, pool.get(), rb, lo);
    ASSERT_TRUE(test::BuildNode(&la, "k1", "a", 0, &a1).ok());
    ASSERT_TRUE(la.Insert(a1).ok());
    ASSERT_TRUE(test::BuildNode(&lb, "k2", "b", 0, &b2).ok());
    ASSERT_TRUE(lb.Insert(b2).ok());
  }
  ASSERT_EQ(a1->next, 0u);
  a1->next = pool->ToOffset(b2);  // A: k1 -> k2 (B's node), sorted
  List la(&cmp, pool.get(), ra, lo);
  Status s = la.Recover(nullptr);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("list " + std::to_string(ra->list_id) +
                              ": node #1 at offset " +
                              std::to_string(pool->ToOffset(b2)) +
                              ": node is not inside a chunk of this list"),
            std::string::npos)
      << s.ToString();
}

// A region that claims 1 PiB around a small buffer: the old cycle bound
// (region size / 16 steps) would walk for days.
class HugeRegion : public pmem::Region {
 public:
  explicit HugeRegion(char* base) {
    base_ = base;
    size_ = uint64_t{1} << 50;
  }
  Status NewChunk(uint64_t, size_t, pmem::ChunkFit, bool, char**,
                  size_t*) override {
    return Status::NoSpace("test region");
  }
  std::vector<pmem::ChunkInfo> ChunksOf(uint64_t) const override { return {}; }
};

TEST(PoolRecoverTest, CycleEndsTheWalkWithinTheListsNodeCount) {
  alignas(pmem::kCacheLine) static char buf[64 << 10];
  std::memset(buf, 0, sizeof(buf));
  HugeRegion region(buf);
  auto* root = new (buf + pmem::kCacheLine) pmem::ListRoot();
  root->list_id = 7;
  // Three nodes of one key, all version MAX (exempt from the version
  // order, as after a crash with weak writes): n0 -> n1 -> n2 -> n1.
  const std::string key = test::PrefixKey("k");
  const uint64_t off[3] = {4096, 4096 + 64, 4096 + 128};
  for (uint64_t o : off) {
    auto* n = region.FromOffset<pmem::NvmNode>(o);
    n->version = pmem::kUncommittedVersion;
    n->data_size = static_cast<uint32_t>(key.size());
    n->key_size = static_cast<uint32_t>(key.size());
    n->flags = 0;
    n->check = pmem::NvmNode::HeaderCheck(n->data_size, n->key_size, 0);
    std::memcpy(n->data(), key.data(), key.size());
  }
  root->head.next = off[0];
  region.FromOffset<pmem::NvmNode>(off[0])->next = off[1];
  region.FromOffset<pmem::NvmNode>(off[1])->next = off[2];
  region.FromOffset<pmem::NvmNode>(off[2])->next = off[1];
  memtable::BytewiseKeyComparator cmp;
  uint64_t visits = 0;
  Status s = memtable::WalkList(
      region, root, cmp, nullptr,
      [&](const pmem::NvmNode* n) {
        if (++visits == 1000) {  // give up: end the walk (a failure below)
          const_cast<pmem::NvmNode*>(n)->next = 0;
        }
        return memtable::WalkDecision::kKeep;
      },
      [](uint64_t*) {});
  ASSERT_TRUE(s.IsCorruption())
      << s.ToString() << " after " << visits << " visits of a 3-node cycle";
  EXPECT_NE(s.ToString().find("list 7: node #"), std::string::npos);
  EXPECT_NE(s.ToString().find("cycle"), std::string::npos) << s.ToString();
  EXPECT_LE(visits, 3u * 3u) << "more than 3 steps per node";
}

}  // namespace
}  // namespace flintkv

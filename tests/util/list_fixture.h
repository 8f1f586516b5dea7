// A pool with one DurableSkipList (PMEM persistence) and a node builder,
// for tests below the Store and RocksDB APIs.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "memtable/durable_skiplist.h"
#include "pmem/persist.h"
#include "pmem/pool.h"
#include "tests/util/node_builder.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace test {

using List = memtable::DurableSkipList<pmem::PmemPersist>;

// A standalone-kind list; options as given, chunk_size overridden.
struct ListFixture {
  explicit ListFixture(const memtable::SkipListOptions& lo = {},
                       uint64_t chunk_size = 64 << 10) {
    Status s = pmem::Pool::Open(
        QuietPoolOptions(tmp.path(), 64ull << 20, chunk_size), &pool);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(pool->CreateList(pmem::kListStandalone, &root).ok());
    memtable::SkipListOptions o = lo;
    o.chunk_size = chunk_size;
    list = std::make_unique<List>(&cmp, pool.get(), root, o);
  }
  pmem::NvmNode* Node(const std::string& key, const std::string& value) {
    pmem::NvmNode* node = nullptr;
    Status s = BuildNode(list.get(), key, value, 0, &node);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return node;
  }
  // Entries visible at the list's current version.
  size_t Count() const {
    size_t n = 0;
    List::Iterator it(list.get(), list->VisibleVersion());
    for (it.SeekToFirst(); it.Valid(); it.Next()) n++;
    return n;
  }

  TempPool tmp;
  memtable::BytewiseKeyComparator cmp;
  std::unique_ptr<pmem::Pool> pool;
  pmem::ListRoot* root = nullptr;
  std::unique_ptr<List> list;
};

}  // namespace test
}  // namespace flintkv

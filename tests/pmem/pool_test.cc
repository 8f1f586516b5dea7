// pmem::Pool: lists, chunks, retirement, reopen, options checks and the
// one-line emulated-PMEM notice.
#include "pmem/pool.h"

#include <gtest/gtest.h>
#include <libpmemobj.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/store.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace pmem {
namespace {

class PoolTest : public ::testing::Test {
 protected:
  PoolOptions Options() {
    PoolOptions o = test::QuietPoolOptions(tmp_.path(), 32ull << 20, 64 << 10);
    o.info_log = [this](const std::string& m) { log_.push_back(m); };
    return o;
  }
  std::unique_ptr<Pool> OpenPool() {
    std::unique_ptr<Pool> p;
    Status s = Pool::Open(Options(), &p);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return p;
  }
  static void Fill(char* p, size_t n, char seed) {
    for (size_t i = 0; i < n; i++) p[i] = static_cast<char>(seed + i * 131);
  }
  static bool Check(const char* p, size_t n, char seed) {
    for (size_t i = 0; i < n; i++) {
      if (p[i] != static_cast<char>(seed + i * 131)) return false;
    }
    return true;
  }

  test::TempPool tmp_;
  std::vector<std::string> log_;
};

// Without an info_log the notices go nowhere: a library must not write to
// its host's stderr (they did before).
TEST_F(PoolTest, NoNoticesOnStderrWithoutInfoLog) {
  PoolOptions o = Options();
  o.info_log = nullptr;
  ::testing::internal::CaptureStderr();
  {
    std::unique_ptr<Pool> p;
    Status s = Pool::Open(o, &p);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  // The same open with an info_log gives the notice (so it had one).
  ASSERT_NE(OpenPool(), nullptr);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find("emulated PMEM"), std::string::npos);
}

// P8b: a creation killed midway left a file at the pool's path that every
// later open refused as "not a FlintKV pool" (an empty file when the kill
// came right after the create). The pool is now built under a temporary
// name, and a leftover one is replaced. An empty file at the path (another
// program's, or an older FlintKV's interrupted creation) is refused, saying
// it holds no data and may be deleted.
TEST_F(PoolTest, InterruptedCreationLeavesNoPool) {
  const std::string path = tmp_.path();
  const pid_t dead = fork();  // a process that created and is gone
  ASSERT_GE(dead, 0);
  if (dead == 0) _exit(0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string leftover = path + ".creating." + std::to_string(dead);
  {
    std::FILE* f = std::fopen(leftover.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("half a pool", f);
    std::fclose(f);
  }
  std::unique_ptr<Pool> p = OpenPool();
  ASSERT_NE(p, nullptr);
  EXPECT_NE(access(path.c_str(), F_OK), -1);
  EXPECT_EQ(access(leftover.c_str(), F_OK), -1) << "a dead creation's file";
  const std::string mine = path + ".creating." + std::to_string(getpid());
  EXPECT_EQ(access(mine.c_str(), F_OK), -1);
  ListRoot* l = nullptr;
  ASSERT_TRUE(p->CreateList(kListStandalone, &l).ok());
  const uint64_t id = l->list_id;
  p.reset();
  p = OpenPool();  // the published pool: reopened, not replaced
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->Lists().size(), 1u);
  EXPECT_EQ(p->Lists()[0]->list_id, id);
  p.reset();
  std::remove(path.c_str());
  std::fclose(std::fopen(path.c_str(), "w"));  // an empty file
  Status s = Pool::Open(Options(), &p);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("holds no data: delete it"), std::string::npos)
      << s.ToString();
}

// Two processes creating the same pool at once: one creates and publishes
// it, the other finds it in place and opens it (Busy: it is in use) or
// opens it after the first is done. Before, the second could unlink the
// first's half-built file and the first then wrote into a file without a
// name. Every child checks that the pool it opened is the one at the path.
TEST_F(PoolTest, RacingCreationsShareOnePool) {
  for (int round = 0; round < 8; round++) {
    std::remove(tmp_.path().c_str());
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
      kids[k] = fork();
      ASSERT_GE(kids[k], 0);
      if (kids[k] == 0) {
        std::unique_ptr<Pool> p;
        PoolOptions o = Options();
        o.info_log = nullptr;
        Status s = Pool::Open(o, &p);
        if (s.IsBusy()) _exit(2);
        if (!s.ok()) _exit(1);
        // The pool's file is the one at the path: a list created here is
        // seen by a reopen through the path.
        ListRoot* l = nullptr;
        if (!p->CreateList(kListStandalone, &l).ok()) _exit(1);
        p.reset();
        _exit(0);
      }
    }
    int ok = 0;
    for (pid_t kid : kids) {
      int st = 0;
      ASSERT_EQ(waitpid(kid, &st, 0), kid);
      ASSERT_TRUE(WIFEXITED(st)) << "round " << round;
      ASSERT_NE(WEXITSTATUS(st), 1) << "round " << round;
      ok += WEXITSTATUS(st) == 0;
    }
    std::unique_ptr<Pool> p = OpenPool();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->Lists().size(), static_cast<size_t>(ok))
        << "round " << round << ": a list went to a file without a name";
  }
}

TEST_F(PoolTest, CreateListsAndChunksThenReopen) {
  uint64_t id_a, id_b;
  std::vector<ChunkInfo> chunks_a;
  {
    std::unique_ptr<Pool> pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(pool->path(), tmp_.path());
    EXPECT_EQ(pool->chunk_size(), 64u << 10);
    EXPECT_TRUE(pool->Lists().empty());

    ListRoot *a, *b;
    ASSERT_TRUE(pool->CreateList(kListStandalone, &a).ok());
    ASSERT_TRUE(pool->CreateList(kListMemtable, &b).ok());
    id_a = a->list_id;
    id_b = b->list_id;
    EXPECT_LT(id_a, id_b);
    EXPECT_EQ(a->magic, kListMagic);
    EXPECT_EQ(a->kind, kListStandalone);
    EXPECT_EQ(b->kind, kListMemtable);
    EXPECT_EQ(StateOf(*a), kListActive);
    EXPECT_EQ(a->head.next, 0u);
    EXPECT_EQ(a->batch_mode, 0u);
    EXPECT_EQ(a->commit_version, 0u);
    EXPECT_TRUE(a->head.HeaderValid());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % kCacheLine, 0u);
    std::vector<ListRoot*> lists = pool->Lists();
    ASSERT_EQ(lists.size(), 2u);
    EXPECT_EQ(lists[0], a);
    EXPECT_EQ(lists[1], b);

    // Two chunks for a (one bigger than chunk_size), one for b.
    char* begin;
    size_t len;
    ASSERT_TRUE(
        pool->NewChunk(id_a, 100, pmem::ChunkFit::kAtLeast, false, &begin, &len)
            .ok());
    // About chunk_size (the pool may keep a little for its headers).
    EXPECT_GE(len, 32u << 10);
    EXPECT_LE(len, 64u << 10);
    EXPECT_TRUE(pool->InBounds(pool->ToOffset(begin), len));
    Fill(begin, len, 1);
    ASSERT_TRUE(pool->NewChunk(id_a, 200 << 10, pmem::ChunkFit::kAtLeast, false,
                               &begin, &len)
                    .ok());
    EXPECT_GE(len, 200u << 10);
    Fill(begin, len, 2);
    ASSERT_TRUE(
        pool->NewChunk(id_b, 1, pmem::ChunkFit::kAtLeast, false, &begin, &len)
            .ok());
    Fill(begin, len, 3);

    chunks_a = pool->ChunksOf(id_a);
    ASSERT_EQ(chunks_a.size(), 2u);
    EXPECT_LT(chunks_a[0].offset, chunks_a[1].offset);  // sorted
    ASSERT_EQ(pool->ChunksOf(id_b).size(), 1u);
    EXPECT_TRUE(pool->ChunksOf(id_b + 100).empty());
    // Chunks do not overlap.
    EXPECT_LE(chunks_a[0].offset + chunks_a[0].len, chunks_a[1].offset);
  }
  std::unique_ptr<Pool> pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  std::vector<ListRoot*> lists = pool->Lists();
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0]->list_id, id_a);
  EXPECT_EQ(lists[0]->kind, kListStandalone);
  EXPECT_EQ(lists[1]->list_id, id_b);
  EXPECT_EQ(lists[1]->kind, kListMemtable);
  std::vector<ChunkInfo> again = pool->ChunksOf(id_a);
  ASSERT_EQ(again.size(), chunks_a.size());
  for (size_t i = 0; i < again.size(); i++) {
    EXPECT_EQ(again[i].offset, chunks_a[i].offset);
    EXPECT_EQ(again[i].len, chunks_a[i].len);
  }
  // Chunk contents survived (ordered by offset; seeds by creation order are
  // found by trying both).
  const char* c0 = pool->FromOffset<char>(again[0].offset);
  const char* c1 = pool->FromOffset<char>(again[1].offset);
  EXPECT_TRUE((Check(c0, again[0].len, 1) && Check(c1, again[1].len, 2)) ||
              (Check(c0, again[0].len, 2) && Check(c1, again[1].len, 1)));
  std::vector<ChunkInfo> cb = pool->ChunksOf(id_b);
  ASSERT_EQ(cb.size(), 1u);
  EXPECT_TRUE(Check(pool->FromOffset<char>(cb[0].offset), cb[0].len, 3));
  // A new list never reuses an id.
  ListRoot* c;
  ASSERT_TRUE(pool->CreateList(kListStandalone, &c).ok());
  EXPECT_GT(c->list_id, id_b);
}

TEST_F(PoolTest, DropListFreesSpace) {
  std::unique_ptr<Pool> pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  const uint64_t empty = pool->BytesInUse();
  ListRoot *keep, *drop;
  ASSERT_TRUE(pool->CreateList(kListStandalone, &keep).ok());
  ASSERT_TRUE(pool->CreateList(kListMemtable, &drop).ok());
  char* begin;
  size_t len;
  ASSERT_TRUE(pool->NewChunk(keep->list_id, 1, pmem::ChunkFit::kAtLeast, false,
                             &begin, &len)
                  .ok());
  uint64_t chunk_bytes = 0;
  for (int i = 0; i < 8; i++) {
    ASSERT_TRUE(pool->NewChunk(drop->list_id, 1, pmem::ChunkFit::kAtLeast,
                               false, &begin, &len)
                    .ok());
    chunk_bytes += len;
  }
  const uint64_t before = pool->BytesInUse();
  EXPECT_GE(before, empty + chunk_bytes);
  const uint64_t free_before = pool->ApproxFreeBytes();
  const uint64_t dropped_id = drop->list_id;
  const uint64_t kept_id = keep->list_id;
  pool->DropList(drop);
  const uint64_t after = pool->BytesInUse();
  EXPECT_LE(after + chunk_bytes, before) << "chunks of the dropped list kept";
  EXPECT_GE(pool->ApproxFreeBytes(), free_before + chunk_bytes);
  EXPECT_TRUE(pool->ChunksOf(dropped_id).empty());
  ASSERT_EQ(pool->Lists().size(), 1u);
  EXPECT_EQ(pool->Lists()[0]->list_id, kept_id);
  EXPECT_EQ(pool->ChunksOf(kept_id).size(), 1u);

  pool.reset();
  pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->BytesInUse(), after);
  ASSERT_EQ(pool->Lists().size(), 1u);
  EXPECT_EQ(pool->Lists()[0]->list_id, kept_id);
  EXPECT_TRUE(pool->ChunksOf(dropped_id).empty());
  ListRoot* fresh;
  ASSERT_TRUE(pool->CreateList(kListMemtable, &fresh).ok());
  EXPECT_GT(fresh->list_id, dropped_id);
}

// What recovery does after a crash: chunks an earlier open allocated are
// freed next to space an earlier open freed. Chunks of 4 MiB are libpmemobj
// "huge" blocks (sixteen 256 KiB heap units, a footer in the last unit's
// header). Freeing one reads the footer of the free block before it to
// coalesce, and libpmemobj 1.12 marks a free block's footer NOACCESS at open
// and never rebuilds it (it rebuilds only allocated blocks' footers), so under
// memcheck (ctest valgrind_pool_reopen_free) that read is reported as invalid.
// The tests/infra/valgrind.supp entry
// libpmemobj_free_block_footer_noaccess_after_open names that defect; this
// test pins down the layout that produces it and checks the space is freed.
TEST_F(PoolTest, ChunksFreedNextToSpaceFreedBeforeReopenAreReused) {
  PoolOptions o = Options();
  o.chunk_size = 4ull << 20;
  uint64_t second_id;
  uint64_t in_use_before;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Open(o, &pool).ok());
    ListRoot *first, *second;
    ASSERT_TRUE(pool->CreateList(kListMemtable, &first).ok());
    ASSERT_TRUE(pool->CreateList(kListMemtable, &second).ok());
    second_id = second->list_id;
    for (ListRoot* l : {first, second}) {
      char* begin;
      size_t len;
      ASSERT_TRUE(
          pool->NewChunk(l->list_id, 1, ChunkFit::kAtLeast, false, &begin, &len)
              .ok());
      Fill(begin, len, 3);
    }
    pool->DropList(first);  // a free block between allocated ones
    in_use_before = pool->BytesInUse();
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(o, &pool).ok());
  ASSERT_EQ(pool->Lists().size(), 1u);
  ASSERT_EQ(pool->Lists()[0]->list_id, second_id);
  const std::vector<ChunkInfo> chunks = pool->ChunksOf(second_id);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(Check(pool->base() + chunks[0].offset, chunks[0].len, 3));
  pool->DropList(pool->Lists()[0]);
  EXPECT_TRUE(pool->Lists().empty());
  EXPECT_LE(pool->BytesInUse() + o.chunk_size / 2, in_use_before);
  pool.reset();  // and the pool reopens with both blocks free
  ASSERT_TRUE(Pool::Open(o, &pool).ok());
  EXPECT_TRUE(pool->Lists().empty());
  EXPECT_EQ(pool->ChunksOf(second_id).size(), 0u);
}

TEST_F(PoolTest, RetiredListFoundOnOpenIsFreed) {
  // A crash between "state = Retired" and the frees of DropList: the next
  // open finishes the job (P6).
  uint64_t retired_id;
  uint64_t with_list;
  uint64_t chunk_bytes = 0;
  {
    std::unique_ptr<Pool> pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    ListRoot* l;
    ASSERT_TRUE(pool->CreateList(kListMemtable, &l).ok());
    retired_id = l->list_id;
    char* begin;
    size_t len;
    for (int i = 0; i < 4; i++) {
      ASSERT_TRUE(pool->NewChunk(retired_id, 1, pmem::ChunkFit::kAtLeast, false,
                                 &begin, &len)
                      .ok());
      chunk_bytes += len;
    }
    with_list = pool->BytesInUse();
    pool->SetListState(l, kListRetired);
    EXPECT_TRUE(pool->Lists().empty());  // retired lists are not listed
  }
  std::unique_ptr<Pool> pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  EXPECT_TRUE(pool->Lists().empty());
  EXPECT_TRUE(pool->ChunksOf(retired_id).empty());
  EXPECT_LE(pool->BytesInUse() + chunk_bytes, with_list);
}

TEST_F(PoolTest, ListStatePersists) {
  uint64_t id;
  {
    std::unique_ptr<Pool> pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    ListRoot* l;
    ASSERT_TRUE(pool->CreateList(kListMemtable, &l).ok());
    id = l->list_id;
    pool->SetListState(l, kListSealed);
  }
  std::unique_ptr<Pool> pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  ASSERT_EQ(pool->Lists().size(), 1u);
  EXPECT_EQ(pool->Lists()[0]->list_id, id);
  EXPECT_EQ(StateOf(*pool->Lists()[0]), kListSealed);
}

// Valid state words differ in at least five bits, so every one-bit flip of
// one decodes to it, corrected, and no two- or three-bit flip decodes to
// any state. One flip of a bare word turned "active" or "sealed" into
// "retired", and the open freed the list.
TEST_F(PoolTest, CheckedWordsCorrectOneFlippedBit) {
  for (uint32_t a = kListActive; a <= kListRetired; a++) {
    for (uint32_t b = a + 1; b <= kListRetired; b++) {
      EXPECT_GE(__builtin_popcount(CheckedWord(a, kStateSalt) ^
                                   CheckedWord(b, kStateSalt)),
                5)
          << a << " " << b;
    }
  }
  for (ListState st : {kListActive, kListSealed, kListRetired}) {
    ListRoot l{};
    ListState got;
    bool corrected;
    const uint32_t w = CheckedWord(st, kStateSalt);
    l.state_word = w;
    ASSERT_TRUE(DecodeListState(l, &got, &corrected));
    EXPECT_EQ(got, st);
    EXPECT_FALSE(corrected);
    for (int i = 0; i < 32; i++) {
      l.state_word = w ^ (1u << i);
      ASSERT_TRUE(DecodeListState(l, &got, &corrected)) << i;
      EXPECT_EQ(got, st) << i;
      EXPECT_TRUE(corrected || (l.state_word >> 8) == 0) << i;
      for (int j = i + 1; j < 32; j++) {
        for (int k = j; k < 32; k++) {  // k == j: two flipped bits
          l.state_word = w ^ (1u << i) ^ (1u << j) ^ (k == j ? 0 : 1u << k);
          // A bare word (every check bit flipped) keeps the value bits.
          if (DecodeListState(l, &got, &corrected)) {
            EXPECT_EQ(got, st) << i << "," << j << "," << k;
          }
        }
      }
    }
  }
}

// A flipped bit in a state word is corrected at the open, which says so;
// the list and its chunks are kept. A word damaged beyond correction
// (two bits) makes the open refuse, changing nothing.
TEST_F(PoolTest, FlippedStateBitsAreCorrectedAtOpen) {
  uint64_t ids[2];
  auto flip = [](ListRoot* l, uint32_t mask) {
    l->state_word ^= mask;
    pmemobj_persist(pmemobj_pool_by_ptr(l), &l->state_word, 4);
  };
  {
    std::unique_ptr<Pool> pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    int i = 0;
    for (ListKind kind : {kListMemtable, kListStandalone}) {
      ListRoot* l;
      ASSERT_TRUE(pool->CreateList(kind, &l).ok());
      char* begin;
      size_t len;
      ASSERT_TRUE(pool->NewChunk(l->list_id, 1024, ChunkFit::kAtLeast, false,
                                 &begin, &len)
                      .ok());
      Fill(begin, 1024, static_cast<char>(i));
      ids[i++] = l->list_id;
    }
    // Active (1) with bit 1 flipped reads 3, "retired"; a check bit on the
    // other list.
    flip(pool->Lists()[0], 2);
    flip(pool->Lists()[1], 1u << 20);
  }
  log_.clear();
  std::unique_ptr<Pool> pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  std::vector<ListRoot*> lists = pool->Lists();
  ASSERT_EQ(lists.size(), 2u);
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ(lists[i]->list_id, ids[i]);
    EXPECT_EQ(lists[i]->state_word, CheckedWord(kListActive, kStateSalt));
    std::vector<ChunkInfo> chunks = pool->ChunksOf(ids[i]);
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_TRUE(Check(pool->FromOffset<char>(chunks[0].offset), 1024,
                      static_cast<char>(i)));
  }
  ASSERT_EQ(pool->open_repairs().size(), 2u);
  EXPECT_NE(pool->open_repairs()[0].find("list " + std::to_string(ids[0]) +
                                         ": state word"),
            std::string::npos)
      << pool->open_repairs()[0];
  int logged = 0;
  for (const std::string& m : log_) {
    logged += m.find("corrected to state 1") != std::string::npos;
  }
  EXPECT_EQ(logged, 2);
  // Two flipped bits: refused, nothing changed.
  const uint32_t two_bits = (1u << 1) | (1u << 17);
  flip(lists[0], two_bits);
  pool.reset();
  Status s = Pool::Open(Options(), &pool);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("damaged beyond correction"), std::string::npos)
      << s.ToString();
  pool.reset();
  {
    // Put back by hand (the refused open left the pool as it was).
    PMEMobjpool* pop = pmemobj_open(tmp_.path().c_str(), kLayoutName);
    ASSERT_NE(pop, nullptr);
    PMEMoid oid;
    POBJ_FOREACH(pop, oid) {
      if (pmemobj_type_num(oid) != kTypeList) continue;
      auto* l = reinterpret_cast<ListRoot*>(
          (reinterpret_cast<uintptr_t>(pmemobj_direct(oid)) + kCacheLine - 1) &
          ~uintptr_t{kCacheLine - 1});
      if (l->list_id == ids[0]) flip(l, two_bits);
    }
    pmemobj_close(pop);
  }
  pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  EXPECT_TRUE(pool->open_repairs().empty());
  ASSERT_EQ(pool->ChunksOf(ids[0]).size(), 1u);
}

// A flipped list id, or chunk owner id, would make the list's chunks look
// orphaned, and the open frees orphans: the identity checks refuse the open
// first, changing nothing. (Before, the chunks were freed.)
TEST_F(PoolTest, FlippedListOrChunkIdIsRefusedNotFreed) {
  uint64_t id;
  {
    std::unique_ptr<Pool> pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    ListRoot* l;
    ASSERT_TRUE(pool->CreateList(kListMemtable, &l).ok());  // id 1
    ASSERT_TRUE(pool->CreateList(kListMemtable, &l).ok());  // id 2
    id = l->list_id;
    char* begin;
    size_t len;
    ASSERT_TRUE(
        pool->NewChunk(id, 1024, ChunkFit::kAtLeast, false, &begin, &len).ok());
    Fill(begin, 1024, 7);
  }
  for (int target = 0; target < 2; target++) {
    SCOPED_TRACE(target == 0 ? "list id" : "chunk owner id");
    uint64_t* word = nullptr;
    PMEMobjpool* pop = pmemobj_open(tmp_.path().c_str(), kLayoutName);
    ASSERT_NE(pop, nullptr);
    PMEMoid oid;
    POBJ_FOREACH(pop, oid) {
      char* p = reinterpret_cast<char*>(
          (reinterpret_cast<uintptr_t>(pmemobj_direct(oid)) + kCacheLine - 1) &
          ~uintptr_t{kCacheLine - 1});
      if (target == 0 && pmemobj_type_num(oid) == kTypeList &&
          reinterpret_cast<ListRoot*>(p)->list_id == id) {
        word = &reinterpret_cast<ListRoot*>(p)->list_id;
      }
      if (target == 1 && pmemobj_type_num(oid) == kTypeChunk) {
        word = &reinterpret_cast<ChunkHeader*>(p)->list_id;
      }
    }
    ASSERT_NE(word, nullptr);
    *word ^= 2;  // 2 -> 0: no such list
    pmemobj_persist(pop, word, sizeof(*word));
    pmemobj_close(pop);
    std::unique_ptr<Pool> pool;
    Status s = Pool::Open(Options(), &pool);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    pool.reset();
    pop = pmemobj_open(tmp_.path().c_str(), kLayoutName);
    ASSERT_NE(pop, nullptr);
    *word ^= 2;  // put back: the refused open freed nothing
    pmemobj_persist(pop, word, sizeof(*word));
    pmemobj_close(pop);
    pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    std::vector<ChunkInfo> chunks = pool->ChunksOf(id);
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_TRUE(Check(pool->FromOffset<char>(chunks[0].offset), 1024, 7));
  }
}

// A pool of format 1 (bare state words, no identity checks) is read as it
// is: opening, even repeatedly, does not upgrade it (a read-only tool must
// not lock out the build that wrote it); the first checked word written
// marks it 2, and says so. An unknown version is refused by name.
TEST_F(PoolTest, FormatOnePoolIsReadAndMarkedTwoOnFirstWrite) {
  auto root_of = [](Pool* p) {
    return reinterpret_cast<PoolRoot*>(
        reinterpret_cast<char*>(p->root_user_words()) -
        offsetof(PoolRoot, user));
  };
  {
    std::unique_ptr<Pool> pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    ListRoot* l;
    ASSERT_TRUE(pool->CreateList(kListMemtable, &l).ok());
    l->state_word = kListSealed;  // as format 1 wrote it
    l->id_check = 0;
    PoolRoot* r = root_of(pool.get());
    EXPECT_EQ(r->format_version, kFormatVersion);
    r->format_version = 1;
    pmemobj_persist(pmemobj_pool_by_ptr(r), r, sizeof(*r));
    pmemobj_persist(pmemobj_pool_by_ptr(l), l, sizeof(*l));
  }
  for (int i = 0; i < 2; i++) {
    std::unique_ptr<Pool> pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    ASSERT_EQ(pool->Lists().size(), 1u);
    EXPECT_EQ(StateOf(*pool->Lists()[0]), kListSealed);
    EXPECT_TRUE(pool->open_repairs().empty());
    EXPECT_EQ(root_of(pool.get())->format_version, 1u);
  }
  {
    log_.clear();
    std::unique_ptr<Pool> pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    pool->SetListState(pool->Lists()[0], kListRetired);
    PoolRoot* r = root_of(pool.get());
    EXPECT_EQ(r->format_version, 2u);
    bool logged = false;
    for (const std::string& m : log_) {
      logged |= m.find("format version 1 upgraded to 2") != std::string::npos;
    }
    EXPECT_TRUE(logged);
    r->format_version = kFormatVersion + 1;
    pmemobj_persist(pmemobj_pool_by_ptr(r), r, sizeof(*r));
  }
  std::unique_ptr<Pool> p;
  Status s = Pool::Open(Options(), &p);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find("format version 3 is not supported"),
            std::string::npos)
      << s.ToString();
}

TEST_F(PoolTest, FullPoolReturnsNoSpace) {
  std::unique_ptr<Pool> pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  ListRoot* l;
  ASSERT_TRUE(pool->CreateList(kListStandalone, &l).ok());
  char* begin;
  size_t len;
  Status s;
  int chunks = 0;
  std::vector<char*> begins;
  for (; chunks < 10000; chunks++) {
    s = pool->NewChunk(l->list_id, 1, pmem::ChunkFit::kAtLeast, false, &begin,
                       &len);
    if (!s.ok()) break;
    std::memset(begin, 0x42, len);
    begins.push_back(begin);
  }
  ASSERT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(s.message().find(tmp_.path()), std::string::npos) << s.ToString();
  EXPECT_GT(chunks, 100);  // 32 MiB pool, 64 KiB chunks
  EXPECT_LE(static_cast<uint64_t>(chunks) * (64 << 10), 32ull << 20);
  // A request bigger than the pool fails the same way.
  EXPECT_TRUE(pool->NewChunk(l->list_id, 64ull << 20, pmem::ChunkFit::kAtLeast,
                             true, &begin, &len)
                  .IsNoSpace());
  EXPECT_EQ(pool->ChunksOf(l->list_id).size(), begins.size());
  pool.reset();
  pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->ChunksOf(pool->Lists()[0]->list_id).size(), begins.size());
}

// Space one thread frees is space for every thread: a writer that found the
// pool full must get the chunks a flush on another thread freed, whichever
// thread allocated them. libpmemobj gives each thread its own arena, and a
// run active in one arena keeps its free blocks from the others: with
// run-sized chunks (below 256 KiB) a RocksDB writer waited forever for
// space a flush had already freed.
TEST_F(PoolTest, SpaceFreedByOneThreadServesAnother) {
  for (uint64_t chunk : {16ull << 10, 64ull << 10, 1ull << 20}) {
    SCOPED_TRACE("chunk_size " + std::to_string(chunk));
    PoolOptions o = test::QuietPoolOptions(tmp_.path(), 32ull << 20, chunk);
    unlink(tmp_.path().c_str());
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Open(o, &pool).ok());
    ListRoot *first, *second;
    ASSERT_TRUE(pool->CreateList(kListMemtable, &first).ok());
    ASSERT_TRUE(pool->CreateList(kListMemtable, &second).ok());
    char* begin;
    size_t len;
    // This thread fills a quarter of the pool (the first memtable) and
    // stays alive, with its arena, through the rest.
    int first_chunks = 0;
    while (static_cast<uint64_t>(first_chunks) * chunk < (8ull << 20) &&
           pool->NewChunk(first->list_id, 1, ChunkFit::kAtLeast, false, &begin,
                          &len)
               .ok()) {
      first_chunks++;
    }
    // A writer of the second memtable fills the rest, waits for the flush
    // of the first, then allocates again on the same thread.
    std::atomic<int> phase{0};
    int second_chunks = 0, again = 0;
    Status s;
    std::thread writer([&] {
      char* b;
      size_t l;
      while (
          pool->NewChunk(second->list_id, 1, ChunkFit::kAtLeast, true, &b, &l)
              .ok()) {
        second_chunks++;
      }
      phase.store(1, std::memory_order_release);
      while (phase.load(std::memory_order_acquire) != 2)
        std::this_thread::yield();
      for (int i = 0; i < first_chunks; i++) {
        s = pool->NewChunk(second->list_id, 1, ChunkFit::kAtLeast, true, &b,
                           &l);
        if (!s.ok()) break;
        again++;
      }
    });
    while (phase.load(std::memory_order_acquire) != 1)
      std::this_thread::yield();
    pool->DropList(first);  // the flush, on this thread
    phase.store(2, std::memory_order_release);
    writer.join();
    EXPECT_GE(first_chunks, 8);
    EXPECT_GT(second_chunks, 8);
    EXPECT_EQ(again, first_chunks)
        << s.ToString() << ": " << again << " of the " << first_chunks
        << " freed chunks reused";
  }
}

// A process may ask libpmemobj for one global arena per pool
// (heap.arenas_assignment_type=global, e.g. through PMEMOBJ_CONF). Then the
// pool must not assign arenas per thread: libpmemobj would take its global
// arena pointer for a thread-local key and overwrite another library's
// thread-local value (libpmem's), which crashed the process at exit.
TEST_F(PoolTest, GlobalArenaAssignmentLeavesThreadLocalsAlone) {
  auto round = [this] {
    std::unique_ptr<Pool> pool = OpenPool();
    ASSERT_NE(pool, nullptr);
    ListRoot* l;
    ASSERT_TRUE(pool->CreateList(kListMemtable, &l).ok());
    char* begin;
    size_t len;
    for (int i = 0; i < 20; i++) {
      ASSERT_TRUE(
          pool->NewChunk(l->list_id, 1, ChunkFit::kAtLeast, false, &begin, &len)
              .ok());
    }
    pool->DropList(l);
  };
  // One round with the default assignment first: libpmem and libpmemobj
  // set their own thread-local values on first use.
  ASSERT_NO_FATAL_FAILURE(round());
  enum pobj_arenas_assignment_type global = POBJ_ARENAS_ASSIGNMENT_GLOBAL;
  enum pobj_arenas_assignment_type thread_key =
      POBJ_ARENAS_ASSIGNMENT_THREAD_KEY;
  ASSERT_EQ(pmemobj_ctl_set(nullptr, "heap.arenas_assignment_type", &global),
            0);
  // With the global assignment libpmemobj creates no thread-local key, so
  // no thread-local value of this thread may change.
  constexpr pthread_key_t kKeys = 256;
  std::vector<void*> before(kKeys);
  for (pthread_key_t k = 0; k < kKeys; k++) before[k] = pthread_getspecific(k);
  for (int i = 0; i < 3; i++) ASSERT_NO_FATAL_FAILURE(round());
  int changed = 0;
  for (pthread_key_t k = 0; k < kKeys; k++) {
    if (pthread_getspecific(k) != before[k]) changed++;
  }
  ASSERT_EQ(
      pmemobj_ctl_set(nullptr, "heap.arenas_assignment_type", &thread_key), 0);
  EXPECT_EQ(changed, 0) << "a thread-local value was overwritten";
}

TEST_F(PoolTest, BadOptions) {
  std::unique_ptr<Pool> pool;
  PoolOptions o = Options();
  o.path = "";
  EXPECT_TRUE(Pool::Open(o, &pool).IsInvalidArgument());
  o = Options();
  o.chunk_size = 100;
  EXPECT_TRUE(Pool::Open(o, &pool).IsInvalidArgument());
  o = Options();
  o.size = 1 << 20;  // below libpmemobj's minimum
  Status s = Pool::Open(o, &pool);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  o = Options();
  o.path = test::TestDir() + "/no-such-dir-flintkv/pool";
  s = Pool::Open(o, &pool);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(o.path), std::string::npos) << s.ToString();
  EXPECT_EQ(pool, nullptr);
  EXPECT_TRUE(log_.empty()) << "a failed open logged: " << log_[0];
}

TEST_F(PoolTest, EmulatedNoticeOncePerOpen) {
  std::unique_ptr<Pool> pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  const bool is_pmem = pool->is_pmem();
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_NE(log_[0].find(tmp_.path()), std::string::npos) << log_[0];
  if (!pool->is_pmem()) {
    EXPECT_NE(log_[0].find("emulated"), std::string::npos) << log_[0];
  }
  // Working with the pool logs nothing more.
  ListRoot* l;
  ASSERT_TRUE(pool->CreateList(kListStandalone, &l).ok());
  char* begin;
  size_t len;
  ASSERT_TRUE(pool->NewChunk(l->list_id, 1, pmem::ChunkFit::kAtLeast, false,
                             &begin, &len)
                  .ok());
  pool->Lists();
  pool->BytesInUse();
  EXPECT_EQ(log_.size(), 1u);
  pool.reset();
  EXPECT_EQ(log_.size(), 1u);
  pool = OpenPool();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(log_.size(), 2u);  // once more for the second open
  pool.reset();

  // Through the Store: one notice per Store::Open as well, none per write.
  test::TempPool store_pool;
  StoreOptions so = test::QuietStoreOptions(store_pool.path());
  std::vector<std::string> store_log;
  so.pool.info_log = [&](const std::string& m) { store_log.push_back(m); };
  for (int round = 1; round <= 2; round++) {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(so, &store).ok());
    for (int i = 0; i < 100; i++) {
      ASSERT_TRUE(store->Put("k" + std::to_string(i), "v").ok());
    }
    EXPECT_EQ(store_log.size(), static_cast<size_t>(round));
    EXPECT_EQ(store->GetStats().emulated_pmem, !is_pmem);
  }
}

// A fake `pmempool` first in PATH for one test; PATH and the variables set
// with Setenv are restored afterwards.
class FakePmempool {
 public:
  explicit FakePmempool(const std::string& script) {
    dir_ =
        test::TestDir() + "/flintkv_fake_pmempool_" + std::to_string(getpid());
    mkdir(dir_.c_str(), 0755);
    std::string exe = dir_ + "/pmempool";
    EXPECT_TRUE(test::WriteFile(exe, "#!/bin/sh\n" + script + "\n"));
    chmod(exe.c_str(), 0755);
    Setenv("PATH", dir_ + ":" + std::getenv("PATH"));
  }
  ~FakePmempool() {
    for (auto& [name, old] : saved_) {
      if (old.first) {
        setenv(name.c_str(), old.second.c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
    std::system(("rm -rf " + dir_).c_str());
  }
  void Setenv(const std::string& name, const std::string& value) {
    const char* old = std::getenv(name.c_str());
    if (!saved_.count(name)) saved_[name] = {old != nullptr, old ? old : ""};
    setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::string dir_;
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

// A checker killed by a signal says nothing about the pool: not Corruption
// (a crashing pmempool made valid pools "corrupt").
TEST_F(PoolTest, PmempoolKilledBySignalIsNotCorruption) {
  OpenPool().reset();  // a valid pool to reopen
  FakePmempool fake("kill -SEGV $$");
  std::unique_ptr<Pool> p;
  Status s = Pool::Open(Options(), &p);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("signal " + std::to_string(SIGSEGV)),
            std::string::npos)
      << s.ToString();
}

// pmempool runs without the host's LD_PRELOAD / LD_AUDIT (a preloaded
// plugin crashed it), with the rest of the environment (PATH found it).
TEST_F(PoolTest, PmempoolDoesNotInheritCodeInjection) {
  OpenPool().reset();
  FakePmempool fake(
      "[ -z \"${LD_PRELOAD+x}${LD_AUDIT+x}\" ] || exit 1\n"
      "[ \"$FLINTKV_KEPT\" = yes ] || exit 1\n"
      "exec /usr/bin/pmempool \"$@\"");
  fake.Setenv("LD_PRELOAD", "/nonexistent/flintkv_probe.so");
  fake.Setenv("LD_AUDIT", "/nonexistent/flintkv_audit.so");
  fake.Setenv("FLINTKV_KEPT", "yes");
  std::unique_ptr<Pool> p;
  Status s = Pool::Open(Options(), &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace
}  // namespace pmem
}  // namespace flintkv

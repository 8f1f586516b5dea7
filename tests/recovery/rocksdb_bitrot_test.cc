// Bit rot in the pool is never served as data. With
// RocksDB's per-key protection on (memtable_protection_bytes_per_key),
// recovery and `flintkv_tool verify` recompute the checksum RocksDB stored
// after each value (recovery/rocksdb_entry_checksum.h) and report a
// mismatch as Corruption naming the list, the node's offset and the key;
// recovery then writes nothing. Before, recovery replayed the flipped value
// with a fresh checksum and Get returned it.
#include <gtest/gtest.h>
#include <libpmemobj.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flintkv/open_db.h"
#include "flintkv/recovery.h"
#include "memtable/list_walk.h"
#include "memtable/rocksdb/pool_session.h"
#include "pmem/persist.h"
#include "recovery/replay.h"
#include "rocksdb_common/memtable_meta.h"
#include "rocksdb_common/watermark.h"
#include "tests/recovery/rocksdb_scenario.h"

namespace flintkv {
namespace {

using test::BaseOptions;
using test::Check;
using test::DbDir;
using test::Key;
using test::PoolDir;

constexpr int kKeys = 100;

std::string Value(int i) { return "value-" + std::to_string(i); }

// Every entry type RocksDB puts in a memtable rep.
void WriteAllTypes(rocksdb::DB* db) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  for (int i = 0; i < kKeys; i++) Check(db->Put(wo, Key(i), Value(i)), "put");
  Check(db->Merge(wo, "m", "op1"), "merge");
  Check(db->Merge(wo, "m", "op2"), "merge");
  Check(db->Delete(wo, "d"), "delete");
  Check(db->Put(wo, "s", "single"), "put");
  Check(db->SingleDelete(wo, "s"), "single delete");
  Check(db->PutEntity(wo, db->DefaultColumnFamily(), "e",
                      {{"c1", "v1"}, {"c2", "v2"}}),
        "put entity");
  Check(db->Put(wo, "empty", ""), "put");
}

rocksdb::Options ProtectedOptions(const std::string& dir, int width) {
  rocksdb::Options o = test::PlainOptions(dir);
  o.memtable_protection_bytes_per_key = width;
  return o;
}

test::Register s1("protected_writes", [](const std::string& d) {
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(ProtectedOptions(d, 8), DbDir(d), &db), "open");
  WriteAllTypes(db);
  test::Die();  // every write unflushed, WAL off: all of it in the pool
});

// Two unflushed memtables (an immutable one and the active one), crash.
test::Register s2("two_unflushed_memtables", [](const std::string& d) {
  test::TwoUnflushedMemtables(d, 100);
  test::Die();
});

// A flushed memtable that an open iterator keeps alive: retired in the
// pool, not yet freed. Newer writes overwrite "k" and delete "gone" and are
// compacted to the bottom (the old versions leave the SST files). Then one
// bit of the retired list's state word flips, and the process dies.
// (A check that kept any damaged list as unflushed would replay "old"
// over "new".)
test::Register s3("retired_pinned_then_flip", [](const std::string& d) {
  rocksdb::DB* db;
  Check(rocksdb::DB::Open(test::PlainOptions(d), DbDir(d), &db), "open");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  Check(db->Put(wo, "k", "old"), "put");
  Check(db->Put(wo, "gone", "deleted-value"), "put");
  rocksdb::Iterator* pin = db->NewIterator(rocksdb::ReadOptions());
  Check(db->Flush(rocksdb::FlushOptions()), "flush");
  Check(db->Put(wo, "k", "new"), "put");
  Check(db->Delete(wo, "gone"), "delete");
  Check(db->Flush(rocksdb::FlushOptions()), "flush");
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  Check(db->CompactRange(co, nullptr, nullptr), "compact");
  std::shared_ptr<rocks::PoolSession> h;
  if (!rocks::PoolSession::OpenExisting(PoolDir(d), &h).ok()) std::abort();
  int flipped = 0;
  PMEMobjpool* pop = pmemobj_pool_by_ptr(h->pool()->root_user_words());
  PMEMoid oid;
  POBJ_FOREACH(pop, oid) {  // Pool::Lists() leaves retired lists out
    if (pmemobj_type_num(oid) != pmem::kTypeList) continue;
    auto* l = reinterpret_cast<pmem::ListRoot*>(
        (reinterpret_cast<uintptr_t>(pmemobj_direct(oid)) + pmem::kCacheLine -
         1) &
        ~uintptr_t{pmem::kCacheLine - 1});
    if (pmem::StateOf(*l) == pmem::kListRetired && l->head.next != 0) {
      l->state_word ^= 1u << 20;
      pmem::PmemPersist::Persist(&l->state_word, sizeof(l->state_word));
      flipped++;
    }
  }
  if (flipped != 1) std::abort();
  (void)pin;
  test::Die();
});

// 200 acknowledged puts through flintkv::OpenDB's wrapper, then a crash.
test::Register s4("wrapper_puts", [](const std::string& d) {
  rocksdb::Options o = BaseOptions();
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  Check(OpenDB(o, DbDir(d), {{rocksdb::kDefaultColumnFamilyName, o}}, &h, &db,
               test::Ro(d)),
        "open");
  rocksdb::WriteOptions wo;
  for (int i = 0; i < 200; i++) Check(db->Put(wo, Key(i), Value(i)), "put");
  test::Die();
});

const int kChild = test::RunScenarioIfChild();

std::shared_ptr<rocks::PoolSession> OpenPool(const std::string& dir) {
  std::shared_ptr<rocks::PoolSession> h;
  Status s = rocks::PoolSession::OpenExisting(PoolDir(dir), &h);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return h;
}

// Calls f(list, node, entry) on every committed node of every memtable
// list that holds entries.
void ForEachEntry(pmem::Pool* pool,
                  const std::function<void(pmem::ListRoot*, pmem::NvmNode*,
                                           const replay::Entry&)>& f) {
  for (pmem::ListRoot* l : pool->Lists()) {
    if (l->kind != pmem::kListMemtable || l->head.next == 0) continue;
    auto chunks = replay::ChunkRanges(pool, l->list_id);
    Status s = memtable::WalkList(
        *pool, l, nullptr, &chunks,
        [&](const pmem::NvmNode* n) {
          replay::Entry e;
          if (replay::IsCommitted(l, n)) {
            EXPECT_TRUE(replay::DecodeEntry(n, &e));
            f(l, const_cast<pmem::NvmNode*>(n), e);
          }
          return memtable::WalkDecision::kKeep;
        },
        [](uint64_t*) {});
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
}

// A byte of the entry to flip: in the value, or in the key if it has none.
char* Victim(const replay::Entry& e) {
  return const_cast<char*>(e.value.empty() ? e.user_key.data()
                                           : e.value.data());
}

class BitRotTest : public test::ScenarioTest {
 protected:
  int Tool(const std::string& args) {
    return test::RunCommand(std::string(FLINTKV_TOOL) + " " + args,
                            dir_ + "/tool.out");
  }
  // XORs `mask` into the 32-bit word at `offset` of the root of the n-th
  // memtable list holding entries (in list id order), and persists it.
  void Flip(int n, size_t offset, uint32_t mask) {
    auto h = OpenPool(dir_);
    ASSERT_TRUE(h != nullptr);
    std::vector<pmem::ListRoot*> lists;
    for (pmem::ListRoot* l : h->pool()->Lists()) {
      if (l->kind == pmem::kListMemtable && l->head.next != 0) {
        lists.push_back(l);
      }
    }
    ASSERT_LT(n, static_cast<int>(lists.size()));
    auto* word =
        reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(lists[n]) + offset);
    *word ^= mask;
    pmem::PmemPersist::Persist(word, sizeof(*word));
  }
  // Recovers the pool into the DB, then opens the DB.
  void RecoverAndOpen(std::unique_ptr<rocksdb::DB>* db) {
    RecoveryReport rep;
    rocksdb::Status s =
        RecoverDB(BaseOptions(), DbDir(dir_), {}, test::Ro(dir_), &rep);
    ASSERT_TRUE(s.ok()) << s.ToString();
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &raw).ok());
    db->reset(raw);
  }
  // Every key TwoUnflushedMemtables acknowledged is in the recovered DB.
  void ExpectTwoMemtablesRecovered() {
    std::unique_ptr<rocksdb::DB> db;
    ASSERT_NO_FATAL_FAILURE(RecoverAndOpen(&db));
    const std::string count = Get(db.get(), "count");  // in the newer list
    ASSERT_NE(count, "<NotFound: >");
    const int n = std::stoi(count);
    EXPECT_GT(n, 100);
    for (int i = 0; i < n; i++) {
      ASSERT_EQ(Get(db.get(), Key(i)), "v" + Key(i)) << i;
    }
  }
};

constexpr size_t kStateWord = offsetof(pmem::ListRoot, state_word);
constexpr size_t kMetaAt = offsetof(pmem::ListRoot, user);

// One flipped bit in a list's state word made an unflushed memtable read
// "retired": the pool's open freed it and recovery found nothing to replay.
// Now the open corrects the word (and says so: the first verify fails).
TEST_F(BitRotTest, FlippedListStateIsCorrected) {
  ASSERT_NO_FATAL_FAILURE(test::RunChild("two_unflushed_memtables", dir_));
  // Sealed (2) with bit 0 flipped, and active (1) with bit 1, read 3.
  ASSERT_NO_FATAL_FAILURE(Flip(0, kStateWord, 1));
  ASSERT_NO_FATAL_FAILURE(Flip(1, kStateWord, 2));
  // The open that finds a damaged word (here verify's, for the second list)
  // reports it; once corrected, the pool verifies clean.
  EXPECT_EQ(Tool("verify --pool_dir=" + PoolDir(dir_)), 1);
  EXPECT_EQ(Tool("verify --pool_dir=" + PoolDir(dir_)), 0);
  ExpectTwoMemtablesRecovered();
}

// A retired list's flipped state word stays "retired" (corrected, freed):
// replayed as unflushed, its old entries came back over newer writes that
// compaction had put in place of them.
TEST_F(BitRotTest, FlippedRetiredStateStaysRetired) {
  ASSERT_NO_FATAL_FAILURE(test::RunChild("retired_pinned_then_flip", dir_));
  std::unique_ptr<rocksdb::DB> db;
  ASSERT_NO_FATAL_FAILURE(RecoverAndOpen(&db));
  EXPECT_EQ(Get(db.get(), "k"), "new");
  EXPECT_EQ(Get(db.get(), "gone"), "<NotFound: >");
}

// One flipped bit in the column family id discarded the list as a dropped
// family's; in the batch record, recovery took every entry for part of an
// unfinished batch and dropped it (verify said OK); two in the recovery
// mark are beyond correction. Each is refused with the list left as it is,
// and the same pool recovers everything once the bits are put back. One
// flipped bit in the recovery mark (which made recovery drop every newer
// list as copies) is corrected.
TEST_F(BitRotTest, FlippedMemtableMetaIsRefusedNotTrusted) {
  const size_t kMark = kMetaAt + offsetof(rocks::MemtableMeta, recovery_state);
  const size_t kCf = kMetaAt + offsetof(rocks::MemtableMeta, column_family_id);
  const size_t kBatch = offsetof(pmem::ListRoot, batch_mode);
  ASSERT_NO_FATAL_FAILURE(test::RunChild("two_unflushed_memtables", dir_));
  struct Case {
    size_t offset;
    uint32_t mask;
    const char* what;
  };
  for (Case c : {Case{kCf, 1, "column family"}, Case{kBatch, 1, "batch record"},
                 Case{kMark, (1u << 0) | (1u << 21), "recovery mark"}}) {
    SCOPED_TRACE(c.what);
    ASSERT_NO_FATAL_FAILURE(Flip(0, c.offset, c.mask));
    RecoveryReport rep;
    rocksdb::Status s =
        RecoverDB(BaseOptions(), DbDir(dir_), {}, test::Ro(dir_), &rep);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.ToString().find(c.what), std::string::npos) << s.ToString();
    EXPECT_NE(s.ToString().find("left as it is"), std::string::npos);
    EXPECT_EQ(rep.entries_replayed, 0u);
    EXPECT_EQ(rep.lists_copies_dropped, 0u);
    EXPECT_EQ(Tool("verify --pool_dir=" + PoolDir(dir_)), 1);
    ASSERT_NO_FATAL_FAILURE(Flip(0, c.offset, c.mask));  // put back
  }
  ASSERT_NO_FATAL_FAILURE(Flip(0, kMark, 1));  // reads "replay pending"
  ExpectTwoMemtablesRecovered();
}

// One flipped bit in the pool root's recovery record (0 -> 1, "R = 0")
// made recovery drop every list as already flushed, and one in the
// published watermark W dropped acknowledged writes as above it, silently
// (verify said OK). Both words are checked now: recovery refuses, naming
// the override that ignores the word, and verify fails; with the override
// everything acknowledged is recovered.
TEST_F(BitRotTest, FlippedRootWordsAreRefused) {
  struct Case {
    const char* scenario;
    int word;
    uint64_t mask;
    const char* override_flag;
    std::function<void(RecoveryOptions*)> set_override;
  };
  const Case cases[] = {
      {"two_unflushed_memtables", 2, 1, "--allow_older_db",
       [](RecoveryOptions* ro) { ro->allow_older_db = true; }},
      {"wrapper_puts", 0, 1ull << 7, "--watermark=off",  // W >= 200: bit 7
       [](RecoveryOptions* ro) { ro->watermark = WatermarkMode::kOff; }}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    std::system(("rm -rf " + dir_).c_str());
    ASSERT_NO_FATAL_FAILURE(test::RunChild(c.scenario, dir_));
    {
      auto h = OpenPool(dir_);
      ASSERT_TRUE(h != nullptr);
      uint64_t* w = &h->pool()->root_user_words()[c.word];
      *w ^= c.mask;
      pmem::PmemPersist::Persist(w, sizeof(*w));
    }
    EXPECT_EQ(Tool("verify --pool_dir=" + PoolDir(dir_)), 1);
    RecoveryReport rep;
    RecoveryOptions ro = test::Ro(dir_);
    rocksdb::Status s = RecoverDB(BaseOptions(), DbDir(dir_), {}, ro, &rep);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.ToString().find(c.override_flag), std::string::npos);
    EXPECT_EQ(rep.entries_replayed, 0u);
    c.set_override(&ro);
    s = RecoverDB(BaseOptions(), DbDir(dir_), {}, ro, &rep);
    ASSERT_TRUE(s.ok()) << s.ToString();
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    if (c.word == 0) {  // wrapper_puts
      for (int i = 0; i < 200; i++) EXPECT_EQ(Get(db.get(), Key(i)), Value(i));
      continue;
    }
    const std::string count = Get(db.get(), "count");
    ASSERT_NE(count, "<NotFound: >");
    for (int i = 0; i < std::stoi(count); i++) {
      ASSERT_EQ(Get(db.get(), Key(i)), "v" + Key(i)) << i;
    }
  }
}

// One flipped bit in a word nobody reads is no refusal: W after a clean
// close (the switch off), or the mark that says W and R are checked (it is
// read within three bits, and rewritten). Both refused recovery, the mark
// with two overrides, one of which gives up batch atomicity.
TEST_F(BitRotTest, OneFlipInAnUnreadRootWordIsNoRefusal) {
  rocksdb::Options o = BaseOptions();
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  auto open = [&](rocksdb::DB** db) {
    rocksdb::Status s =
        OpenDB(o, DbDir(dir_), {{rocksdb::kDefaultColumnFamilyName, o}}, &hs,
               db, test::Ro(dir_));
    ASSERT_TRUE(s.ok()) << s.ToString();
  };
  auto close = [&](rocksdb::DB* db) {
    for (auto* c : hs) db->DestroyColumnFamilyHandle(c);
    hs.clear();
    delete db;
  };
  auto flip = [&](int word, uint64_t mask) {
    auto h = OpenPool(dir_);
    ASSERT_TRUE(h != nullptr);
    uint64_t* w = &h->pool()->root_user_words()[word];
    *w ^= mask;
    pmem::PmemPersist::Persist(w, sizeof(*w));
  };
  {
    SCOPED_TRACE("W after a clean close");
    rocksdb::DB* db = nullptr;
    ASSERT_NO_FATAL_FAILURE(open(&db));
    for (int i = 0; i < 200; i++) {
      ASSERT_TRUE(db->Put({}, Key(i), Value(i)).ok());
    }
    close(db);
    ASSERT_NO_FATAL_FAILURE(flip(0, 1ull << 3));
    EXPECT_EQ(Tool("verify --pool_dir=" + PoolDir(dir_)), 0);
    ASSERT_NO_FATAL_FAILURE(open(&db));
    for (int i = 0; i < 200; i++) EXPECT_EQ(Get(db, Key(i)), Value(i));
    close(db);
  }
  std::system(("rm -rf " + dir_).c_str());
  {
    SCOPED_TRACE("the checked-words mark");
    ASSERT_NO_FATAL_FAILURE(test::RunChild("wrapper_puts", dir_));
    ASSERT_NO_FATAL_FAILURE(flip(3, 1ull << 9));
    EXPECT_EQ(Tool("verify --pool_dir=" + PoolDir(dir_)), 0);
    rocksdb::DB* db = nullptr;
    ASSERT_NO_FATAL_FAILURE(open(&db));  // recovers, watermark honoured
    for (int i = 0; i < 200; i++) EXPECT_EQ(Get(db, Key(i)), Value(i));
    close(db);
    auto h = OpenPool(dir_);
    EXPECT_EQ(h->pool()->root_user_words()[3], kRootWordsChecked);
  }
}

// Every one-bit flip of a checked sequence word is found: it is no checked
// word of any value, or (bit 63 of a word whose parity bits are all 0) a
// bare word of the same value.
TEST_F(BitRotTest, EveryOneBitFlipOfASequenceWordIsFound) {
  const uint64_t kMask = (uint64_t{1} << 56) - 1;
  for (uint64_t v :
       {uint64_t{1}, uint64_t{200}, uint64_t{0x40000012345}, kMask}) {
    const uint64_t w = EncodeSeqWord(v);
    ASSERT_EQ(w & kMask, v);
    for (int bit = 0; bit < 64; bit++) {
      const uint64_t f = w ^ (uint64_t{1} << bit);
      if (f >> 56 == 0) {
        EXPECT_EQ(f, v) << v << " bit " << bit;
      } else {
        EXPECT_NE(f, EncodeSeqWord(f & kMask)) << v << " bit " << bit;
      }
    }
  }
}

// Every one-bit flip of the checked meta fields is found, and of the
// recovery mark corrected.
TEST_F(BitRotTest, EveryOneBitFlipOfMemtableMetaIsFound) {
  rocks::MemtableMeta m{};
  m.magic = rocks::kMemtableMetaMagic;
  m.column_family_id = 3;
  m.created_micros = 1795000000000000ull;
  m.incarnation = 0x1234567890abcdefull;
  m.family = 0x0fedcba987654321ull;
  m.db_id_hash = 0x5555aaaa5555aaaaull;
  rocks::SealMeta(&m);
  ASSERT_STREQ(rocks::MetaDamage(m), "");
  ASSERT_FALSE(rocks::ReplayPending(m));
  auto* bytes = reinterpret_cast<unsigned char*>(&m);
  const size_t copy_spans = offsetof(rocks::MemtableMeta, copy_spans);
  const size_t floor = offsetof(rocks::MemtableMeta, flushed_floor);
  const size_t mark = offsetof(rocks::MemtableMeta, recovery_state);
  for (uint32_t st : {0u, rocks::kReplayPending}) {
    m.recovery_state = pmem::CheckedWord(st, rocks::kRecoveryStateSalt);
    for (size_t byte = 0; byte < sizeof(m); byte++) {
      // Not checked: the copy spans and the flushed floor change at run
      // time (docs/rocksdb_recovery.md, "Limits that remain").
      if ((byte >= copy_spans && byte < copy_spans + sizeof(m.copy_spans)) ||
          (byte >= floor && byte < floor + sizeof(m.flushed_floor))) {
        continue;
      }
      const bool in_mark = byte >= mark && byte < mark + 4;
      for (int bit = 0; bit < 8; bit++) {
        bytes[byte] ^= 1u << bit;
        if (in_mark) {
          EXPECT_STREQ(rocks::MetaDamage(m), "") << byte << "." << bit;
          EXPECT_EQ(rocks::ReplayPending(m), st == rocks::kReplayPending);
        } else {
          EXPECT_STRNE(rocks::MetaDamage(m), "") << byte << "." << bit;
        }
        bytes[byte] ^= 1u << bit;
      }
    }
  }
  EXPECT_GE(__builtin_popcount(pmem::CheckedWord(0, rocks::kRecoveryStateSalt) ^
                               pmem::CheckedWord(1, rocks::kRecoveryStateSalt)),
            5);
}

// The checksums a real DB stored, at every width, for every entry type:
// the verifier accepts each, and rejects each entry with one bit flipped,
// as RocksDB's own Get does.
TEST_F(BitRotTest, VerifierAgreesWithRocksDb) {
  for (int width : {0, 1, 2, 4, 8}) {
    SCOPED_TRACE("memtable_protection_bytes_per_key=" + std::to_string(width));
    std::system(("rm -rf " + dir_).c_str());
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(
        rocksdb::DB::Open(ProtectedOptions(dir_, width), DbDir(dir_), &raw)
            .ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    WriteAllTypes(db.get());
    auto h = OpenPool(dir_);  // the DB's own pool (one open per process)
    pmem::Pool* pool = h->pool();
    int entries = 0, rejected = 0;
    ForEachEntry(
        pool, [&](pmem::ListRoot* l, pmem::NvmNode* n, const replay::Entry& e) {
          entries++;
          EXPECT_EQ(e.protection.size(), static_cast<size_t>(width));
          replay::Entry d;
          EXPECT_EQ(replay::CheckEntry(*pool, l, n, &d), "");
          *Victim(e) ^= 0x10;
          std::string problem = replay::CheckEntry(*pool, l, n, &d);
          if (!problem.empty()) {
            rejected++;
            EXPECT_NE(problem.find("list " + std::to_string(l->list_id) +
                                   ", node at offset " +
                                   std::to_string(pool->ToOffset(n))),
                      std::string::npos)
                << problem;
          }
          *Victim(e) ^= 0x10;
        });
    EXPECT_EQ(entries, kKeys + 7);
    EXPECT_EQ(rejected, width == 0 ? 0 : entries);  // width 0: no checksum
    for (pmem::ListRoot* l : pool->Lists()) {
      if (l->kind == pmem::kListMemtable) {
        EXPECT_TRUE(replay::CheckList(pool, l, width).ok());
      }
    }
    if (width == 0) continue;
    // RocksDB's own check (MemTable::Get) on the same flipped byte.
    ForEachEntry(pool, [&](pmem::ListRoot*, pmem::NvmNode*,
                           const replay::Entry& e) {
      if (e.user_key != Key(7)) return;
      std::string v;
      *Victim(e) ^= 0x10;
      EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), Key(7), &v).IsCorruption());
      *Victim(e) ^= 0x10;
      EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), Key(7), &v).ok());
      EXPECT_EQ(v, Value(7));
    });
  }
}

// One flipped bit in a value left by a crashed process: verify exits 1
// naming list, offset and key; recovery fails with Corruption saying the
// same and writes nothing; with the bit restored it recovers everything.
TEST_F(BitRotTest, RecoveryAndVerifyRefuseAFlippedBit) {
  ASSERT_NO_FATAL_FAILURE(test::RunChild("protected_writes", dir_));
  std::string where;
  char* victim = nullptr;
  auto h = OpenPool(dir_);
  ForEachEntry(h->pool(), [&](pmem::ListRoot* l, pmem::NvmNode* n,
                              const replay::Entry& e) {
    if (e.user_key != Key(42)) return;
    where = "list " + std::to_string(l->list_id) + ", node at offset " +
            std::to_string(h->pool()->ToOffset(n)) + ", key '" + Key(42) + "'";
    victim = Victim(e);
  });
  ASSERT_NE(victim, nullptr);
  *victim ^= 0x01;  // "value-42" -> "walue-42"
  h.reset();        // closes the pool
  EXPECT_EQ(Tool("verify --pool_dir=" + PoolDir(dir_)), 1);
  std::string out = test::ReadFile(dir_ + "/tool.out");
  EXPECT_NE(out.find(where), std::string::npos) << out;
  EXPECT_NE(out.find("per-key checksum"), std::string::npos) << out;

  RecoveryReport rep;
  rocksdb::Status s =
      RecoverDB(BaseOptions(), DbDir(dir_), {}, test::Ro(dir_), &rep);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find(where), std::string::npos) << s.ToString();
  EXPECT_EQ(rep.entries_replayed, 0u);
  {
    // Nothing of the pool reached the DB. A read-only open: a read-write
    // one without FlintKV would count as a foreign open (S3).
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(
        rocksdb::DB::OpenForReadOnly(BaseOptions(), DbDir(dir_), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(rocksdb::ReadOptions()));
    it->SeekToFirst();
    EXPECT_FALSE(it->Valid()) << "found " << it->key().ToString();
    EXPECT_EQ(Get(db.get(), Key(42)), "<NotFound: >");
  }

  h = OpenPool(dir_);
  ASSERT_TRUE(h != nullptr);
  victim = nullptr;  // the pool may be mapped elsewhere now: find it again
  ForEachEntry(h->pool(),
               [&](pmem::ListRoot*, pmem::NvmNode*, const replay::Entry& e) {
                 if (e.user_key == Key(42)) victim = Victim(e);
               });
  ASSERT_NE(victim, nullptr);
  *victim ^= 0x01;
  h.reset();
  EXPECT_EQ(Tool("verify --pool_dir=" + PoolDir(dir_)), 0);
  s = RecoverDB(BaseOptions(), DbDir(dir_), {}, test::Ro(dir_), &rep);
  ASSERT_TRUE(s.ok()) << s.ToString();
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  for (int i = 0; i < kKeys; i++) EXPECT_EQ(Get(db.get(), Key(i)), Value(i));
  EXPECT_EQ(Get(db.get(), "m"), "op1,op2");
}

// One flipped bit in the pool root's recovery record (user[2] = R + 1, set
// while a recovery that flushed up to R drops its lists) made recovery drop
// every list as "already flushed", losing all of them. R above the DB's last
// sequence cannot be this DB's completed flush: refused, the override
// replays.
TEST_F(BitRotTest, FlippedRecoveryRecordIsRefusedNotTrusted) {
  ASSERT_NO_FATAL_FAILURE(test::RunChild("protected_writes", dir_));
  {
    auto h = OpenPool(dir_);
    ASSERT_TRUE(h != nullptr);
    uint64_t* r_word = &h->pool()->root_user_words()[2];
    ASSERT_EQ(*r_word, 0u);
    *r_word ^= 1ull << 40;
    pmem::PmemPersist::Persist(r_word, sizeof(*r_word));
  }
  RecoveryReport rep;
  rocksdb::Status s =
      RecoverDB(BaseOptions(), DbDir(dir_), {}, test::Ro(dir_), &rep);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("allow_older_db"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(rep.entries_replayed, 0u);
  RecoveryOptions ro = test::Ro(dir_);
  ro.allow_older_db = true;
  s = RecoverDB(BaseOptions(), DbDir(dir_), {}, ro, &rep);
  ASSERT_TRUE(s.ok()) << s.ToString();
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(BaseOptions(), DbDir(dir_), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  for (int i = 0; i < kKeys; i++) EXPECT_EQ(Get(db.get(), Key(i)), Value(i));
}

}  // namespace
}  // namespace flintkv

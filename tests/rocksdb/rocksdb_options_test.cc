// The "flintkv" factory's options: bad option strings and foreign pool
// files fail with a clear Status (no crash), a pool too small for the
// configured memtables is refused at DB::Open, and good options round-trip
// through RocksDB's OPTIONS file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/options.h"
#include "rocksdb/utilities/options_util.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace {

namespace fs = std::filesystem;
using rocksdb::WriteOptions;
using test::TempDir;

// Option strings: bad ones fail with a non-OK Status (no crash); good ones
// round-trip through the OPTIONS file.
TEST(FlintOptionsTest, BadOptionStringsFailCleanly) {
  TempDir dir("opts");
  const std::string pool_dir = dir.path() + "/pool";
  rocksdb::ConfigOptions co;
  co.ignore_unsupported_options = false;
  auto create = [&](const std::string& s) {
    std::unique_ptr<rocksdb::MemTableRepFactory> f;
    rocksdb::Status st =
        rocksdb::MemTableRepFactory::CreateFromString(co, s, &f);
    if (st.ok() && !f) st = rocksdb::Status::Aborted("no factory");
    return st;
  };
  const std::string ok = "id=flintkv;pool_dir=" + pool_dir + ";pool_size=64M";
  EXPECT_TRUE(create(ok).ok()) << create(ok).ToString();
  // Each of these must fail.
  const std::vector<std::string> bad = {
      "id=flintkv;pool_dir=" + pool_dir + ";foo=1",  // unknown key
      "id=flintkv;pool_dir=" + pool_dir + ";latency_model=fast",
      "id=flintkv;pool_dir=" + pool_dir + ";pool_size=abc",
      "id=flintkv;pool_dir=" + pool_dir + ";chunk_size=1",
      "id=flintkv;pool_dir=/proc/flintkv_no_such_dir",
      "flintkv;pool_dir=" + pool_dir,  // no id=
  };
  for (const std::string& s : bad) {
    rocksdb::Status st = create(s);
    EXPECT_FALSE(st.ok()) << s;
  }
  // A refused string creates no pool: RocksDB prepares a copy of the factory
  // reset to its defaults, pool_dir still set, and that made a default-size
  // (4 GiB) pool file.
  const std::string fresh = dir.path() + "/fresh";
  for (const char* tail : {";foo=1", ";pool_size=0", ";pool_size=1M",
                           ";chunk_size=1", ";latency_model=fast"}) {
    EXPECT_FALSE(create("id=flintkv;pool_dir=" + fresh + tail).ok()) << tail;
    EXPECT_FALSE(fs::exists(fresh + "/flintkv.pool")) << tail;
  }
  // Without a pool_dir the factory parses (an OPTIONS file names it without
  // one, and tools that load it put their own factory in), but DB::Open
  // refuses it and says what is missing.
  for (const char* s : {"id=flintkv", "id=flintkv;pool_dir="}) {
    std::shared_ptr<rocksdb::MemTableRepFactory> f;
    ASSERT_TRUE(rocksdb::MemTableRepFactory::CreateFromString(co, s, &f).ok())
        << s;
    rocksdb::Options o;
    o.create_if_missing = true;
    o.memtable_factory = f;
    rocksdb::DB* db = nullptr;
    rocksdb::Status st = rocksdb::DB::Open(o, dir.path() + "/nopool_db", &db);
    EXPECT_FALSE(st.ok()) << s;
    EXPECT_NE(st.ToString().find("pool_dir is required"), std::string::npos)
        << st.ToString();
    delete db;
  }
  // Foreign files where the pool should be.
  struct Foreign {
    std::string name;
    std::string content;
  };
  for (const Foreign& f : {Foreign{"empty", ""}, Foreign{"small", "not a pool"},
                           Foreign{"garbage", std::string(16 << 20, 'x')}}) {
    std::string d = dir.path() + "/foreign_" + f.name;
    fs::create_directories(d);
    {
      std::ofstream out(d + "/flintkv.pool", std::ios::binary);
      out << f.content;
    }
    rocksdb::Status st = create("id=flintkv;pool_dir=" + d);
    EXPECT_FALSE(st.ok()) << f.name;
    std::shared_ptr<rocksdb::MemTableRepFactory> fac;
    MemTableOptions mo;
    mo.pool_dir = d;
    EXPECT_FALSE(NewMemTableRepFactory(mo, &fac).ok()) << f.name;
    EXPECT_EQ(nullptr, fac);
  }
  // pool_dir is a regular file.
  {
    std::ofstream(dir.path() + "/plainfile") << "x";
    EXPECT_FALSE(
        create("id=flintkv;pool_dir=" + dir.path() + "/plainfile").ok());
  }
}

TEST(FlintOptionsTest, OptionsFileRoundTripAndValidation) {
  TempDir dir("optfile");
  const std::string pool_dir = dir.path() + "/pool";
  rocksdb::ConfigOptions co;
  std::shared_ptr<rocksdb::MemTableRepFactory> f;
  ASSERT_TRUE(rocksdb::MemTableRepFactory::CreateFromString(
                  co,
                  "id=flintkv;pool_dir=" + pool_dir +
                      ";pool_size=64M;chunk_size=128K;latency_model=off",
                  &f)
                  .ok());
  ASSERT_NE(nullptr, f);
  EXPECT_TRUE(f->IsInsertConcurrentlySupported());
  rocksdb::Options o;
  o.create_if_missing = true;
  o.memtable_factory = f;
  // 64M pool cannot hold 3 memtables of 64 MiB: DB::Open says so, and
  // creates no pool (it would fix the size for the retry).
  o.write_buffer_size = 64 << 20;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, dir.path() + "/db", &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(nullptr, db);
  EXPECT_FALSE(fs::exists(pool_dir + "/flintkv.pool"));
  o.write_buffer_size = 1 << 20;
  s = rocksdb::DB::Open(o, dir.path() + "/db", &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  WriteOptions wo;
  wo.disableWAL = true;
  ASSERT_TRUE(db->Put(wo, "k", "v").ok());
  // The OPTIONS file names the factory and its options; loading it back
  // builds a working factory (alias FlintKVFactory).
  rocksdb::DBOptions dbo;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfds;
  rocksdb::ConfigOptions lo;
  lo.ignore_unsupported_options = false;
  s = rocksdb::LoadLatestOptions(lo, dir.path() + "/db", &dbo, &cfds);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(1u, cfds.size());
  ASSERT_NE(nullptr, cfds[0].options.memtable_factory);
  EXPECT_STREQ("FlintKVFactory", cfds[0].options.memtable_factory->Name());
  std::string opts = cfds[0].options.memtable_factory->ToString(lo);
  EXPECT_NE(std::string::npos, opts.find(pool_dir)) << opts;
  delete db;
  // Reopen from the loaded options.
  rocksdb::Options o2(dbo, cfds[0].options);
  s = rocksdb::DB::Open(o2, dir.path() + "/db", &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string v;
  ASSERT_TRUE(db->Get({}, "k", &v).ok());
  EXPECT_EQ("v", v);
  delete db;
}

}  // namespace
}  // namespace flintkv

// Opens a RocksDB with the FlintKV memtable and the WAL off, writes, reads
// back, closes, then runs recovery (nothing to recover after a clean
// close). Prints "consumer: ok" on success; exit 1 otherwise.
//   consumer DIR
#include <cstdio>
#include <memory>
#include <string>

#include "flintkv/recovery.h"
#include "flintkv/rocksdb_memtable.h"
#include "flintkv/version.h"
#include "rocksdb/db.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  flintkv::MemTableOptions mo;
  mo.pool_dir = dir + "/pool";
  mo.pool_size = 256ull << 20;
  std::shared_ptr<rocksdb::MemTableRepFactory> factory;
  rocksdb::Status s = flintkv::NewMemTableRepFactory(mo, &factory);
  rocksdb::Options o;
  o.create_if_missing = true;
  o.memtable_factory = factory;
  rocksdb::DB* db = nullptr;
  if (s.ok()) s = rocksdb::DB::Open(o, dir + "/db", &db);
  std::string v;
  if (s.ok()) {
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    s = db->Put(wo, "key", "value");
  }
  if (s.ok()) s = db->Get(rocksdb::ReadOptions(), "key", &v);
  if (s.ok() && v != "value") s = rocksdb::Status::Corruption("read " + v);
  if (db) {
    rocksdb::Status c = db->Close();
    if (s.ok()) s = c;
    delete db;
  }
  if (s.ok()) {
    flintkv::RecoveryOptions ro;
    ro.memtable = mo;
    rocksdb::Options plain;  // recovery sets the factory itself
    s = flintkv::RecoverDB(plain, dir + "/db", {}, ro, nullptr);
  }
  std::printf("consumer: %s (FlintKV %s)\n",
              s.ok() ? "ok" : s.ToString().c_str(), FLINTKV_VERSION_STRING);
  return s.ok() ? 0 : 1;
}

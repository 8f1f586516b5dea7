#include "memtable/rocksdb/db_binding.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "flintkv/rocksdb_memtable.h"
#include "rocksdb/convenience.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"
#include "rocksdb/utilities/object_registry.h"
#include "rocksdb/utilities/options_util.h"

namespace flintkv {
namespace rocks {
namespace {

// FNV-1a; 0 is kept for "unknown".
uint64_t HashId(const std::string& id) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h ? h : 1;
}

std::string ReadIdentity(const std::string& db_path) {
  std::ifstream in(db_path + "/IDENTITY");
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string id = ss.str();
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ' ||
                         id.back() == '\r' || id.back() == '\t')) {
    id.pop_back();
  }
  return id;
}

}  // namespace

DbBinding ReadDbBinding(const std::string& db_path) {
  DbBinding b;
  b.db_path = db_path;
  std::string id = ReadIdentity(db_path);
  if (!id.empty()) b.db_id_hash = HashId(id);
  rocksdb::Env* env = rocksdb::Env::Default();
  std::string name;
  if (!rocksdb::GetLatestOptionsFileName(db_path, env, &name).ok()) {
    return b;
  }
  b.options_file = db_path + "/" + name;
  rocksdb::ConfigOptions co;
  co.ignore_unknown_options = true;
  co.ignore_unsupported_options = true;
  co.invoke_prepare_options = false;  // opens no pool (a moved DB's is stale)
  co.env = env;
  // The factory by name even where the load-time registration has not run
  // (static initialisation, a build without the registrar).
  co.registry = rocksdb::ObjectRegistry::NewInstance();
  co.registry->AddLibrary("flintkv", RegisterFlintKV, "");
  rocksdb::DBOptions dbo;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  rocksdb::Status s =
      rocksdb::LoadOptionsFromFile(co, b.options_file, &dbo, &cfs);
  if (!s.ok()) {
    b.other_factory = "(unreadable: " + s.ToString() + ")";
    return b;
  }
  b.wal_dir = dbo.wal_dir;
  for (const auto& cf : cfs) {
    const auto& f = cf.options.memtable_factory;
    if (f && std::string(f->Name()) == "FlintKVFactory") {
      std::string v;
      b.options_flintkv = true;
      if (f->GetOption(co, "incarnation", &v).ok()) {
        b.incarnation = std::strtoull(v.c_str(), nullptr, 10);
      }
      if (f->GetOption(co, "family", &v).ok()) {
        b.family = std::strtoull(v.c_str(), nullptr, 10);
      }
      if (f->GetOption(co, "pool_dir", &v).ok()) b.pool_dir = v;
      if (f->GetOption(co, "recovered_upto", &v).ok()) {
        b.recovered_upto = std::strtoull(v.c_str(), nullptr, 10);
      }
      return b;
    }
    if (b.other_factory.empty()) b.other_factory = f ? f->Name() : "none";
  }
  return b;
}

}  // namespace rocks
}  // namespace flintkv

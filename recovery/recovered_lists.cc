#include "recovery/recovered_lists.h"

#include <cstdio>
#include <memory>

#include "rocksdb/env.h"
#include "rocksdb_common/memtable_meta.h"

namespace flintkv {
namespace recovery {

std::string RecordLine(const pmem::Pool* pool, const pmem::ListRoot* l) {
  const rocks::MemtableMeta* m = rocks::MetaOf(l);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%016llx %llu %016llx %llu\n",
                (unsigned long long)pool->pool_uuid_lo(),
                (unsigned long long)l->list_id,
                (unsigned long long)m->incarnation,
                (unsigned long long)m->created_micros);
  return buf;
}

std::string ReadRecordFile(rocksdb::DB* db) {
  std::string data;
  if (!rocksdb::ReadFileToString(db->GetEnv(),
                                 db->GetName() + kRecoveredListsFile, &data)
           .ok()) {
    data.clear();  // none recorded yet
  }
  return data;
}

std::set<std::string> RecordedLines(const std::string& data) {
  std::set<std::string> lines;
  for (size_t at = 0, nl; (nl = data.find('\n', at)) != std::string::npos;
       at = nl + 1) {
    lines.insert(data.substr(at, nl - at + 1));
  }
  return lines;
}

rocksdb::Status RecordRecoveredLists(rocksdb::DB* db,
                                     const std::string& content) {
  rocksdb::Env* env = db->GetEnv();
  const std::string path = db->GetName() + kRecoveredListsFile;
  const std::string tmp = path + ".tmp";
  std::unique_ptr<rocksdb::WritableFile> f;
  rocksdb::Status s = env->NewWritableFile(tmp, &f, rocksdb::EnvOptions());
  if (s.ok()) s = f->Append(content);
  if (s.ok()) s = f->Sync();
  if (s.ok()) s = f->Close();
  if (s.ok()) s = env->RenameFile(tmp, path);
  std::unique_ptr<rocksdb::Directory> dir;
  if (s.ok()) s = env->NewDirectory(db->GetName(), &dir);
  if (s.ok()) s = dir->Fsync();
  return s;
}

}  // namespace recovery
}  // namespace flintkv

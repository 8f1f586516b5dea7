#include "recovery/sequence_clock.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "rocksdb/comparator.h"
#include "rocksdb/env.h"
#include "rocksdb/metadata.h"
#include "rocksdb/options.h"
#include "rocksdb/sst_file_writer.h"
#include "rocksdb_common/crash_point.h"

namespace flintkv {

uint64_t NewestFileSeq(rocksdb::DB* db) {
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  uint64_t newest = 0;
  for (const auto& f : files) newest = std::max(newest, f.largest_seqno);
  return newest;
}

rocksdb::Status RaiseLastSequence(rocksdb::DB* db, uint64_t target,
                                  const std::string& dir) {
  if (db->GetLatestSequenceNumber() >= target) return rocksdb::Status::OK();
  rocksdb::Status s = db->GetEnv()->CreateDirIfMissing(dir);
  if (!s.ok()) return s;
  const std::string name = "clock.sst";
  db->GetEnv()->DeleteFile(dir + "/" + name).PermitUncheckedError();
  // The DB's Env (an encrypted or in-memory one reads the file back), and
  // the bytewise comparator and defaults the clock's column family gets.
  rocksdb::Options o;
  o.env = db->GetEnv();
  rocksdb::SstFileWriter w(rocksdb::EnvOptions(), o);
  s = w.Open(dir + "/" + name);
  if (s.ok()) s = w.Put(kClockKey, "");
  if (s.ok()) s = w.Finish();
  if (!s.ok()) return s;
  rocksdb::ExportImportFilesMetaData meta;
  meta.db_comparator_name = rocksdb::BytewiseComparator()->Name();
  rocksdb::LiveFileMetaData f;
  f.db_path = dir;
  f.name = name;
  f.column_family_name = kClockColumnFamily;
  f.level = 0;
  f.smallest_seqno = target;
  f.largest_seqno = target;
  meta.files.push_back(f);
  rocksdb::ImportColumnFamilyOptions io;
  io.move_files = true;
  rocksdb::ColumnFamilyHandle* h = nullptr;
  s = db->CreateColumnFamilyWithImport(rocksdb::ColumnFamilyOptions(),
                                       kClockColumnFamily, io, meta, &h);
  if (!s.ok()) return s;
  FLINTKV_TEST_CRASH_POINT("recovery_after_clock_import");
  s = db->DropColumnFamily(h);
  db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  if (!s.ok()) return s;
  if (db->GetLatestSequenceNumber() < target) {
    return rocksdb::Status::NotSupported(
        "flintkv: this RocksDB did not raise the last sequence number to " +
        std::to_string(target) + " on a column family import (it is " +
        std::to_string(db->GetLatestSequenceNumber()) + ")");
  }
  return rocksdb::Status::OK();
}

void AddListedClock(const std::vector<std::string>& names,
                    std::vector<rocksdb::ColumnFamilyDescriptor>* cfs) {
  auto is_clock = [](const auto& cf) { return cf.name == kClockColumnFamily; };
  if (std::count(names.begin(), names.end(), kClockColumnFamily) > 0 &&
      std::none_of(cfs->begin(), cfs->end(), is_clock)) {
    cfs->emplace_back(kClockColumnFamily, rocksdb::ColumnFamilyOptions());
  }
}

bool IsLeftoverClock(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf) {
  if (cf->GetName() != kClockColumnFamily) return false;
  // Exactly the one key RaiseLastSequence imports: a user's column family
  // of that name is never taken for it.
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(rocksdb::ReadOptions(), cf));
  it->SeekToFirst();
  if (!it->Valid() || it->key() != kClockKey || !it->value().empty()) {
    return false;
  }
  it->Next();
  return !it->Valid() && it->status().ok();
}

}  // namespace flintkv

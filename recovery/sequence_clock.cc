#include "recovery/sequence_clock.h"

#include <algorithm>

#include "memtable/rocksdb/crash_point.h"
#include "rocksdb/comparator.h"
#include "rocksdb/env.h"
#include "rocksdb/metadata.h"
#include "rocksdb/options.h"
#include "rocksdb/sst_file_writer.h"

namespace flintkv {

rocksdb::Status RaiseLastSequence(rocksdb::DB* db, uint64_t target,
                                  const std::string& dir) {
  if (db->GetLatestSequenceNumber() >= target) return rocksdb::Status::OK();
  rocksdb::Status s = db->GetEnv()->CreateDirIfMissing(dir);
  if (!s.ok()) return s;
  const std::string name = "clock.sst";
  db->GetEnv()->DeleteFile(dir + "/" + name).PermitUncheckedError();
  rocksdb::Options o;  // the bytewise comparator the column family gets
  rocksdb::SstFileWriter w(rocksdb::EnvOptions(), o);
  s = w.Open(dir + "/" + name);
  if (s.ok()) s = w.Put("flintkv-sequence-clock", "");
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

rocksdb::Status DropLeftoverClock(
    rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*>* handles) {
  auto it = std::find_if(handles->begin(), handles->end(), [](auto* h) {
    return h->GetName() == kClockColumnFamily;
  });
  if (it == handles->end()) return rocksdb::Status::OK();
  rocksdb::Status s = db->DropColumnFamily(*it);
  if (!s.ok()) return s;
  db->DestroyColumnFamilyHandle(*it).PermitUncheckedError();
  handles->erase(it);
  return rocksdb::Status::OK();
}

}  // namespace flintkv

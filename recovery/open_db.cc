// flintkv::OpenDB (flintkv/open_db.h): opens the DB with the flintkv
// factory on the pool, recovers its leftovers (RecoverInto) and returns
// the crash-atomic wrapper (recovery/flint_db.h).
// Thread safety: as rocksdb::DB::Open.
#include "flintkv/open_db.h"

#include <memory>
#include <string>
#include <vector>

#include "flintkv/rocksdb_memtable.h"
#include "memtable/rocksdb/recovery_port.h"
#include "recovery/flint_db.h"
#include "recovery/pool_claim.h"
#include "recovery/sequence_clock.h"
#include "rocksdb_common/watermark.h"

namespace flintkv {

using rocks::OpenKind;
using rocks::RecoveryPort;

rocksdb::Status OpenDB(const rocksdb::DBOptions& db_options,
                       const std::string& name,
                       const std::vector<rocksdb::ColumnFamilyDescriptor>& cfs,
                       std::vector<rocksdb::ColumnFamilyHandle*>* handles,
                       rocksdb::DB** dbptr, const RecoveryOptions& o,
                       RecoveryReport* report) {
  *dbptr = nullptr;
  if (db_options.two_write_queues) {
    // With two write queues RocksDB's latest sequence number is not the
    // published one the watermark must bound.
    return rocksdb::Status::NotSupported(
        "flintkv::OpenDB: option two_write_queues is not supported (the "
        "watermark needs LastSequence to cover only finished write groups)");
  }
  // The pool (created for a new DB), claimed for this DB: the wrapper
  // recovers its leftovers at every open (S3 checks they are its own).
  RecoveryPort port;
  rocksdb::Status s = RecoveryPort::Open(o.memtable, &port);
  if (s.ok()) {
    s = port.Claim(name, OpenKind::kRecoverEveryOpen, recovery::OverridesOf(o));
  }
  if (!s.ok()) return s;
  const bool recover = !port.ClaimedLists().empty();
  std::shared_ptr<rocksdb::MemTableRepFactory> factory;
  s = NewMemTableRepFactory(o.memtable, &factory);
  std::vector<rocksdb::ColumnFamilyDescriptor> descs(cfs);
  for (auto& cf : descs) {
    cf.options.memtable_factory = factory;
    // No compaction may rewrite what the presence checks look for.
    if (recover) cf.options.disable_auto_compactions = true;
  }
  // P18: a crash inside the clock's import left its column family.
  std::vector<std::string> names;
  if (rocksdb::DB::ListColumnFamilies(db_options, name, &names).ok()) {
    AddListedClock(names, &descs);
  }
  rocksdb::DB* db = nullptr;
  if (s.ok()) s = rocksdb::DB::Open(db_options, name, descs, handles, &db);
  if (s.ok()) s = RecoverInto(db, *handles, o, report);
  if (s.ok() && handles->size() > cfs.size()) {  // the clock's, now dropped
    db->DestroyColumnFamilyHandle(handles->back()).PermitUncheckedError();
    handles->pop_back();
  }
  for (size_t i = 0; s.ok() && recover && i < handles->size(); i++) {
    if (!cfs[i].options.disable_auto_compactions) {
      s = db->SetOptions((*handles)[i],
                         {{"disable_auto_compactions", "false"}});
    }
  }
  if (!s.ok()) {
    port.ReleaseClaim();
    if (db) {
      for (auto* cf : *handles) db->DestroyColumnFamilyHandle(cf);
      handles->clear();
      delete db;
    }
    return s;
  }
  // New epoch: entries of this run have seq > LastSequence now.
  Watermark wm(port.pool());
  wm.SetPublished(db->GetLatestSequenceNumber());
  wm.Enable();
  *dbptr = NewFlintDB(db, port, factory, *handles);
  return rocksdb::Status::OK();
}

}  // namespace flintkv

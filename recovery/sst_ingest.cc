#include "recovery/sst_ingest.h"

#include <deque>
#include <utility>

#include "rocksdb/env.h"

namespace flintkv {
namespace replay {

SstBuilder::SstBuilder(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                       const std::string& dir, BatchWriter* fallback,
                       RecoveryReport* r)
    : db_(db),
      cf_(cf),
      path_(dir + "/cf" + std::to_string(cf->GetID()) + ".sst"),
      fallback_(fallback),
      r_(r),
      options_(db->GetOptions(cf)),
      merge_(options_.merge_operator.get()) {}

rocksdb::Status SstBuilder::Build(const std::vector<const ListOutput*>& lists,
                                  std::vector<std::string>* files) {
  const rocksdb::Comparator* ucmp = cf_->GetComparator();
  std::vector<size_t> next(lists.size(), 0);  // next key of each list
  std::vector<Entry> key_entries;             // oldest first
  std::vector<size_t> at;                     // lists holding the next key
  while (status_.ok()) {
    // The smallest next key over the lists (few lists: a linear scan).
    at.clear();
    for (size_t l = 0; l < lists.size(); l++) {
      if (next[l] == lists[l]->keys()) continue;
      const rocksdb::Slice k =
          lists[l]->entry(lists[l]->begin(next[l])).user_key;
      int c = at.empty() ? -1
                         : ucmp->Compare(
                               k, lists[at[0]]
                                      ->entry(lists[at[0]]->begin(next[at[0]]))
                                      .user_key);
      if (c < 0) at.clear();
      if (c <= 0) at.push_back(l);
    }
    if (at.empty()) break;
    key_entries.clear();
    for (size_t l : at) {  // oldest list first: `at` is in list order
      for (size_t i = lists[l]->begin(next[l]); i < lists[l]->end(next[l]);
           i++) {
        key_entries.push_back(lists[l]->entry(i));
      }
      next[l]++;
    }
    Fold(key_entries);
  }
  return Finish(files);
}

rocksdb::Status SstBuilder::Finish(std::vector<std::string>* files) {
  if (status_.ok() && writer_) {
    status_ = writer_->Finish();
    if (status_.ok()) {
      files->push_back(path_);
      r_->sst_files++;
    }
  }
  if (status_.ok()) status_ = fallback_->status();
  return status_;
}

void SstBuilder::Fold(const std::vector<Entry>& e) {
  if (!status_.ok()) return;
  // The newest non-Merge entry (the base); entries below it are hidden.
  size_t b = e.size();
  for (size_t i = e.size(); i-- > 0;) {
    if (e[i].type != kTypeMerge) {
      b = i;
      break;
    }
  }
  const rocksdb::Slice key = e.back().user_key;
  if (b + 1 == e.size()) {  // no newer operand
    if (e[b].type == kTypeValue) return Write('P', key, e[b].value);
    if (e[b].type == kTypeDeletion) return Write('D', key, rocksdb::Slice());
    return Fallback(e);  // SingleDelete, PutEntity: no SstFileWriter call
  }
  if (merge_ == nullptr) return Fallback(e);  // the DB write reports it
  operands_.clear();
  for (size_t i = b == e.size() ? 0 : b + 1; i < e.size(); i++) {
    operands_.push_back(e[i].value);
  }
  scratch_.clear();
  if (b < e.size()) {
    if (e[b].type == kTypeWideColumnEntity ||
        e[b].type == kTypeValuePreferredSeqno) {
      return Fallback(e);  // the DB write merges onto them itself
    }
    // A Put, Delete or SingleDelete base: a flush full-merges (MergeHelper
    // with a deletion base passes nullptr).
    const rocksdb::Slice* base =
        e[b].type == kTypeValue ? &e[b].value : nullptr;
    rocksdb::Slice existing_operand(nullptr, 0);  // set if the result is one
    rocksdb::MergeOperator::MergeOperationOutput out(scratch_,
                                                     existing_operand);
    rocksdb::MergeOperator::MergeOperationInput in(key, base, operands_,
                                                   nullptr);
    if (!merge_->FullMergeV2(in, &out)) {
      return Fallback(e);  // fails the same way as before
    }
    return Write(
        'P', key,
        existing_operand.data() ? existing_operand : rocksdb::Slice(scratch_));
  }
  // Operands only: their base, if any, is in the DB.
  if (operands_.size() >= 2 ||
      (operands_.size() == 1 && merge_->AllowSingleOperand())) {
    std::deque<rocksdb::Slice> ops(operands_.begin(), operands_.end());
    if (merge_->PartialMergeMulti(key, ops, &scratch_, nullptr)) {
      return Write('M', key, scratch_);
    }
  }
  if (operands_.size() == 1) return Write('M', key, operands_[0]);
  Fallback(e);  // one file cannot hold two entries of one key
}

void SstBuilder::Fallback(const std::vector<Entry>& e) {
  for (const Entry& x : e) fallback_->Append(cf_, x);
  fallback_->EndKey();
  r_->fallback_keys++;
}

void SstBuilder::Write(char op, const rocksdb::Slice& key,
                       const rocksdb::Slice& value) {
  if (!writer_) {
    // Filters and compression as the column family's flushes would build.
    writer_.reset(new rocksdb::SstFileWriter(rocksdb::EnvOptions(options_),
                                             options_, cf_,
                                             /*invalidate_page_cache=*/false));
    status_ = writer_->Open(path_);
    if (!status_.ok()) return;
  }
  switch (op) {
    case 'P':
      status_ = writer_->Put(key, value);
      break;
    case 'D':
      status_ = writer_->Delete(key);
      break;
    default:
      status_ = writer_->Merge(key, value);
      break;
  }
  r_->sst_entries++;
}

rocksdb::Status IngestFiles(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& cfs,
    const std::vector<std::vector<std::string>>& files) {
  std::vector<rocksdb::IngestExternalFileArg> args;
  for (size_t i = 0; i < cfs.size(); i++) {
    if (files[i].empty()) continue;
    rocksdb::IngestExternalFileArg a;
    a.column_family = cfs[i];
    a.external_files = files[i];
    a.options.move_files = true;  // a hard link: same file system
    // With a snapshot held, every file gets a global sequence number
    // above LastSequence, also one that overlaps nothing in the DB (which
    // would otherwise get 0): copies stay inside their P11 span.
    a.options.snapshot_consistency = true;
    a.options.allow_global_seqno = true;
    a.options.write_global_seqno = false;  // kept in the MANIFEST
    // WAL-replayed data or memtable-path copies overlapping a file are
    // flushed first (they are older than it).
    a.options.allow_blocking_flush = true;
    args.push_back(std::move(a));
  }
  if (args.empty()) return rocksdb::Status::OK();
  const rocksdb::Snapshot* snap = db->GetSnapshot();
  rocksdb::Status s = db->IngestExternalFiles(args);
  db->ReleaseSnapshot(snap);
  return s;
}

std::string SstDir(rocksdb::DB* db) {
  return db->GetName() + "/flintkv_recovery";
}

void RemoveSstDir(rocksdb::DB* db) {
  rocksdb::Env* env = db->GetEnv();
  const std::string dir = SstDir(db);
  std::vector<std::string> names;
  if (!env->GetChildren(dir, &names).ok()) return;
  for (const std::string& n : names) {
    if (n != "." && n != "..") env->DeleteFile(dir + "/" + n);
  }
  env->DeleteDir(dir);
}

}  // namespace replay
}  // namespace flintkv

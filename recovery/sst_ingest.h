// Recovery straight into SST files (recovery/replay_driver.cc drives it;
// docs/rocksdb_recovery.md has the argument).
//
// The lists' replayers (recovery/replay.h) decide per key what must be
// replayed, exactly as for the memtable path; ListOutput collects that.
// SstBuilder then merges the outputs of a column family's lists (oldest
// list first) key by key, folds each key's entries into the one entry a
// RocksDB flush of those entries would write, and writes the entries in
// user-key order into one SST file with rocksdb::SstFileWriter:
//  - newest non-Merge entry, no newer operands: that entry (Put, Delete);
//  - a Put, Delete or SingleDelete base with newer operands: the merge
//    operator's FullMergeV2 (nullptr base for a deletion) as a Put, as
//    RocksDB's MergeHelper does in a flush;
//  - operands only (their base is in the DB, or there is none): one Merge
//    entry, combined with PartialMergeMulti when there are several (and, as
//    in a flush, also for one when the operator AllowSingleOperand()).
// What SstFileWriter cannot express (in 7.8.3: SingleDelete, PutEntity),
// operands PartialMergeMulti refuses to combine, a FullMergeV2 that fails,
// and a column family without a merge operator go the memtable path: all of
// the key's entries, oldest first, in one WriteBatch (BatchWriter), so
// every key is replayed wholly one way or the other.
//
// IngestFiles ingests every column family's file in one
// DB::IngestExternalFiles call (atomic across column families: after a
// crash either all of it is in the MANIFEST or none) under a snapshot, so
// each file gets a global sequence number above LastSequence
// (snapshot_consistency forces one even where the file overlaps nothing):
// the copies land inside the span P11 recorded for them.
//
// Thread safety: single-threaded (recovery owns the DB).
#pragma once

#include <string>
#include <vector>

#include "flintkv/recovery.h"
#include "recovery/replay.h"
#include "rocksdb/db.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/sst_file_writer.h"

namespace flintkv {
namespace replay {

// What one list's replayer decided to replay: per key, oldest first.
class ListOutput : public GroupSink {
 public:
  void Add(const std::vector<Entry>& group, size_t n) override {
    starts_.push_back(entries_.size());
    for (size_t i = n; i-- > 0;) entries_.push_back(group[i]);
  }
  size_t keys() const { return starts_.size(); }
  // Entries [begin(k), end(k)) belong to the k-th key.
  size_t begin(size_t k) const { return starts_[k]; }
  size_t end(size_t k) const {
    return k + 1 < starts_.size() ? starts_[k + 1] : entries_.size();
  }
  const Entry& entry(size_t i) const { return entries_[i]; }

 private:
  std::vector<Entry> entries_;
  std::vector<size_t> starts_;
};

class SstBuilder {
 public:
  // Files go to `dir` (which must exist); fallback keys to `fallback`.
  SstBuilder(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
             const std::string& dir, BatchWriter* fallback, RecoveryReport* r);

  // lists: the column family's outputs, oldest list first. Appends the
  // file it wrote, if any, to *files.
  rocksdb::Status Build(const std::vector<const ListOutput*>& lists,
                        std::vector<std::string>* files);

  // The same for a column family with one list, without collecting it:
  // each key's entries (oldest first, keys ascending), then Finish.
  void Fold(const std::vector<Entry>& e);
  rocksdb::Status Finish(std::vector<std::string>* files);

 private:
  void Fallback(const std::vector<Entry>& e);
  void Write(char op, const rocksdb::Slice& key, const rocksdb::Slice& value);

  rocksdb::DB* db_;
  rocksdb::ColumnFamilyHandle* cf_;
  std::string path_;
  BatchWriter* fallback_;
  RecoveryReport* r_;
  rocksdb::Options options_;
  const rocksdb::MergeOperator* merge_;
  std::unique_ptr<rocksdb::SstFileWriter> writer_;
  std::string scratch_;
  std::vector<rocksdb::Slice> operands_;
  rocksdb::Status status_;
};

// Feeds one list's replayed groups straight into an SstBuilder.
class StreamSink : public GroupSink {
 public:
  explicit StreamSink(SstBuilder* b) : b_(b) {}
  void Add(const std::vector<Entry>& group, size_t n) override {
    e_.assign(group.rend() - n, group.rend());  // oldest first
    b_->Fold(e_);
  }

 private:
  SstBuilder* b_;
  std::vector<Entry> e_;
};

// Ingests files[i] into column family cfs[i] (empty lists skipped), all in
// one atomic IngestExternalFiles call, each file with its own global
// sequence number above the DB's LastSequence.
rocksdb::Status IngestFiles(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& cfs,
    const std::vector<std::vector<std::string>>& files);

// The directory recovery writes its SST files to before ingesting them
// (inside the DB directory, so that ingestion links rather than copies).
std::string SstDir(rocksdb::DB* db);
// Removes it and what an interrupted recovery left in it.
void RemoveSstDir(rocksdb::DB* db);

}  // namespace replay
}  // namespace flintkv

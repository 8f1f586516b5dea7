// When a randomized test may issue SingleDelete on a key so that the result
// is defined, i.e. the same whatever the flush and compaction points (the
// differential tests compare two DBs whose memtables fill, and so flush, at
// different points).
//
// RocksDB documents SingleDelete as undefined when the key was Put more
// than once or when Delete or Merge is mixed with it. One case of "mixed"
// is reachable in a test that resets its bookkeeping on Delete: for the
// history Put(v1), Delete, Put(v2), SingleDelete, the compaction iterator of
// RocksDB 7.8.3 (db/compaction/compaction_iterator.cc) drops SingleDelete
// and Put(v2) as a pair, then drops the Delete as "hidden by a newer entry"
// of the same snapshot stripe. If Put(v1) is in an older SST file (or in
// another snapshot stripe) than the flushed or compacted Delete, v1 comes
// back; if not, the key stays deleted.
// tests/rocksdb/rocksdb_single_delete_test.cc shows both, and checks this model
// against every short history.
//
// The model: SingleDelete only on a key that holds exactly one Put with no
// older value or Merge operand that a Delete or DeleteRange hides. A key
// whose Delete or DeleteRange hid a value (or could have) never gets a
// SingleDelete again: the hidden versions may survive in older files for
// ever.
// Thread safety: none (one per key, used by one driver thread).
#pragma once

namespace flintkv {
namespace test {

class SingleDeleteModel {
 public:
  void Put() { puts_++; }
  void Merge() { merged_ = true; }
  void Delete() {
    if (puts_ > 0 || merged_) hides_value_ = true;
    puts_ = 0;
    merged_ = false;
  }
  // A range deletion covering the key (conservative: as a Delete of a value).
  void DeleteRange() {
    hides_value_ = true;
    puts_ = 0;
    merged_ = false;
  }
  bool CanSingleDelete() const {
    return puts_ == 1 && !merged_ && !hides_value_;
  }
  // Only when CanSingleDelete(): the Put and the SingleDelete cancel.
  void SingleDelete() { puts_ = 0; }

 private:
  int puts_ = 0;              // Puts since the last Delete/SingleDelete
  bool merged_ = false;       // a Merge since the last Delete/SingleDelete
  bool hides_value_ = false;  // a Delete/DeleteRange hid a Put or Merge
};

}  // namespace test
}  // namespace flintkv

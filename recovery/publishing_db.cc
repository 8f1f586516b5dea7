#include "recovery/publishing_db.h"

#include <functional>
#include <utility>

namespace flintkv {
namespace recovery {
namespace {

using rocksdb::Slice;

// Forwards to the DB's iterator. A tailing iterator can move onto data
// newer than its creation, so W is published after every move (P10 for
// reads); any iterator publishes again after Refresh.
class PublishingIterator : public rocksdb::Iterator {
 public:
  PublishingIterator(rocksdb::Iterator* it, bool tailing,
                     std::function<void()> publish)
      : it_(it), tailing_(tailing), publish_(std::move(publish)) {}
  ~PublishingIterator() override { delete it_; }
  bool Valid() const override { return it_->Valid(); }
  void SeekToFirst() override { Moved(&rocksdb::Iterator::SeekToFirst); }
  void SeekToLast() override { Moved(&rocksdb::Iterator::SeekToLast); }
  void Seek(const Slice& t) override {
    it_->Seek(t);
    if (tailing_) publish_();
  }
  void SeekForPrev(const Slice& t) override {
    it_->SeekForPrev(t);
    if (tailing_) publish_();
  }
  void Next() override { Moved(&rocksdb::Iterator::Next); }
  void Prev() override { Moved(&rocksdb::Iterator::Prev); }
  Slice key() const override { return it_->key(); }
  Slice value() const override { return it_->value(); }
  const rocksdb::WideColumns& columns() const override {
    return it_->columns();
  }
  rocksdb::Status status() const override { return it_->status(); }
  rocksdb::Status Refresh() override {
    rocksdb::Status s = it_->Refresh();
    publish_();
    return s;
  }
#if ROCKSDB_MAJOR >= 9
  rocksdb::Status Refresh(const rocksdb::Snapshot* snap) override {
    rocksdb::Status s = it_->Refresh(snap);
    publish_();
    return s;
  }
  bool PrepareValue() override { return it_->PrepareValue(); }
#endif
  rocksdb::Status GetProperty(std::string name, std::string* prop) override {
    return it_->GetProperty(std::move(name), prop);
  }
  Slice timestamp() const override { return it_->timestamp(); }

 private:
  void Moved(void (rocksdb::Iterator::*op)()) {
    (it_->*op)();
    if (tailing_) publish_();
  }
  rocksdb::Iterator* it_;
  bool tailing_;
  std::function<void()> publish_;
};

#if ROCKSDB_MAJOR >= 9
rocksdb::Status TailingNotSupported(const char* api) {
  return rocksdb::Status::NotSupported(
      std::string("flintkv::OpenDB: ") + api +
      " with ReadOptions::tailing (use NewIterator for a tailing iterator)");
}

// RocksDB 9 has no public error AttributeGroupIterator.
class ErrorAttributeGroupIterator : public rocksdb::AttributeGroupIterator {
 public:
  explicit ErrorAttributeGroupIterator(rocksdb::Status s)
      : status_(std::move(s)) {}
  bool Valid() const override { return false; }
  void SeekToFirst() override {}
  void SeekToLast() override {}
  void Seek(const Slice&) override {}
  void SeekForPrev(const Slice&) override {}
  void Next() override {}
  void Prev() override {}
  Slice key() const override { return Slice(); }
  rocksdb::Status status() const override { return status_; }
  const rocksdb::IteratorAttributeGroups& attribute_groups() const override {
    return groups_;
  }

 private:
  rocksdb::Status status_;
  rocksdb::IteratorAttributeGroups groups_;
};
#endif

}  // namespace

void PublishingDB::Publish() {
  uint64_t seq = db_->GetLatestSequenceNumber();
  // durable_ <= the W some thread has already written back: most reads
  // and writes of a busy DB find their sequence covered and skip the
  // CAS and the fence.
  if (durable_.load(std::memory_order_acquire) >= seq) return;
  wm_.Publish(seq);
  uint64_t d = durable_.load(std::memory_order_relaxed);
  while (d < seq &&
         !durable_.compare_exchange_weak(d, seq, std::memory_order_release,
                                         std::memory_order_relaxed)) {
  }
}

rocksdb::Iterator* PublishingDB::Wrap(rocksdb::Iterator* it, bool tailing) {
  // Creating the iterator fixed the sequence it reads at (a tailing one:
  // its first view): publish now.
  Publish();
  return new PublishingIterator(it, tailing, [this] {
    Pass p(this);
    Publish();
  });
}

#if ROCKSDB_MAJOR >= 9
std::unique_ptr<rocksdb::Iterator> PublishingDB::NewCoalescingIterator(
    const ReadOptions& ro, const std::vector<ColumnFamilyHandle*>& cfs) {
  if (ro.tailing) {
    return std::unique_ptr<rocksdb::Iterator>(rocksdb::NewErrorIterator(
        TailingNotSupported("NewCoalescingIterator")));
  }
  Pass p(this);
  auto it = db_->NewCoalescingIterator(ro, cfs);
  Publish();
  return it;
}

std::unique_ptr<rocksdb::AttributeGroupIterator>
PublishingDB::NewAttributeGroupIterator(
    const ReadOptions& ro, const std::vector<ColumnFamilyHandle*>& cfs) {
  if (ro.tailing) {
    return std::make_unique<ErrorAttributeGroupIterator>(
        TailingNotSupported("NewAttributeGroupIterator"));
  }
  Pass p(this);
  auto it = db_->NewAttributeGroupIterator(ro, cfs);
  Publish();
  return it;
}
#endif

}  // namespace recovery
}  // namespace flintkv

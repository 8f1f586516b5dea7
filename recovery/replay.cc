#include "recovery/replay.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "memtable/coding.h"
#include "recovery/internal_key_cmp.h"
#include "recovery/rocksdb_entry_checksum.h"
#include "rocksdb_common/status_convert.h"

namespace flintkv {
namespace replay {

// A wide-column entity as RocksDB 7.8.3 serialises it in a memtable value
// (db/wide/wide_column_serialization.h, version 1): varint32 version,
// varint32 column count, per column a length-prefixed name and a varint32
// value size, then the values back to back.
bool DecodeEntity(rocksdb::Slice in, rocksdb::WideColumns* out) {
  const char* p = in.data();
  const char* end = p + in.size();
  uint32_t version, n;
  p = memtable::DecodeVarint32(p, end, &version);
  if (!p || version != 1) return false;
  p = memtable::DecodeVarint32(p, end, &n);
  if (!p || n > in.size()) return false;
  std::vector<std::pair<rocksdb::Slice, uint32_t>> index;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t name_len, value_len;
    p = memtable::DecodeVarint32(p, end, &name_len);
    if (!p || name_len > static_cast<uint64_t>(end - p)) return false;
    rocksdb::Slice name(p, name_len);
    p = memtable::DecodeVarint32(p + name_len, end, &value_len);
    if (!p) return false;
    index.emplace_back(name, value_len);
  }
  out->clear();
  for (auto& [name, len] : index) {
    if (len > static_cast<uint64_t>(end - p)) return false;
    out->emplace_back(name, rocksdb::Slice(p, len));
    p += len;
  }
  return p == end;
}

namespace {

// A key for a message: as it is if printable, else in hex.
std::string KeyText(const rocksdb::Slice& k) {
  for (size_t i = 0; i < k.size(); i++) {
    if (k[i] < 0x20 || k[i] > 0x7e) return "0x" + k.ToString(true);
  }
  return "'" + k.ToString() + "'";
}

}  // namespace

std::string CheckEntry(const pmem::Pool& pool, const pmem::ListRoot* l,
                       const pmem::NvmNode* n, Entry* e) {
  std::string where = "list " + std::to_string(l->list_id) +
                      ", node at offset " + std::to_string(pool.ToOffset(n));
  if (!DecodeEntry(n, e)) {
    return where + ": node is not a RocksDB memtable entry";
  }
  if (ChecksumMatches(e->user_key, e->value, e->type, e->seq, e->protection)) {
    return "";
  }
  return where + ", key " + KeyText(e->user_key) + " (seq " +
         std::to_string(e->seq) + "): RocksDB's per-key checksum (" +
         std::to_string(e->protection.size()) +
         " bytes, memtable_protection_bytes_per_key) does not match the "
         "entry: bit rot in the pool; the entry is not used";
}

// The protection width of the first committed entry of list l, looking at
// a few nodes only (each checked as WalkList checks it); -1 if none is
// found or one looks damaged.
int FirstEntryWidth(const pmem::Pool& pool, const pmem::ListRoot* l) {
  uint64_t off = l->head.next;
  for (int i = 0; i < 16 && off != 0; i++) {
    if (off % pmem::kNodeAlign != 0 ||
        !pool.InBounds(off, sizeof(pmem::NvmNode))) {
      return -1;
    }
    const auto* n = pool.FromOffset<pmem::NvmNode>(off);
    if (!n->HeaderValid() ||
        !pool.InBounds(off, pmem::NvmNode::AllocSize(n->data_size)) ||
        !memtable::KeyWellFormed(n)) {
      return -1;
    }
    Entry e;
    if (IsCommitted(l, n)) {
      return DecodeEntry(n, &e) ? static_cast<int>(e.protection.size()) : -1;
    }
    off = n->next;
  }
  return -1;
}

rocksdb::Status CheckList(pmem::Pool* pool, pmem::ListRoot* l,
                          size_t option_width) {
  // RocksDB fixes the width when it creates a memtable: one per list.
  const int width = FirstEntryWidth(*pool, l);
  if (width == 0 && option_width == 0) return rocksdb::Status::OK();
  auto chunks = ChunkRanges(pool, l->list_id);
  std::string problem;
  Status s = memtable::WalkList(
      *pool, l, nullptr, &chunks,
      [&](const pmem::NvmNode* n) {
        Entry e;
        if (problem.empty() && IsCommitted(l, n)) {
          problem = CheckEntry(*pool, l, n, &e);
          if (problem.empty() && width >= 0 &&
              e.protection.size() != static_cast<size_t>(width)) {
            problem = "list " + std::to_string(l->list_id) +
                      ", node at offset " + std::to_string(pool->ToOffset(n)) +
                      ", key " + KeyText(e.user_key) + ": " +
                      std::to_string(e.protection.size()) +
                      " checksum bytes where the list's first entry has " +
                      std::to_string(width) + ": a damaged length field";
          }
        }
        return memtable::WalkDecision::kKeep;
      },
      [](uint64_t*) {});
  if (!s.ok()) return rocks::ToRocks(s);
  if (!problem.empty()) {
    return rocksdb::Status::Corruption("flintkv: " + problem);
  }
  return rocksdb::Status::OK();
}

std::vector<memtable::ChunkRange> ChunkRanges(const pmem::Pool* pool,
                                              uint64_t list_id) {
  std::vector<memtable::ChunkRange> out;
  for (const pmem::ChunkInfo& c : pool->ChunksOf(list_id)) {
    out.push_back({c.offset, c.len});
  }
  return out;
}

Status MinSeq(pmem::Pool* pool, pmem::ListRoot* l,
              const rocksdb::Comparator* ucmp, uint64_t* min_seq, bool* any) {
  InternalKeyCmp cmp(ucmp);
  auto chunks = ChunkRanges(pool, l->list_id);
  *any = false;
  return memtable::WalkList(
      *pool, l, cmp, &chunks,
      [&](const pmem::NvmNode* n) {
        Entry e;
        if (IsCommitted(l, n) && DecodeEntry(n, &e) &&
            (!*any || e.seq < *min_seq)) {
          *min_seq = e.seq;
          *any = true;
        }
        return memtable::WalkDecision::kKeep;
      },
      [](uint64_t*) {});
}

ListReplayer::ListReplayer(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                           bool use_wm, uint64_t wm, bool check_presence,
                           uint64_t open_seq, CopyRange copies,
                           OlderCopies older, GroupSink* sink,
                           RecoveryReport* r)
    : db_(db),
      cf_(cf),
      ucmp_(cf->GetComparator()),
      use_wm_(use_wm),
      wm_(wm),
      check_presence_(check_presence),
      open_seq_(open_seq),
      copies_(copies),
      older_(std::move(older)),
      sink_(sink),
      r_(r) {}

bool ListReplayer::Visit(const pmem::ListRoot* root, const pmem::NvmNode* n) {
  if (n->version == pmem::kUncommittedVersion) {
    r_->dropped_uncommitted++;  // P4: its Write had not returned
    return true;
  }
  if (root->batch_mode && n->version > root->commit_version) {
    r_->dropped_torn_batch++;  // P3
    return true;
  }
  Entry e;
  if (!DecodeEntry(n, &e)) {
    status_ = rocksdb::Status::Corruption(
        "flintkv: list " + std::to_string(root->list_id) +
        ": node is not a RocksDB memtable entry");
    return false;
  }
  r_->entries_seen++;
  max_seq_ = std::max(max_seq_, e.seq);
  if (use_wm_ && e.seq > wm_) {
    r_->dropped_above_watermark++;  // never acknowledged (wrapper)
    return true;
  }
  if (e.type != kTypeValue && e.type != kTypeDeletion && e.type != kTypeMerge &&
      e.type != kTypeSingleDeletion && e.type != kTypeWideColumnEntity &&
      !(ROCKSDB_MAJOR >= 9 && e.type == kTypeValuePreferredSeqno)) {
    status_ = rocksdb::Status::NotSupported(
        "flintkv: list " + std::to_string(root->list_id) +
        " holds an entry of RocksDB value type " + std::to_string(e.type) +
        " (user-defined timestamps and stacked BlobDB blob indexes are not "
        "recovered)");
    return false;
  }
  bool same_key = have_key_ && ucmp_->Compare(e.user_key, key_) == 0;
  if (!same_key) {
    EndKey();
    key_.assign(e.user_key.data(), e.user_key.size());
    have_key_ = true;
    done_ = false;
  }
  if (done_) {
    r_->entries_superseded++;
    return true;
  }
  group_.push_back(e);
  if (e.type != kTypeMerge) done_ = true;  // the base of the key's value
  return status_.ok();
}

rocksdb::Status ListReplayer::Finish() {
  EndKey();
  return status_;
}

bool ListReplayer::Present(
    const Entry& e, const std::vector<rocksdb::KeyVersion>& versions) const {
  for (const rocksdb::KeyVersion& v : versions) {
    if (v.sequence > open_seq_) continue;  // this recovery's own copy
    if (copies_.Contains(v.sequence)) {
      // A copy an interrupted recovery wrote of this key's group (only that
      // recovery wrote in this range; a group is never split across its
      // WriteBatches, so the whole group reached the DB with it).
      return true;
    }
    if (v.sequence != e.seq) continue;
    if (e.type == kTypeMerge) return true;  // a flush may fold operands
    // A flush rewrites a TimedPut's write time as a preferred seqno (or
    // makes it a plain value): key and sequence identify it.
    if (e.type == kTypeValuePreferredSeqno) return true;
    if (v.type == e.type && rocksdb::Slice(v.value) == e.value) return true;
  }
  return false;
}

size_t ListReplayer::Anchor() {
  std::vector<rocksdb::KeyVersion> versions;
  rocksdb::Status s = rocksdb::GetAllKeyVersions(
      db_, cf_, key_, key_, std::numeric_limits<size_t>::max(), &versions);
  if (!s.ok()) {
    status_ = s;
    return 0;
  }
  for (const rocksdb::KeyVersion& v : versions) {
    if (v.sequence <= open_seq_ && v.sequence > group_[0].seq &&
        !older_.Contains(v.sequence)) {
      return 0;  // superseded by newer history already in the DB
    }
  }
  for (size_t i = 0; i < group_.size(); i++) {
    if (!Present(group_[i], versions)) continue;
    // Operands below an exactly present (not folded) operand must all be
    // there too; if one is missing, part of the group was WAL-logged and
    // part not, and no replay order is right.
    bool exact = false;
    for (const auto& v : versions) {
      exact |= group_[i].type == kTypeMerge && v.sequence == group_[i].seq &&
               v.type == kTypeMerge &&
               rocksdb::Slice(v.value) == group_[i].value;
    }
    for (size_t j = i + 1; exact && j < group_.size(); j++) {
      if (!Present(group_[j], versions)) {
        status_ = rocksdb::Status::Incomplete(
            "flintkv: key '" + rocksdb::Slice(key_).ToString(true) +
            "' has Merge operands of which only the newer ones are in the "
            "DB (WAL-logged and WAL-less writes mixed on one key): cannot "
            "replay them exactly once; nothing was replayed for it");
        return 0;
      }
    }
    return i;
  }
  return group_.size();
}

void ListReplayer::EndKey() {
  if (group_.empty()) return;
  // group_: newest first. Replay the part newer than what the DB has.
  size_t n = check_presence_ ? Anchor() : group_.size();
  if (!status_.ok()) return;
  r_->entries_present += group_.size() - n;
  for (size_t i = 0; i < n; i++) {
    r_->entries_replayed++;
    r_->bytes_replayed += group_[i].user_key.size() + group_[i].value.size();
  }
  if (n > 0) sink_->Add(group_, n);
  group_.clear();
}

BatchWriter::BatchWriter(rocksdb::DB* db, size_t batch_bytes)
    : db_(db), batch_bytes_(batch_bytes) {
  wo_.disableWAL = true;  // everything is flushed before the lists go
}

void BatchWriter::Append(rocksdb::ColumnFamilyHandle* cf, const Entry& e) {
  rocksdb::Status s;
  switch (e.type) {
    case kTypeValue:
      s = batch_.Put(cf, e.user_key, e.value);
      break;
    case kTypeDeletion:
      s = batch_.Delete(cf, e.user_key);
      break;
    case kTypeSingleDeletion:
      s = batch_.SingleDelete(cf, e.user_key);
      break;
    case kTypeMerge:
      s = batch_.Merge(cf, e.user_key, e.value);
      break;
#if ROCKSDB_MAJOR >= 9
    case kTypeValuePreferredSeqno: {
      if (e.value.size() < 8) {
        s = rocksdb::Status::Corruption(
            "flintkv: TimedPut entry without its write time for key '" +
            e.user_key.ToString(true) + "'");
        break;
      }
      uint64_t write_time;  // fixed64, little-endian (x86), as DecodeEntry
      std::memcpy(&write_time, e.value.data() + e.value.size() - 8, 8);
      s = batch_.TimedPut(cf, e.user_key,
                          rocksdb::Slice(e.value.data(), e.value.size() - 8),
                          write_time);
      break;
    }
#endif
    case kTypeWideColumnEntity: {
      rocksdb::WideColumns columns;
      if (!DecodeEntity(e.value, &columns)) {
        s = rocksdb::Status::Corruption(
            "flintkv: undecodable wide-column entity for key '" +
            e.user_key.ToString(true) + "'");
      } else {
        s = batch_.PutEntity(cf, e.user_key, columns);
      }
      break;
    }
  }
  if (!s.ok() && status_.ok()) status_ = s;
}

void BatchWriter::EndKey() {
  if (batch_.GetDataSize() >= batch_bytes_) Commit();
}

rocksdb::Status BatchWriter::Finish() {
  Commit();
  return status_;
}

void BatchWriter::Commit() {
  if (batch_.Count() == 0 || !status_.ok()) return;
  status_ = db_->Write(wo_, &batch_);
  batch_.Clear();
}

}  // namespace replay
}  // namespace flintkv

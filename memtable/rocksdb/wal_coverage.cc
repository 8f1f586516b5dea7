#include "memtable/rocksdb/wal_coverage.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string_view>

#include "memtable/list_walk.h"
#include "rocksdb/file_checksum.h"
#include "rocksdb/version.h"
#include "rocksdb/write_batch.h"
#include "rocksdb_common/memtable_entry.h"
#include "rocksdb_common/memtable_meta.h"

namespace flintkv {
namespace rocks {
namespace {

// RocksDB's WAL format (db/log_format.h, the same in 7.8 and 9.x): 32 KiB
// blocks of records, each a header (masked crc32c of type [+ log number]
// + payload, uint16 length, uint8 type [, uint32 log number for the
// recyclable types]) and a payload fragment.
constexpr size_t kBlockSize = 32768;
constexpr size_t kHeaderSize = 7;
constexpr size_t kRecyclableHeaderSize = 11;
enum : uint8_t {
  kZeroType = 0,
  kFullType = 1,
  kFirstType = 2,
  kMiddleType = 3,
  kLastType = 4,
  kRecyclableFullType = 5,
  kRecyclableLastType = 8,
};

uint32_t Fixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian (x86), as RocksDB writes it
  return v;
}

// crc32c through RocksDB's public checksum generator (the WAL's own
// function, util/crc32c.h, is not a public header).
uint32_t Crc32c(const char* data, size_t n) {
  auto gen =
      rocksdb::GetFileChecksumGenCrc32cFactory()->CreateFileChecksumGenerator(
          rocksdb::FileChecksumGenContext());
  gen->Update(data, n);
  gen->Finalize();
  const std::string be = gen->GetChecksum();  // big-endian bytes
  uint32_t v = 0;
  for (unsigned char c : be) v = (v << 8) | c;
  return v;
}

uint32_t Unmask(uint32_t masked) {  // util/crc32c.h
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

// The WAL files of wal_dir by log number ("<number>.log").
Status ListWalFiles(const std::string& dir,
                    std::map<uint64_t, std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (!d) return Status::IOError("cannot list the WAL directory " + dir);
  while (dirent* e = readdir(d)) {
    std::string_view name(e->d_name);
    if (name.size() < 5 || name.substr(name.size() - 4) != ".log") continue;
    std::string_view num = name.substr(0, name.size() - 4);
    if (num.empty() || num.size() > 19 ||
        !std::all_of(num.begin(), num.end(),
                     [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    (*out)[std::stoull(std::string(num))] = dir + "/" + std::string(name);
  }
  closedir(d);
  return Status::OK();
}

// One WAL file's records (C2). False when the read must end here (*stopped
// says why; "" when fn asked to stop).
bool ReadWalFile(uint64_t number, const std::string& path, bool last,
                 const std::function<bool(uint64_t, const std::string&)>& fn,
                 std::string* stopped) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"),
                                          &std::fclose);
  auto stop = [&](const std::string& why) {
    *stopped = path + ": " + why;
    return false;
  };
  if (!f) return stop("cannot be read");
  std::string block(kBlockSize, '\0');
  std::string record;
  bool in_record = false;
  for (uint64_t block_no = 0;; block_no++) {
    const size_t len = std::fread(&block[0], 1, kBlockSize, f.get());
    size_t pos = 0;
    while (pos + kHeaderSize <= len) {
      const char* h = block.data() + pos;
      const uint32_t length =
          static_cast<uint8_t>(h[4]) |
          (static_cast<uint32_t>(static_cast<uint8_t>(h[5])) << 8);
      const uint8_t type = static_cast<uint8_t>(h[6]);
      if (type == kZeroType && length == 0 && len == kBlockSize &&
          kBlockSize - pos < kRecyclableHeaderSize &&
          std::all_of(h, h + (kBlockSize - pos),
                      [](char c) { return c == 0; })) {
        break;  // a recycling writer's zero padding of a block's last bytes
      }
      if (type == kZeroType && length == 0) {
        // Zeros: the unwritten end of the newest log, or a zeroed region
        // (RocksDB's reader skips the rest of the block and then usually
        // finds a fragment without its start, which ends point-in-time
        // recovery). Nothing after it counts, in this log or a later one.
        if (in_record || !last) {
          return stop("a zeroed region at offset " +
                      std::to_string(block_no * kBlockSize + pos));
        }
        return false;
      }
      const bool recyclable =
          type >= kRecyclableFullType && type <= kRecyclableLastType;
      if (type > kRecyclableLastType || type == kZeroType) {
        return stop("record type " + std::to_string(type) +
                    " is not read here (a compressed WAL, or a newer "
                    "format)");
      }
      const size_t header = recyclable ? kRecyclableHeaderSize : kHeaderSize;
      if (pos + header + length > len) {
        return stop("a record is torn at offset " +
                    std::to_string(block_no * kBlockSize + pos));
      }
      if (Unmask(Fixed32(h)) != Crc32c(h + 6, header - 6 + length)) {
        return stop("checksum mismatch at offset " +
                    std::to_string(block_no * kBlockSize + pos));
      }
      if (recyclable && (number > UINT32_MAX ||
                         Fixed32(h + 7) != static_cast<uint32_t>(number))) {
        // A recycled file: what follows is an older log's. RocksDB 9 ends
        // point-in-time recovery there unless the next log continues the
        // sequence, and compares all 64 bits of the log number: only the
        // newest log may end so.
        if (in_record || !last) {
          return stop("an older log's record in recycled log " +
                      std::to_string(number));
        }
        return false;
      }
      const uint8_t kind = recyclable ? type - 4 : type;
      const char* payload = h + header;
      pos += header + length;
      if (kind == kFullType || kind == kFirstType) {
        if (in_record) return stop("a record is cut off");
        record.assign(payload, length);
        in_record = kind == kFirstType;
      } else {
        if (!in_record) return stop("a record fragment has no start");
        record.append(payload, length);
        if (kind == kMiddleType) continue;
        in_record = false;
      }
      if (!in_record && !fn(number, record)) return false;
    }
    if (len < kBlockSize) {  // the end of the file
      if (in_record) return stop("a record is cut off");
      return true;
    }
  }
}

// What a memtable entry is, for matching against a WAL batch's operation.
uint64_t Digest(uint32_t cf, uint8_t type, const rocksdb::Slice& key,
                const rocksdb::Slice& value) {
  const std::hash<std::string_view> h;
  uint64_t d = h(std::string_view(key.data(), key.size()));
  d = d * 0x9E3779B97F4A7C15ull ^
      h(std::string_view(value.data(), value.size()));
  return d * 0x9E3779B97F4A7C15ull ^ (uint64_t{cf} << 8 | type);
}

struct Want {
  uint64_t seq;
  uint64_t digest;
  size_t list;  // index into the caller's lists
  bool operator<(const Want& o) const { return seq < o.seq; }
};

// Walks one WAL batch as RocksDB's WAL replay inserts it (MemTableInserter
// with seq_per_batch off, as for every write policy FlintKV accepts): every
// operation takes the next sequence number, LogData and the Noop a
// TransactionDB batch starts with take none. A 2PC section (its entries are
// inserted at the commit's sequence number), a blob index or a TimedPut
// ends the batch's walk and its entries stay unmatched: abandoned() then
// says so. Every callback returns OK (RocksDB asserts that of markers) and
// Continue() stops the walk.
class Matcher : public rocksdb::WriteBatch::Handler {
 public:
  Matcher(std::vector<Want>* wants, std::vector<bool>* hit, uint64_t seq)
      : wants_(wants), hit_(hit), seq_(seq) {}
  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& k,
                        const rocksdb::Slice& v) override {
    return Match(cf, kTypeValue, k, v);
  }
  rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice& k) override {
    return Match(cf, kTypeDeletion, k, rocksdb::Slice());
  }
  rocksdb::Status SingleDeleteCF(uint32_t cf,
                                 const rocksdb::Slice& k) override {
    return Match(cf, kTypeSingleDeletion, k, rocksdb::Slice());
  }
  rocksdb::Status MergeCF(uint32_t cf, const rocksdb::Slice& k,
                          const rocksdb::Slice& v) override {
    return Match(cf, kTypeMerge, k, v);
  }
  rocksdb::Status PutEntityCF(uint32_t cf, const rocksdb::Slice& k,
                              const rocksdb::Slice& entity) override {
    return Match(cf, kTypeWideColumnEntity, k, entity);
  }
  // Range tombstones live in RocksDB's own table, never in a FlintKV list.
  rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice&,
                                const rocksdb::Slice&) override {
    seq_++;
    return rocksdb::Status::OK();
  }
  rocksdb::Status MarkNoop(bool) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkBeginPrepare(bool) override { return Abandon(); }
  rocksdb::Status MarkEndPrepare(const rocksdb::Slice&) override {
    return Abandon();
  }
  rocksdb::Status MarkCommit(const rocksdb::Slice&) override {
    return Abandon();
  }
  rocksdb::Status MarkCommitWithTimestamp(const rocksdb::Slice&,
                                          const rocksdb::Slice&) override {
    return Abandon();
  }
  rocksdb::Status MarkRollback(const rocksdb::Slice&) override {
    return Abandon();
  }
  rocksdb::Status PutBlobIndexCF(uint32_t, const rocksdb::Slice&,
                                 const rocksdb::Slice&) override {
    return Abandon();
  }
#if ROCKSDB_MAJOR >= 9
  rocksdb::Status TimedPutCF(uint32_t, const rocksdb::Slice&,
                             const rocksdb::Slice&, uint64_t) override {
    return Abandon();
  }
#endif
  bool Continue() override { return !abandoned_; }
  bool abandoned() const { return abandoned_; }

 private:
  rocksdb::Status Abandon() {
    abandoned_ = true;
    return rocksdb::Status::OK();
  }
  rocksdb::Status Match(uint32_t cf, uint8_t type, const rocksdb::Slice& k,
                        const rocksdb::Slice& v) {
    const uint64_t seq = seq_++;
    auto range =
        std::equal_range(wants_->begin(), wants_->end(), Want{seq, 0, 0});
    if (range.first == range.second) return rocksdb::Status::OK();
    const uint64_t d = Digest(cf, type, k, v);
    for (auto it = range.first; it != range.second; ++it) {
      const size_t i = static_cast<size_t>(it - wants_->begin());
      if (it->digest == d && !(*hit_)[i]) {
        (*hit_)[i] = true;
        break;
      }
    }
    return rocksdb::Status::OK();
  }
  std::vector<Want>* wants_;
  std::vector<bool>* hit_;
  uint64_t seq_;
  bool abandoned_ = false;
};

}  // namespace

Status ForEachWalRecord(
    const std::string& wal_dir,
    const std::function<bool(uint64_t, const std::string&)>& fn,
    uint64_t* files, std::string* stopped) {
  std::map<uint64_t, std::string> logs;
  Status s = ListWalFiles(wal_dir, &logs);
  if (!s.ok()) return s;
  stopped->clear();
  *files = 0;
  for (auto it = logs.begin(); it != logs.end(); ++it) {
    ++*files;
    if (!ReadWalFile(it->first, it->second, std::next(it) == logs.end(), fn,
                     stopped)) {
      break;
    }
  }
  return Status::OK();
}

Status SyncWalFiles(const std::string& wal_dir) {
  std::map<uint64_t, std::string> logs;
  Status s = ListWalFiles(wal_dir, &logs);
  for (const auto& [number, path] : logs) {
    if (!s.ok()) break;
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0 || fdatasync(fd) != 0) {
      s = Status::IOError("cannot sync the WAL file " + path + ": " +
                          std::strerror(errno));
    }
    if (fd >= 0) close(fd);
  }
  // A log a memtable switch created: its name too.
  if (s.ok()) s = pmem::SyncDirectory(wal_dir);
  return s;
}

Status CheckWalCoverage(const pmem::Pool& pool,
                        const std::vector<pmem::ListRoot*>& lists,
                        const std::string& wal_dir, WalCoverage* out) {
  *out = WalCoverage();
  std::vector<Want> wants;
  std::vector<bool> usable(lists.size(), false);
  for (size_t i = 0; i < lists.size(); i++) {
    pmem::ListRoot* l = lists[i];
    if (l->kind != pmem::kListMemtable || *MemtableListDamage(*l) != 0) {
      continue;  // C1: recovery reports what is wrong with it
    }
    const uint32_t cf = MetaOf(l)->column_family_id;
    const size_t before = wants.size();
    bool decodable = true;
    Status ws = memtable::WalkList(
        pool, l, nullptr, nullptr,
        [&](const pmem::NvmNode* n) {
          if (n->version == pmem::kUncommittedVersion) {
            return memtable::WalkDecision::kKeep;  // never acknowledged
          }
          MemtableEntry e;
          if (!DecodeMemtableEntry(n, &e)) {
            decodable = false;
          } else {
            wants.push_back(
                Want{e.seq, Digest(cf, e.type, e.user_key, e.value), i});
          }
          return memtable::WalkDecision::kKeep;
        },
        [](uint64_t*) {});
    if (!ws.ok() || !decodable) {
      wants.resize(before);
      continue;
    }
    usable[i] = true;
    out->entries += wants.size() - before;
  }
  std::sort(wants.begin(), wants.end());
  std::vector<bool> hit(wants.size(), false);
  Status s = ForEachWalRecord(
      wal_dir,
      [&](uint64_t, const std::string& record) {
        if (record.size() < 12) {  // RocksDB's replay stops here too
          out->stopped = "a WAL record is too small for a write batch";
          return false;
        }
        out->wal_batches++;
        uint64_t seq;
        std::memcpy(&seq, record.data(), 8);  // WriteBatch header, LE
        rocksdb::WriteBatch batch(record);
        Matcher m(&wants, &hit, seq);
        rocksdb::Status bs = batch.Iterate(&m);
        if (!bs.ok()) {  // RocksDB's replay stops at such a batch too
          out->stopped = "a WAL write batch fails to parse: " + bs.ToString();
          return false;
        }
        out->abandoned_batches += m.abandoned();
        return true;
      },
      &out->wal_files, &out->stopped);
  if (!s.ok()) return s;
  std::vector<bool> complete = usable;
  for (size_t j = 0; j < wants.size(); j++) {
    if (hit[j]) {
      out->found++;
    } else {
      complete[wants[j].list] = false;
    }
  }
  for (size_t i = 0; i < lists.size(); i++) {
    if (complete[i]) out->covered.insert(lists[i]->list_id);
  }
  return Status::OK();
}

}  // namespace rocks
}  // namespace flintkv

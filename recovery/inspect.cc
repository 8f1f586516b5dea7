// InspectPool: what a pool holds, checked with the validated walker
// (flintkv_tool inspect / verify).
#include "flintkv/inspect.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "memtable/list_walk.h"
#include "memtable/rocksdb/recovery_port.h"
#include "recovery/internal_key_cmp.h"
#include "recovery/replay.h"
#include "rocksdb/comparator.h"
#include "rocksdb/convenience.h"
#include "rocksdb/env.h"
#include "rocksdb/utilities/options_util.h"
#include "rocksdb_common/memtable_meta.h"
#include "rocksdb_common/watermark.h"

namespace flintkv {
namespace {

// Stands in for a column family's comparator while the DB is opened
// read-only to learn column family ids: RocksDB checks its name against
// the MANIFEST; nothing is read that it would have to order.
class NamedComparator : public rocksdb::Comparator {
 public:
  explicit NamedComparator(std::string name) : name_(std::move(name)) {}
  const char* Name() const override { return name_.c_str(); }
  int Compare(const rocksdb::Slice& a, const rocksdb::Slice& b) const override {
    return a.compare(b);
  }
  void FindShortestSeparator(std::string*,
                             const rocksdb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}

 private:
  std::string name_;
};

// The read-only open must not rotate the DB's LOG.
class NullLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Column family name -> comparator name, from the [CFOptions "..."]
// sections of the DB's newest OPTIONS file. Read as text:
// LoadLatestOptions needs every custom object of the DB (merge operators,
// comparators) registered here, or, told to ignore them, silently puts
// defaults in their place.
rocksdb::Status ComparatorsByCfName(const std::string& db,
                                    std::map<std::string, std::string>* out) {
  std::string file;
  rocksdb::Status s =
      rocksdb::GetLatestOptionsFileName(db, rocksdb::Env::Default(), &file);
  if (!s.ok()) return s;
  std::ifstream in(db + "/" + file);
  if (!in) return rocksdb::Status::IOError("cannot read " + db + "/" + file);
  const std::string kSection = "[CFOptions \"";
  std::string line, cf;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (line.rfind("[", 0) == 0) {
      cf.clear();
      if (line.rfind(kSection, 0) == 0) {
        cf = line.substr(kSection.size(), line.rfind('"') - kSection.size());
        (*out)[cf] = rocksdb::BytewiseComparator()->Name();
      }
    } else if (!cf.empty() && line.rfind("comparator=", 0) == 0) {
      (*out)[cf] = Trim(line.substr(std::strlen("comparator=")));
    }
  }
  if (out->empty()) {
    return rocksdb::Status::Corruption(db + "/" + file +
                                       " names no column family");
  }
  return rocksdb::Status::OK();
}

// Which comparator sorts the memtables of each column family.
struct CfComparators {
  std::map<uint32_t, std::string> by_id;
  std::string all;  // every column family's, when ids could not be had
  std::string why;  // why neither is known
};

CfComparators ComparatorsOf(const std::string& db) {
  CfComparators r;
  std::map<std::string, std::string> by_name;
  rocksdb::Status s = ComparatorsByCfName(db, &by_name);
  if (!s.ok()) {
    r.why = "cannot read the OPTIONS file of " + db + ": " + s.ToString();
    return r;
  }
  // Ids are in the MANIFEST only: open read-only with stand-ins.
  std::vector<std::unique_ptr<NamedComparator>> stand_ins;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const auto& [cf, name] : by_name) {
    stand_ins.emplace_back(new NamedComparator(name));
    rocksdb::ColumnFamilyOptions co;
    co.comparator = stand_ins.back().get();
    cfs.emplace_back(cf, co);
  }
  rocksdb::DBOptions dbo;
  dbo.info_log = std::make_shared<NullLogger>();
  dbo.max_open_files = 16;  // no table is needed
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* rdb = nullptr;
  s = rocksdb::DB::OpenForReadOnly(dbo, db, cfs, &handles, &rdb);
  if (s.ok()) {
    for (size_t i = 0; i < handles.size(); i++) {
      r.by_id[handles[i]->GetID()] = by_name[cfs[i].name];
      rdb->DestroyColumnFamilyHandle(handles[i]);
    }
    delete rdb;
    return r;
  }
  // One comparator for all column families needs no ids.
  std::string first = by_name.begin()->second;
  bool same = true;
  for (const auto& kv : by_name) same &= kv.second == first;
  if (same) {
    r.all = first;
  } else {
    r.why = "column family ids of " + db + " unknown: " + s.ToString();
  }
  return r;
}

// The user comparator for a memtable list of column family cf, or nullptr
// with *note saying why there is none.
const rocksdb::Comparator* UserComparator(const InspectOptions& o,
                                          const CfComparators& known,
                                          uint32_t cf, std::string* note) {
  if (o.comparator) return o.comparator;
  std::string name = o.comparator_name;
  if (name.empty()) {
    auto it = known.by_id.find(cf);
    name = it != known.by_id.end() ? it->second : known.all;
  }
  if (name.empty()) {
    *note = "order not checked: comparator of column family " +
            std::to_string(cf) + " unknown" +
            (known.why.empty() ? "" : " (" + known.why + ")");
    return nullptr;
  }
  const rocksdb::Comparator* c = nullptr;
  rocksdb::Status s =
      rocksdb::Comparator::CreateFromString(rocksdb::ConfigOptions(), name, &c);
  if (!s.ok() || !c) {
    *note = "order not checked: comparator " + name + " unknown";
    return nullptr;
  }
  return c;
}

// " by process PID (NAME)" for the process holding the flock libpmemobj
// takes on an open pool file, from /proc/locks; "" if none is found.
std::string PoolHolder(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 1234 fe:00:10952834 0 EOF"; a waiter's
    // line has "->" after the number and holds nothing.
    std::istringstream in(line);
    std::string num, kind, advisory, mode, pid, file;
    in >> num >> kind >> advisory >> mode >> pid >> file;
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (kind != "FLOCK" ||
        std::sscanf(file.c_str(), "%x:%x:%llu", &maj, &min, &ino) != 3 ||
        ino != st.st_ino || makedev(maj, min) != st.st_dev) {
      continue;
    }
    std::string name;
    std::ifstream comm("/proc/" + pid + "/comm");
    std::getline(comm, name);
    return " by process " + pid + (name.empty() ? "" : " (" + name + ")");
  }
  return "";
}

// A list's summary before its walk: its words, meta and chunks.
ListSummary ListHeader(const pmem::Pool& pool, const pmem::ListRoot* l,
                       const std::set<uint64_t>& left,
                       std::vector<memtable::ChunkRange>* chunks) {
  ListSummary ls;
  ls.list_id = l->list_id;
  ls.kind = l->kind;
  ls.state = pmem::StateOf(*l);
  ls.batch_mode = l->batch_mode != 0;
  ls.commit_version = l->commit_version;
  ls.leftover = left.count(l->list_id) != 0;
  if (l->kind == pmem::kListMemtable) {
    const rocks::MemtableMeta* m = rocks::MetaOf(l);
    if (m->magic != rocks::kMemtableMetaMagic) {
      ls.error = "memtable list without a valid MemtableMeta";
    } else if (*rocks::MemtableListDamage(*l)) {
      ls.error = std::string("memtable metadata damaged: ") +
                 rocks::MemtableListDamage(*l);
    }
    ls.column_family_id = m->column_family_id;
    ls.created_micros = m->created_micros;
    ls.incarnation = m->incarnation;
    ls.family_dropped = rocks::FamilyDropped(*m);
  }
  for (const pmem::ChunkInfo& c : pool.ChunksOf(l->list_id)) {
    chunks->push_back({c.offset, c.len});
    ls.chunks++;
    ls.chunk_bytes += c.len;
  }
  return ls;
}

// Walks list l with the validated walker (order checked with cmp, none
// with nullptr), counting into *ls its entries and sequence range, and
// checking each committed memtable entry.
Status WalkSummary(const pmem::Pool& pool, pmem::ListRoot* l,
                   const memtable::KeyComparator* cmp,
                   std::vector<memtable::ChunkRange>* chunks, ListSummary* ls) {
  const bool memtable = l->kind == pmem::kListMemtable;
  bool first = true;
  return memtable::WalkList(
      pool, l, cmp, chunks,
      [&](const pmem::NvmNode* n) {
        if (n->version == pmem::kUncommittedVersion) {
          ls->uncommitted++;
          return memtable::WalkDecision::kKeep;
        }
        ls->entries++;
        uint64_t seq = n->version;
        if (memtable) {
          uint32_t ikey_len;
          const char* k = memtable::DecodeVarint32(
              n->data(), n->data() + n->key_size, &ikey_len);
          if (k && ikey_len >= 8) {
            uint64_t packed;
            std::memcpy(&packed, k + ikey_len - 8, 8);
            seq = packed >> 8;
          } else if (ls->error.empty()) {
            ls->error = "memtable node without an internal key";
          }
        }
        if (memtable && ls->error.empty() && replay::IsCommitted(l, n)) {
          replay::Entry e;  // decodes, and its checksum matches
          ls->error = replay::CheckEntry(pool, l, n, &e);
        }
        if (first || seq < ls->min_seq) ls->min_seq = seq;
        if (first || seq > ls->max_seq) ls->max_seq = seq;
        first = false;
        return memtable::WalkDecision::kKeep;
      },
      [](uint64_t*) {});
}

// Summary of list l. assume_bytewise: no comparator was named.
ListSummary InspectList(pmem::Pool* pool, pmem::ListRoot* l,
                        const std::set<uint64_t>& left,
                        const InspectOptions& options,
                        const CfComparators& known, bool assume_bytewise) {
  std::vector<memtable::ChunkRange> chunks;
  ListSummary fresh = ListHeader(*pool, l, left, &chunks);
  const bool memtable = l->kind == pmem::kListMemtable;
  const rocksdb::Comparator* ucmp = rocksdb::BytewiseComparator();
  if (memtable && !assume_bytewise) {
    ucmp = UserComparator(options, known, fresh.column_family_id, &fresh.note);
  }
  InternalKeyCmp icmp(ucmp);
  memtable::BytewiseKeyComparator bcmp;
  const memtable::KeyComparator* cmp = &bcmp;
  if (memtable) cmp = ucmp ? &icmp : nullptr;
  ListSummary ls = fresh;
  Status ws = WalkSummary(*pool, l, cmp, &chunks, &ls);
  if (!ws.ok() && memtable && assume_bytewise) {
    // Sorted by some other comparator, or broken: only a walk without
    // the order check can tell, and it still checks everything else.
    cmp = nullptr;
    ls = fresh;  // a second walk starts over
    ws = WalkSummary(*pool, l, cmp, &chunks, &ls);
    ucmp = nullptr;
    if (ws.ok()) {
      ls.note =
          "order not checked: comparator unknown (not bytewise-sorted; "
          "name it with --db or --comparator)";
    }
  }
  if (cmp) ls.comparator = memtable ? ucmp->Name() : "bytewise";
  if (!ws.ok() && ls.error.empty()) ls.error = ws.message();
  return ls;
}

}  // namespace

rocksdb::Status InspectPool(const std::string& pool_dir, PoolSummary* out,
                            const InspectOptions& options) {
  std::string path = rocks::RecoveryPort::PoolPath(pool_dir);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return rocksdb::Status::NotFound("flintkv: no pool at " + path);
  }
  rocks::RecoveryPort port;
  rocksdb::Status s = rocks::RecoveryPort::OpenExisting(pool_dir, &port);
  if (s.IsBusy()) {
    // Open in another process (libpmemobj flocks an open pool): in use,
    // not corrupt, and not read while its owner may be writing it.
    std::string holder = PoolHolder(path);
    return rocksdb::Status::Busy(
        "flintkv: " + path + ": pool is in use" +
        (holder.empty() ? " by another process" : holder) +
        "; not inspected (close that process first)");
  }
  if (!s.ok()) return s;
  pmem::Pool* pool = port.pool();
  Watermark wm(pool);
  *out = PoolSummary();
  out->path = pool->path();
  out->size = pool->size();
  out->is_pmem = pool->is_pmem();
  out->bytes_in_use = pool->BytesInUse();
  out->watermark_enabled = wm.enabled();
  out->watermark = wm.published();
  // Damage the pool's open repaired (a list state word with a flipped bit,
  // corrected) is damage found: verify fails on it, as on damaged root
  // words.
  const Status root = wm.Check();
  std::string first_error;
  if (!pool->open_repairs().empty()) {
    first_error = pool->open_repairs().front();
  } else if (!root.ok()) {
    first_error = root.ToString();
  }
  const std::set<uint64_t> left = port.LeftoverIds();
  // Nothing named: RocksDB's default comparator, trusted only if it fits.
  bool assume_bytewise = !options.comparator &&
                         options.comparator_name.empty() && options.db.empty();
  CfComparators known;
  if (!options.db.empty()) known = ComparatorsOf(options.db);
  for (pmem::ListRoot* l : pool->Lists()) {
    ListSummary ls =
        InspectList(pool, l, left, options, known, assume_bytewise);
    if (!ls.error.empty() && first_error.empty()) {
      first_error =
          ls.error.rfind("list ", 0) == 0
              ? ls.error
              : "list " + std::to_string(l->list_id) + ": " + ls.error;
    }
    out->lists.push_back(ls);
  }
  if (!first_error.empty()) {
    return rocksdb::Status::Corruption("flintkv: " + path + ": " + first_error);
  }
  return rocksdb::Status::OK();
}

}  // namespace flintkv

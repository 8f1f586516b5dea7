#include "pmem/pool.h"

#include <dirent.h>
#include <fcntl.h>
#include <libpmem.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace flintkv {
namespace pmem {
namespace {

// pmemobj objects are 16-byte aligned; FlintKV structures that want their
// own cache lines start at the next 64-byte boundary inside the object.
constexpr size_t kAlignSlack = kCacheLine;
// libpmemobj rounds large objects plus its own header up to 256 KiB units;
// a chunk object of chunk_size - kPmemobjHeaderAllowance fits exactly.
constexpr size_t kPmemobjHeaderAllowance = 64;
constexpr size_t kChunkOverhead = sizeof(ChunkHeader) + kAlignSlack;
// libpmemobj's allocation unit for large objects.
constexpr uint64_t kHugeUnit = 256 << 10;

// The environment for `pmempool check`: the host's, minus what injects
// code into every process. A host run with LD_PRELOAD (stock db_bench with
// our plugin) must not hand its preloads to the checker: a helper that
// crashes there would make a valid pool look corrupt. PATH, locale and
// LD_LIBRARY_PATH (where a non-system PMDK finds its own libraries) stay.
std::vector<char*> CheckerEnvironment() {
  static const char* const kDropped[] = {"LD_PRELOAD=", "LD_AUDIT="};
  std::vector<char*> env;
  for (char** e = environ; e && *e; e++) {
    bool drop = false;
    for (const char* d : kDropped) {
      drop |= std::strncmp(*e, d, std::strlen(d)) == 0;
    }
    if (!drop) env.push_back(*e);
  }
  env.push_back(nullptr);
  return env;
}

// libpmemobj's metadata is checked by PMDK's own `pmempool check`, in a
// separate process started with posix_spawn: on some corrupt files the
// in-process pmemobj_check() crashes (seen in tests/pool_fuzz_test) and
// leaks, and a corrupt pool must give an error, not kill the caller (P7).
// No fork-and-continue: the host (RocksDB) is multithreaded, and a forked
// copy may deadlock on a lock another thread held (seen under ASAN).
struct CheckResult {
  enum Kind { kConsistent, kInconsistent, kUnavailable, kInUse, kCrashed };
  Kind kind;
  int signal = 0;  // kCrashed: the signal that ended pmempool
};

CheckResult CheckInSeparateProcess(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    // libpmemobj holds an exclusive flock on an open pool.
    bool busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);  // also drops our probe lock
    if (busy) return {CheckResult::kInUse};
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::string p = path;
  char* argv[] = {const_cast<char*>("pmempool"), const_cast<char*>("check"),
                  &p[0], nullptr};
  std::vector<char*> env = CheckerEnvironment();
  pid_t pid;
  int rc = posix_spawnp(&pid, "pmempool", &fa, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return {CheckResult::kUnavailable};
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return {CheckResult::kUnavailable};
  }
  if (WIFSIGNALED(status)) return {CheckResult::kCrashed, WTERMSIG(status)};
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return {CheckResult::kUnavailable};  // exec failed
  }
  return {WIFEXITED(status) && WEXITSTATUS(status) == 0
              ? CheckResult::kConsistent
              : CheckResult::kInconsistent};
}

char* AlignUp(void* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<char*>((a + kCacheLine - 1) &
                                 ~uintptr_t{kCacheLine - 1});
}

std::mutex& EnumMutex() {
  // pmemobj_first/next must not race with alloc/free in the same pool.
  static std::mutex mu;
  return mu;
}

struct ChunkCtorArgs {
  uint64_t list_id;
  uint64_t usable;
};

int ChunkCtor(PMEMobjpool* pop, void* ptr, void* arg) {
  auto* a = static_cast<ChunkCtorArgs*>(arg);
  auto* h = reinterpret_cast<ChunkHeader*>(AlignUp(ptr));
  std::memset(h, 0, sizeof(*h));
  h->magic = kChunkMagic;
  h->list_id = a->list_id;
  h->size = a->usable;
  h->check = IdentityCheck(h->magic, h->list_id, h->size);
  // P8: published only after the constructor returns (libpmemobj atomic
  // alloc), so an enumerable chunk always names its owner.
  pmemobj_persist(pop, h, sizeof(*h));
  return 0;
}

struct ListCtorArgs {
  uint64_t list_id;
  uint32_t kind;
  const void* user;
  size_t user_len;
};

int ListCtor(PMEMobjpool* pop, void* ptr, void* arg) {
  auto* a = static_cast<ListCtorArgs*>(arg);
  auto* l = reinterpret_cast<ListRoot*>(AlignUp(ptr));
  std::memset(static_cast<void*>(l), 0, sizeof(*l));
  l->magic = kListMagic;
  l->list_id = a->list_id;
  l->kind = a->kind;
  l->state_word = CheckedWord(kListActive, kStateSalt);
  l->id_check = IdentityCheck(l->magic, l->list_id, l->kind);
  l->head.check = NvmNode::HeaderCheck(0, 0, 0);
  if (a->user_len) std::memcpy(l->user, a->user, a->user_len);
  pmemobj_persist(pop, l, sizeof(*l));  // P8: complete before it is published
  return 0;
}

bool FileExists(const std::string& path, uint64_t* size) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  *size = static_cast<uint64_t>(st.st_size);
  return true;
}

std::string Errmsg() {
  const char* m = pmemobj_errormsg();
  return (m && *m) ? m : std::strerror(errno);
}

}  // namespace

Status Pool::Open(const PoolOptions& options, std::unique_ptr<Pool>* out) {
  std::unique_ptr<Pool> pool(new Pool());
  Status s = pool->Init(options);
  if (s.ok()) *out = std::move(pool);
  return s;
}

namespace {
// The directory of a file path ("." for a bare name).
std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}
}  // namespace

Status Pool::PublishCreated() {
  // link() publishes only if nothing is at path_ yet: a process creating
  // the same pool at the same moment either published first (EEXIST: the
  // caller opens that one) or finds this one there.
  const int rc = link(creating_.c_str(), path_.c_str());
  const int err = errno;
  std::remove(creating_.c_str());
  creating_.clear();
  if (rc != 0 && err == EEXIST) {
    return Status::Busy(path_ + ": created by another process meanwhile");
  }
  if (rc != 0) {
    return Status::IOError(
        path_ + ": cannot put the new pool in place: " + std::strerror(err));
  }
  // The name is durable before anything is written to the pool.
  return SyncDirectory(DirOf(path_));
}

Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) {
    return Status::IOError("cannot open directory " + dir + ": " +
                           std::strerror(errno));
  }
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) {
    return Status::IOError("cannot sync directory " + dir + ": " +
                           std::strerror(err));
  }
  return Status::OK();
}

namespace {

// Removes the temporary files of pool creations whose process is gone
// (<path>.creating.<pid>); each is as large as the pool.
void RemoveDeadCreations(const std::string& path) {
  const std::string dir = DirOf(path);
  const size_t slash = path.rfind('/');
  const std::string prefix =
      (slash == std::string::npos ? path : path.substr(slash + 1)) +
      ".creating.";
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::remove((dir + "/" + name).c_str());
    }
  }
  closedir(d);
}

}  // namespace

Status Pool::Init(const PoolOptions& o) {
  path_ = o.path;
  info_log_ = o.info_log;
  chunk_size_ = o.chunk_size;
  if (path_.empty()) return Status::InvalidArgument("pool path is empty");
  if (chunk_size_ < 4096 || chunk_size_ > (1ull << 32)) {
    return Status::InvalidArgument("chunk_size must be in [4 KiB, 4 GiB]");
  }
  uint64_t file_size = 0;
  bool exists = FileExists(path_, &file_size);
  if (exists && o.error_if_exists) {
    return Status::InvalidArgument(path_ + ": pool exists (error_if_exists)");
  }
  if (!exists) {
    if (!o.create_if_missing) {
      return Status::InvalidArgument(path_ + ": pool does not exist");
    }
    if (o.size < PMEMOBJ_MIN_POOL) {
      return Status::InvalidArgument(
          path_ + ": pool size " + std::to_string(o.size) +
          " is below the minimum " + std::to_string(PMEMOBJ_MIN_POOL));
    }
    // P8b: built under a temporary name and renamed into place once its
    // root is durable, so a kill during creation never leaves a file at
    // path_ that is not a pool (it refused every later open).
    RemoveDeadCreations(path_);
    creating_ = path_ + ".creating." + std::to_string(getpid());
    std::remove(creating_.c_str());  // this process's, from a failed attempt
    pop_ = pmemobj_create(creating_.c_str(), kLayoutName, o.size, 0666);
    if (!pop_) {
      const std::string err = Errmsg();
      std::remove(creating_.c_str());
      return Status::IOError(path_ + ": cannot create pool: " + err);
    }
    FileExists(creating_, &file_size);
  } else {
    if (file_size == 0) {
      // Not replaced: nothing says whose file it is. It holds no data.
      return Status::Corruption(
          path_ +
          ": not a FlintKV pool: the file is empty (another program's, or a "
          "pool whose creation an older FlintKV was killed in); it holds no "
          "data: delete it and a new pool is created");
    }
    if (file_size < PMEMOBJ_MIN_POOL) {
      return Status::Corruption(path_ + ": not a FlintKV pool (file of " +
                                std::to_string(file_size) +
                                " bytes is smaller than any pool)");
    }
    // Read-only consistency check of libpmemobj's own metadata first, so
    // that a corrupt heap is reported instead of being trusted (P7).
    errno = 0;
    CheckResult check = CheckInSeparateProcess(path_);
    switch (check.kind) {
      case CheckResult::kConsistent:
        break;
      case CheckResult::kUnavailable:
        Log("flintkv: pmempool (Debian package pmdk-tools) not found; "
            "opening " +
            path_ + " without libpmemobj's metadata check");
        break;
      case CheckResult::kInUse:
        // A pool that is open elsewhere is busy, not corrupt.
        return Status::Busy(path_ + ": pool is in use (already open)");
      case CheckResult::kInconsistent:
        return Status::Corruption(
            path_ +
            ": not a valid FlintKV pool: `pmempool check` rejects it (corrupt "
            "or truncated libpmemobj metadata, or not a pmemobj pool)");
      case CheckResult::kCrashed:
        // Not evidence either way, and no reason to open unchecked: the
        // files that crash pmempool are the corrupt ones that also crash
        // libpmemobj in-process. An IOError leaves the pool untouched.
        return Status::IOError(
            path_ + ": not opened: `pmempool check` was killed by signal " +
            std::to_string(check.signal) + " (" + strsignal(check.signal) +
            ") before it could tell whether the pool is consistent; run "
            "`pmempool check -v " +
            path_ + "` to see why");
    }
    pop_ = pmemobj_open(path_.c_str(), kLayoutName);
    if (!pop_) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) {
        return Status::Busy(path_ + ": pool is in use by another process");
      }
      return Status::Corruption(path_ + ": cannot open pool: " + Errmsg());
    }
  }
  base_ = reinterpret_cast<char*>(pop_);
  size_ = file_size;
  // libpmemobj boots the heap with the process-wide arena assignment; only
  // per-thread arenas take heap.thread.arena_id (UseSharedArena). A
  // libpmemobj without the setting has per-thread arenas.
  enum pobj_arenas_assignment_type assignment =
      POBJ_ARENAS_ASSIGNMENT_THREAD_KEY;
  per_thread_arenas_ = pmemobj_ctl_get(nullptr, "heap.arenas_assignment_type",
                                       &assignment) != 0 ||
                       assignment == POBJ_ARENAS_ASSIGNMENT_THREAD_KEY;

  size_t root_size = pmemobj_root_size(pop_);
  if (root_size != 0 && root_size != sizeof(PoolRoot)) {
    return Status::Corruption(path_ + ": root object has size " +
                              std::to_string(root_size) +
                              ", not a FlintKV pool");
  }
  PMEMoid root_oid = pmemobj_root(pop_, sizeof(PoolRoot));
  if (OID_IS_NULL(root_oid)) {
    return Status::IOError(path_ + ": cannot allocate root: " + Errmsg());
  }
  root_ = static_cast<PoolRoot*>(pmemobj_direct(root_oid));
  if (root_->magic == 0 && pmemobj_first(pop_).off == 0) {
    // New pool, or a crash during creation before the magic was persisted.
    root_->format_version = kFormatVersion;
    root_->pool_size = size_;
    root_->next_list_id = 1;
    pmemobj_persist(pop_, root_, sizeof(*root_));  // P8: fields first,
    root_->magic = kPoolMagic;                     // then the magic
    pmemobj_persist(pop_, &root_->magic, sizeof(root_->magic));
  }
  if (!creating_.empty()) {
    Status rs = PublishCreated();
    if (rs.IsBusy()) {  // another process's pool is in place: open that
      pmemobj_close(pop_);
      pop_ = nullptr;
      return Init(o);
    }
    if (!rs.ok()) return rs;
  }
  if (root_->magic != kPoolMagic) {
    return Status::Corruption(path_ + ": bad pool magic");
  }
  if (root_->format_version < kOldestFormatVersion ||
      root_->format_version > kFormatVersion) {
    return Status::InvalidArgument(
        path_ + ": pool format version " +
        std::to_string(root_->format_version) +
        " is not supported (this build reads versions " +
        std::to_string(kOldestFormatVersion) + " to " +
        std::to_string(kFormatVersion) +
        "); open it with the FlintKV release that wrote it");
  }
  current_format_.store(root_->format_version == kFormatVersion,
                        std::memory_order_release);
  Status s = CheckObjects();
  if (!s.ok()) return s;
  used_bytes_.store(BytesInUse() + (size_ - size_ * 15 / 16),
                    std::memory_order_relaxed);  // ~6% for pmemobj metadata

  is_pmem_ = pmem_is_pmem(base_, size_) != 0;
  Log(std::string("flintkv: pool ") + path_ + " (" +
      std::to_string(size_ >> 20) + " MiB) is " +
      (is_pmem_ ? "on persistent memory (fsdax)"
                : "emulated PMEM (not DAX): process crashes are survived, "
                  "power failures are not"));
  return Status::OK();
}

// Validates every object before it writes anything (P8a): a refused pool is
// left as it was; then corrects state words, finishes retirements and
// frees orphaned chunks.
Status Pool::CheckObjects() {
  std::lock_guard<std::mutex> g(EnumMutex());
  std::vector<uint64_t> live_lists;
  std::vector<PMEMoid> retired;
  std::vector<std::pair<ListRoot*, ListState>> corrections;
  PMEMoid oid;
  POBJ_FOREACH(pop_, oid) {
    uint64_t type = pmemobj_type_num(oid);
    size_t usable = pmemobj_alloc_usable_size(oid);
    char* p = AlignUp(pmemobj_direct(oid));
    if (type == kTypeList) {
      auto* l = reinterpret_cast<ListRoot*>(p);
      if (usable < sizeof(ListRoot) + kAlignSlack || l->magic != kListMagic ||
          (l->kind != kListStandalone && l->kind != kListMemtable) ||
          !l->head.HeaderValid()) {
        return Status::Corruption(path_ + ": list object at offset " +
                                  std::to_string(oid.off) + " is corrupt");
      }
      if (l->list_id >= root_->next_list_id) {
        return Status::Corruption(path_ + ": list id out of range");
      }
      char word[16];
      std::snprintf(word, sizeof(word), "0x%08x", l->state_word);
      if (!IdentityIntact(*l)) {
        return Status::Corruption(
            path_ + ": list " + std::to_string(l->list_id) + " at offset " +
            std::to_string(oid.off) +
            ": its id or kind fails its check (a flipped bit?); nothing was "
            "changed. Restore the pool from a copy taken before the damage");
      }
      ListState state;
      bool corrected;
      if (!DecodeListState(*l, &state, &corrected)) {
        // Not read as any state: as "retired" it would be freed, as
        // "unflushed" a flushed list whose newer writes were compacted
        // would be replayed over them.
        return Status::Corruption(
            path_ + ": list " + std::to_string(l->list_id) + ": state word " +
            word +
            " is damaged beyond correction (more than one flipped bit); "
            "nothing was changed. Restore the pool from a copy taken before "
            "the damage");
      }
      if (corrected) {
        corrections.push_back({l, state});
        repairs_.push_back(
            "list " + std::to_string(l->list_id) + ": state word " + word +
            " had a flipped bit; corrected to state " + std::to_string(state));
      }
      if (state == kListRetired) {
        retired.push_back(oid);
      } else {
        live_lists.push_back(l->list_id);
      }
    } else if (type == kTypeChunk) {
      auto* h = reinterpret_cast<ChunkHeader*>(p);
      if (usable < sizeof(ChunkHeader) + kAlignSlack ||
          h->magic != kChunkMagic ||
          h->size > usable - sizeof(ChunkHeader) - kAlignSlack ||
          !IdentityIntact(*h)) {
        return Status::Corruption(path_ + ": chunk at offset " +
                                  std::to_string(oid.off) + " is corrupt");
      }
    } else {
      return Status::Corruption(path_ + ": unknown object type " +
                                std::to_string(type));
    }
  }
  for (auto& [l, state] : corrections) {
    UseCurrentFormat();  // P8a: the format is durable before a checked word
    l->state_word = CheckedWord(state, kStateSalt);
    pmemobj_persist(pop_, &l->state_word, sizeof(l->state_word));
  }
  for (const std::string& r : repairs_)
    Log("flintkv: pool " + path_ + ": " + r);
  // Finish retirements interrupted by a crash, and free chunks whose owner
  // list is gone (a crash during DropList).
  std::sort(live_lists.begin(), live_lists.end());
  std::vector<PMEMoid> orphans;
  POBJ_FOREACH(pop_, oid) {
    if (pmemobj_type_num(oid) != kTypeChunk) continue;
    auto* h = reinterpret_cast<ChunkHeader*>(AlignUp(pmemobj_direct(oid)));
    if (!std::binary_search(live_lists.begin(), live_lists.end(), h->list_id)) {
      orphans.push_back(oid);
    }
  }
  for (PMEMoid& c : orphans) pmemobj_free(&c);
  for (PMEMoid& l : retired) pmemobj_free(&l);
  return Status::OK();
}

Pool::~Pool() {
  if (pop_) pmemobj_close(pop_);
}

void Pool::Log(const std::string& msg) const {
  // No sink, no notice: a library does not write to its host's stderr.
  if (info_log_) info_log_(msg);
}

// libpmemobj gives each thread its own arena, and the run an arena has
// active keeps its free blocks from every other arena: with run-sized
// chunks (below 256 KiB) what a flush thread freed stayed out of reach of
// the writers that waited for it, up to the whole pool
// (PoolTest.SpaceFreedByOneThreadServesAnother). Allocations here are
// serialized by EnumMutex anyway (one per chunk, not per node), so every
// thread allocates from the pool's first arena. The assignment is per
// thread and per pool (libpmemobj keeps it in thread-local storage), so it
// is set on every allocation: a thread may serve several pools.
// With the global assignment (heap.arenas_assignment_type=global, e.g. from
// PMEMOBJ_CONF) every thread already uses one arena, and heap.thread.arena_id
// must not be set: libpmemobj would take its arena pointer for a TLS key and
// corrupt another library's thread-local value
// (PoolTest.GlobalArenaAssignmentLeavesThreadLocalsAlone).
void Pool::UseSharedArena() {
  if (!per_thread_arenas_) return;
  unsigned arena = 1;  // the first automatic arena (ids start at 1)
  if (pmemobj_ctl_set(pop_, "heap.thread.arena_id", &arena) != 0 &&
      !arena_warned_) {
    arena_warned_ = true;
    Log("flintkv: " + path_ +
        ": cannot give every thread libpmemobj's first arena (" + Errmsg() +
        "); space one thread frees may not serve another");
  }
}

Status Pool::CreateList(ListKind kind, ListRoot** out, const void* user,
                        size_t user_len) {
  if (user_len > sizeof(ListRoot::user)) {
    return Status::InvalidArgument("list user area is 128 bytes");
  }
  std::lock_guard<std::mutex> g(EnumMutex());
  UseCurrentFormat();
  ListCtorArgs args{root_->next_list_id, kind, user, user_len};
  // P9: the id is consumed before the list exists: a crash may skip an id,
  // never reuse one.
  root_->next_list_id++;
  pmemobj_persist(pop_, &root_->next_list_id, sizeof(uint64_t));
  PMEMoid oid;
  UseSharedArena();
  if (pmemobj_alloc(pop_, &oid, sizeof(ListRoot) + kAlignSlack, kTypeList,
                    ListCtor, &args) != 0) {
    return Status::NoSpace(
        path_ + ": pool is full (cannot create a list): " + Errmsg());
  }
  *out = reinterpret_cast<ListRoot*>(AlignUp(pmemobj_direct(oid)));
  used_bytes_.fetch_add(pmemobj_alloc_usable_size(oid),
                        std::memory_order_relaxed);
  return Status::OK();
}

template <class T, class F>
void Pool::ForEachOf(uint64_t type, F&& f) const {
  std::lock_guard<std::mutex> g(EnumMutex());
  PMEMoid oid;
  POBJ_FOREACH(pop_, oid) {
    if (pmemobj_type_num(oid) != type) continue;
    f(reinterpret_cast<T*>(AlignUp(pmemobj_direct(oid))), oid);
  }
}

std::vector<ListRoot*> Pool::Lists() const {
  std::vector<ListRoot*> lists;
  ForEachOf<ListRoot>(kTypeList, [&](ListRoot* l, PMEMoid) {
    if (StateOf(*l) != kListRetired) lists.push_back(l);
  });
  std::sort(lists.begin(), lists.end(),
            [](ListRoot* a, ListRoot* b) { return a->list_id < b->list_id; });
  return lists;
}

std::vector<ChunkInfo> Pool::ChunksOf(uint64_t list_id) const {
  std::vector<ChunkInfo> chunks;
  ForEachOf<ChunkHeader>(kTypeChunk, [&](ChunkHeader* h, PMEMoid) {
    if (h->list_id == list_id) {
      chunks.push_back({ToOffset(h) + sizeof(ChunkHeader), h->size});
    }
  });
  std::sort(chunks.begin(), chunks.end(),
            [](const ChunkInfo& a, const ChunkInfo& b) {
              return a.offset < b.offset;
            });
  return chunks;
}

void Pool::UseCurrentFormat() {
  if (current_format_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> g(format_mu_);
  if (current_format_.load(std::memory_order_relaxed)) return;
  // Version 1 differs only in bare state words and zero identity checks,
  // which this build reads; from the first checked word on, a build that
  // reads only version 1 must refuse the pool by its version (P8a: durable
  // before the caller writes that word).
  root_->format_version = kFormatVersion;
  pmemobj_persist(pop_, &root_->format_version, sizeof(root_->format_version));
  current_format_.store(true, std::memory_order_release);
  Log("flintkv: pool " + path_ + ": format version 1 upgraded to " +
      std::to_string(kFormatVersion) +
      "; FlintKV builds that read only version 1 cannot open it now");
}

void Pool::SetListState(ListRoot* list, ListState state) {
  UseCurrentFormat();
  list->state_word = CheckedWord(state, kStateSalt);
  // P6: Retired is durable before any space is freed or a reader trusts it.
  pmemobj_persist(pop_, &list->state_word, sizeof(list->state_word));
}

void Pool::DropList(ListRoot* list) {
  SetListState(list, kListRetired);  // P6: never recovered from now on
  std::lock_guard<std::mutex> g(EnumMutex());
  std::vector<PMEMoid> victims;
  PMEMoid oid;
  PMEMoid list_oid = OID_NULL;
  POBJ_FOREACH(pop_, oid) {
    char* p = AlignUp(pmemobj_direct(oid));
    uint64_t type = pmemobj_type_num(oid);
    if (type == kTypeChunk &&
        reinterpret_cast<ChunkHeader*>(p)->list_id == list->list_id) {
      victims.push_back(oid);
    } else if (type == kTypeList && p == reinterpret_cast<char*>(list)) {
      list_oid = oid;
    }
  }
  uint64_t freed = 0;
  for (PMEMoid& c : victims) {
    freed += pmemobj_alloc_usable_size(c);
    pmemobj_free(&c);
  }
  if (!OID_IS_NULL(list_oid)) {
    freed += pmemobj_alloc_usable_size(list_oid);
    pmemobj_free(&list_oid);
  }
  used_bytes_.fetch_sub(std::min(freed, used_bytes_.load()),
                        std::memory_order_relaxed);
}

uint64_t Pool::pool_uuid_lo() const { return pmemobj_oid(root_).pool_uuid_lo; }

size_t Pool::RetiredLists() const {
  size_t n = 0;
  ForEachOf<ListRoot>(kTypeList, [&](ListRoot* l, PMEMoid) {
    n += StateOf(*l) == kListRetired;
  });
  return n;
}

uint64_t Pool::ExactChunkBytes(size_t min_len) const {
  return ChunkUsable(min_len, ChunkFit::kExact) + kChunkOverhead +
         kPmemobjHeaderAllowance;
}

uint64_t Pool::UnheldBytes() const {
  constexpr uint64_t kLibpmemobjMetadata = 4ull << 20;
  const uint64_t held = BytesInUse() + kLibpmemobjMetadata;
  return held >= size_ ? 0 : size_ - held;
}

bool Pool::HasRoomForChunk(size_t min_len) {
  const uint64_t usable = ChunkUsable(min_len, ChunkFit::kExact);
  pobj_action act;
  std::lock_guard<std::mutex> g(EnumMutex());
  UseSharedArena();  // the arena NewChunk uses
  PMEMoid oid = pmemobj_reserve(pop_, &act, usable + kChunkOverhead, 0);
  if (OID_IS_NULL(oid)) return false;
  pmemobj_cancel(pop_, &act, 1);
  return true;
}

uint64_t Pool::ChunkBytesOutside(uint64_t list_id) const {
  uint64_t total = 0;
  ForEachOf<ChunkHeader>(kTypeChunk, [&](ChunkHeader* h, PMEMoid oid) {
    if (h->list_id != list_id) total += pmemobj_alloc_usable_size(oid);
  });
  return total;
}

uint64_t Pool::BytesInUse() const {
  std::lock_guard<std::mutex> g(EnumMutex());
  uint64_t total = 0;
  PMEMoid oid;
  POBJ_FOREACH(pop_, oid) total += pmemobj_alloc_usable_size(oid);
  return total;
}

// Normal chunks fill libpmemobj's allocation units exactly; a larger
// request (one big node) gets what it needs. Exact ones are rounded up to
// whole 256 KiB units, which libpmemobj allocates anyway; below one unit
// they get a normal chunk: objects of odd sizes there come from
// per-size-class runs, and a small pool then fails them while mostly free
// (seen with 40 KiB requests in a 16 MiB pool).
uint64_t Pool::ChunkUsable(size_t min_len, ChunkFit fit) const {
  const uint64_t normal =
      chunk_size_ - kPmemobjHeaderAllowance - kChunkOverhead;
  const uint64_t overhead = kPmemobjHeaderAllowance + kChunkOverhead;
  uint64_t usable = std::max<uint64_t>(normal, min_len);
  if (fit == ChunkFit::kExact &&
      (min_len > normal || min_len + overhead > kHugeUnit)) {
    usable =
        (min_len + overhead + kHugeUnit - 1) / kHugeUnit * kHugeUnit - overhead;
  }
  return usable;
}

Status Pool::NewChunk(uint64_t list_id, size_t min_len, ChunkFit fit,
                      bool use_reserve, char** begin, size_t* len) {
  const uint64_t usable = ChunkUsable(min_len, fit);
  if (!use_reserve && ApproxFreeBytes() < usable + reserve_bytes_) {
    return Status::NoSpace(path_ + ": pool is full (" +
                           std::to_string(size_ >> 20) +
                           " MiB, reserve reached)");
  }
  ChunkCtorArgs args{list_id, usable};
  PMEMoid oid;
  int rc;
  {
    std::lock_guard<std::mutex> g(EnumMutex());
    UseCurrentFormat();
    UseSharedArena();
    rc = pmemobj_alloc(pop_, &oid, usable + kChunkOverhead, kTypeChunk,
                       ChunkCtor, &args);
  }
  if (rc != 0) {
    return Status::NoSpace(path_ + ": pool is full (" +
                           std::to_string(size_ >> 20) + " MiB): " + Errmsg());
  }
  *begin = AlignUp(pmemobj_direct(oid)) + sizeof(ChunkHeader);
  *len = usable;
  used_bytes_.fetch_add(pmemobj_alloc_usable_size(oid),
                        std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace pmem
}  // namespace flintkv

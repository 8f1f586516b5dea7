#include "tests/crash/sim_domain.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace flintkv {
namespace pmem {

namespace internal {
std::atomic<int> g_sim_fault{0};
}  // namespace internal

namespace {

std::atomic<SimDomain*> g_domain{nullptr};
thread_local SimDomain* t_override = nullptr;
thread_local bool t_override_set = false;

// The simulation reads cache lines that other workload threads may be
// writing at the same moment (neighbouring nodes share lines); real
// hardware does this all the time. Word-sized volatile accesses outside
// TSAN's instrumentation keep each 8-byte word untorn and the sanitizer
// quiet about a race that belongs to the model, not to the code under test.
#if defined(__GNUC__) || defined(__clang__)
#define FLINTKV_SIM_NO_TSAN __attribute__((no_sanitize("thread"), noinline))
#else
#define FLINTKV_SIM_NO_TSAN
#endif

FLINTKV_SIM_NO_TSAN void RacyCopyLine(char* dst, const char* src) {
  auto* d = reinterpret_cast<uint64_t*>(dst);
  auto* s = reinterpret_cast<const volatile uint64_t*>(src);
  for (size_t i = 0; i < kCacheLine / 8; i++) d[i] = s[i];
}

FLINTKV_SIM_NO_TSAN bool RacyLineDiffers(const char* live,
                                         const char* durable) {
  auto* a = reinterpret_cast<const volatile uint64_t*>(live);
  auto* b = reinterpret_cast<const uint64_t*>(durable);
  for (size_t i = 0; i < kCacheLine / 8; i++) {
    if (a[i] != b[i]) return true;
  }
  return false;
}

uint64_t AlignUp64(uint64_t v) {
  return (v + kCacheLine - 1) & ~(kCacheLine - 1);
}

char* AllocZeroed(uint64_t size) {
  uint64_t alloc = (std::max<uint64_t>(size, 4096) + 4095) & ~uint64_t{4095};
  void* p = std::aligned_alloc(4096, alloc);
  if (p) std::memset(p, 0, size);
  return static_cast<char*>(p);
}

}  // namespace

// ---- SimRegion ----

bool SimRegion::AllocateBase(uint64_t size) {
  size_ = std::max<uint64_t>(AlignUp64(size), kFirstChunk + kCacheLine);
  base_ = AllocZeroed(size_);
  if (base_) return true;
  valid_ = false;
  size_ = 0;
  return false;
}

SimRegion::SimRegion(uint64_t size, uint64_t chunk_size)
    : chunk_size_(chunk_size) {
  if (!AllocateBase(size)) return;
  header()->magic = kMagic;
  header()->used = kFirstChunk;
  ListRoot* l = root();
  l->magic = kListMagic;
  l->list_id = 1;
  l->kind = kListStandalone;
  l->state_word = CheckedWord(kListActive, kStateSalt);
  l->head.check = NvmNode::HeaderCheck(0, 0, 0);
  used_.store(kFirstChunk);
}

SimRegion::SimRegion(const char* image, uint64_t len, uint64_t size)
    : chunk_size_(4096) {
  if (!AllocateBase(size)) return;
  std::memcpy(base_, image, std::min(len, size_));
  valid_ = len >= kFirstChunk && header()->magic == kMagic &&
           header()->used >= kFirstChunk && header()->used <= len &&
           header()->used <= size_;
  if (valid_) used_.store(header()->used);
}

SimRegion::~SimRegion() { std::free(base_); }

std::vector<SimRegion::Chunk> SimRegion::Chunks() const {
  std::vector<Chunk> out;
  uint64_t end = used();
  uint64_t off = kFirstChunk;
  while (off + sizeof(ChunkHeader) <= end) {
    auto* h = FromOffset<ChunkHeader>(off);
    if (h->magic != kChunkMagic || h->size > end - off - sizeof(ChunkHeader)) {
      break;
    }
    out.push_back({off + sizeof(ChunkHeader), h->size});
    off += sizeof(ChunkHeader) + h->size;
  }
  return out;
}

std::vector<ChunkInfo> SimRegion::ChunksOf(uint64_t) const {
  std::vector<ChunkInfo> out;
  for (const Chunk& c : Chunks()) out.push_back({c.offset, c.len});
  return out;
}

Status SimRegion::NewChunk(uint64_t list_id, size_t min_len, ChunkFit fit,
                           bool use_reserve, char** begin, size_t* len) {
  uint64_t usable = AlignUp64(fit == ChunkFit::kExact
                                  ? min_len
                                  : std::max<uint64_t>(chunk_size_, min_len));
  std::lock_guard<std::mutex> g(mu_);
  uint64_t off = AlignUp64(header()->used);
  if (off + sizeof(ChunkHeader) + usable > size_) {
    return Status::NoSpace("simulated region is full");
  }
  auto alloc = [&] {
    auto* h = FromOffset<ChunkHeader>(off);
    h->magic = kChunkMagic;
    h->list_id = list_id;
    h->size = usable;
    header()->used = off + sizeof(ChunkHeader) + usable;
    used_.store(header()->used, std::memory_order_release);
  };
  if (domain_) {
    // Atomic allocation: the chunk exists durably before anyone writes it.
    domain_->Atomically(alloc,
                        {{off, sizeof(ChunkHeader)}, {0, sizeof(Header)}});
  } else {
    alloc();
  }
  *begin = base_ + off + sizeof(ChunkHeader);
  *len = usable;
  return Status::OK();
}

// ---- CrashState ----

void CrashState::Build(const std::vector<bool>& pick,
                       std::vector<char>* out) const {
  *out = durable;
  for (size_t i = 0; i < candidates.size() && i < pick.size(); i++) {
    if (!pick[i]) continue;
    const Line& l = candidates[i];
    if (l.offset + kCacheLine <= out->size()) {
      std::memcpy(out->data() + l.offset, l.data, kCacheLine);
    }
  }
}

std::vector<std::vector<bool>> EvictionSubsets(size_t n, int exhaustive_max,
                                               int randoms,
                                               std::mt19937_64* rng) {
  std::vector<std::vector<bool>> out;
  if (n <= static_cast<size_t>(exhaustive_max)) {
    for (uint64_t m = 0; m < (uint64_t{1} << n); m++) {
      std::vector<bool> s(n);
      for (size_t i = 0; i < n; i++) s[i] = (m >> i) & 1;
      out.push_back(std::move(s));
    }
    return out;
  }
  out.emplace_back(n, false);
  out.emplace_back(n, true);
  for (size_t i = 0; i < n; i++) {
    std::vector<bool> s(n, false);
    s[i] = true;
    out.push_back(std::move(s));
  }
  if (n <= 24) {
    for (size_t i = 0; i < n; i++) {
      std::vector<bool> s(n, true);
      s[i] = false;
      out.push_back(std::move(s));
    }
  }
  for (int r = 0; r < randoms; r++) {
    std::vector<bool> s(n);
    for (size_t i = 0; i < n; i++) s[i] = ((*rng)() & 1) != 0;
    out.push_back(std::move(s));
  }
  return out;
}

// ---- SimDomain ----

SimDomain::SimDomain(SimRegion* region)
    : region_(region),
      durable_(region->base(), region->base() + region->size()) {
  region_->set_domain(this);
}

SimDomain::~SimDomain() {
  region_->set_domain(nullptr);
  SimDomain* self = this;
  g_domain.compare_exchange_strong(self, nullptr);
}

void SimDomain::PendLocked(uint64_t line, int word) {
  Pending pe;
  pe.offset = line;
  pe.seq = ++flush_seq_;
  pe.word = word;
  RacyCopyLine(pe.data, region_->base() + line);
  pending_[std::this_thread::get_id()].push_back(pe);
}

void SimDomain::Flush(const void* p, size_t n) {
  if (n == 0) return;
  uint64_t first = region_->ToOffset(p) & ~uint64_t{kCacheLine - 1};
  uint64_t end = region_->ToOffset(p) + n;
  std::lock_guard<std::mutex> g(mu_);
  for (uint64_t off = first; off < end; off += kCacheLine) {
    if (off + kCacheLine > region_->size()) break;  // not ours: ignore
    PendLocked(off, kWholeLine);
  }
}

void SimDomain::FlushWord(const void* p) {
  const uint64_t off = region_->ToOffset(p);
  if (off % sizeof(uint64_t) != 0) std::abort();  // MOVNTI's aligned words
  const uint64_t line = off & ~uint64_t{kCacheLine - 1};
  std::lock_guard<std::mutex> g(mu_);
  if (line + kCacheLine > region_->size()) return;  // not ours: ignore
  // The whole line is copied (LabelOf reads it); only the word is applied.
  PendLocked(line, static_cast<int>((off - line) / sizeof(uint64_t)));
}

std::string SimDomain::LabelOf(const std::vector<Pending>& p) const {
  if (p.empty()) return "empty";
  const uint64_t root = SimRegion::kRootOffset;
  const uint64_t batch_line = root + offsetof(ListRoot, commit_version);
  const uint64_t head_line = root + offsetof(ListRoot, head);
  std::string label;
  for (const Pending& x : p) {
    std::string c;
    if (x.offset == batch_line) {
      // Name the field this flush changes (both share the line).
      uint64_t cv, dcv, cut, dcut;
      std::memcpy(&cv, x.data + 0, 8);
      std::memcpy(&dcv, durable_.data() + x.offset, 8);
      std::memcpy(&cut, x.data + 16, 8);
      std::memcpy(&dcut, durable_.data() + x.offset + 16, 8);
      c = cv != dcv     ? "root.commit_version"
          : cut != dcut ? "root.durable_cut"
                        : "root.batch_mode";
    } else if (x.offset == head_line) {
      c = "head.next";
    } else if (x.offset < SimRegion::kFirstChunk) {
      c = "root";
    } else {
      c = "node";
    }
    if (label.find(c) == std::string::npos) {
      label += label.empty() ? c : "+" + c;
    }
  }
  return label;
}

void SimDomain::Fence() {
  FenceLocked();
  uint32_t one_in = jitter_one_in_.load(std::memory_order_relaxed);
  if (one_in) {
    thread_local std::mt19937 rng(static_cast<uint32_t>(
        std::hash<std::thread::id>()(std::this_thread::get_id())));
    if (rng() % one_in == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(jitter_micros_));
    }
  }
}

void SimDomain::FenceLocked() {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t idx = fences_.fetch_add(1, std::memory_order_relaxed) + 1;
  auto it = pending_.find(std::this_thread::get_id());
  if (hook_) {
    static const std::vector<Pending> kNoPending;
    hook_(this, idx, LabelOf(it == pending_.end() ? kNoPending : it->second));
  }
  if (it == pending_.end()) return;
  for (const Pending& x : it->second) ApplyLocked(x);
  it->second.clear();
}

void SimDomain::PutBackNewerWords(uint64_t line, uint64_t seq,
                                  char* data) const {
  auto words = durable_words_.find(line);
  if (words == durable_words_.end()) return;
  for (const auto& w : words->second) {
    if (w.second.seq > seq) std::memcpy(data + w.first * 8, &w.second.value, 8);
  }
}

void SimDomain::ApplyLocked(const Pending& x) {
  uint64_t& d = durable_seq_[x.offset];
  if (x.seq <= d) return;  // the image holds newer content already
  if (x.word == kWholeLine) {
    d = x.seq;
    std::memcpy(durable_.data() + x.offset, x.data, kCacheLine);
    auto words = durable_words_.find(x.offset);
    if (words == durable_words_.end()) return;
    // A word made durable after this snapshot was taken stays durable; the
    // others the snapshot holds, or newer.
    PutBackNewerWords(x.offset, x.seq, durable_.data() + x.offset);
    for (auto w = words->second.begin(); w != words->second.end();) {
      w = w->second.seq > x.seq ? std::next(w) : words->second.erase(w);
    }
    return;
  }
  // One word: the line's durable seq stays (the rest of the line is not
  // written back), the word remembers its own.
  if (x.seq <= DurableWordSeq(x.offset, x.word)) return;
  DurableWord dw;
  dw.seq = x.seq;
  std::memcpy(&dw.value, x.data + x.word * 8, 8);
  durable_words_[x.offset][x.word] = dw;
  std::memcpy(durable_.data() + x.offset + x.word * 8, &dw.value, 8);
}

uint64_t SimDomain::DurableWordSeq(uint64_t line, int word) const {
  auto words = durable_words_.find(line);
  if (words == durable_words_.end()) return 0;
  auto w = words->second.find(word);
  return w == words->second.end() ? 0 : w->second.seq;
}

uint64_t SimDomain::DurableSeq(uint64_t offset) const {
  auto it = durable_seq_.find(offset);
  return it == durable_seq_.end() ? 0 : it->second;
}

void SimDomain::Atomically(
    const std::function<void()>& fn,
    const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  std::lock_guard<std::mutex> g(mu_);
  fn();
  for (const auto& r : ranges) {
    if (r.first > durable_.size() || r.second > durable_.size() - r.first) {
      continue;
    }
    std::memcpy(durable_.data() + r.first, region_->base() + r.first, r.second);
    // Lines wholly inside the range now hold current content: newer than
    // any pending flush of them. A partly covered line keeps its seq (a
    // pending flush of its other bytes may still be newer).
    uint64_t seq = ++flush_seq_;
    for (uint64_t l = AlignUp64(r.first); l + kCacheLine <= r.first + r.second;
         l += kCacheLine) {
      durable_seq_[l] = seq;
    }
  }
}

void SimDomain::set_fence_hook(FenceHook hook) {
  std::lock_guard<std::mutex> g(mu_);
  hook_ = std::move(hook);
}

CrashState SimDomain::CaptureLocked(uint64_t fence_index,
                                    const std::string& label) {
  CrashState cs;
  cs.fence_index = fence_index;
  cs.label = label;
  uint64_t used =
      std::min<uint64_t>(AlignUp64(region_->used()), durable_.size());
  cs.durable.assign(durable_.begin(), durable_.begin() + used);
  // Flushed-but-unfenced lines first (their flush-time content may already
  // have been written back), oldest flush first, then current content: on
  // the same line a later candidate wins. Snapshots older than the durable
  // content are no candidates (a write-back never goes back in time).
  std::vector<const Pending*> flushed;
  for (const auto& kv : pending_) {
    for (const Pending& x : kv.second) flushed.push_back(&x);
  }
  std::sort(flushed.begin(), flushed.end(),
            [](const Pending* a, const Pending* b) { return a->seq < b->seq; });
  for (const Pending* p : flushed) {
    const Pending& x = *p;
    if (x.offset + kCacheLine > used) continue;
    if (x.seq <= DurableSeq(x.offset)) continue;
    if (std::memcmp(x.data, durable_.data() + x.offset, kCacheLine) == 0) {
      continue;
    }
    CrashState::Line l;
    l.offset = x.offset;
    if (x.word != kWholeLine) {
      if (x.seq <= DurableWordSeq(x.offset, x.word)) continue;
      // The word alone may have reached NVM: the durable line with it.
      std::memcpy(l.data, durable_.data() + x.offset, kCacheLine);
      std::memcpy(l.data + x.word * 8, x.data + x.word * 8, 8);
      if (std::memcmp(l.data, durable_.data() + x.offset, kCacheLine) != 0) {
        cs.candidates.push_back(l);
      }
      continue;
    }
    if (!RacyLineDiffers(region_->base() + x.offset, x.data)) continue;
    std::memcpy(l.data, x.data, kCacheLine);
    // A word made durable since this snapshot was taken stays durable
    // (as in ApplyLocked): the write-back cannot take it back in time.
    PutBackNewerWords(x.offset, x.seq, l.data);
    if (std::memcmp(l.data, durable_.data() + x.offset, kCacheLine) == 0) {
      continue;
    }
    cs.candidates.push_back(l);
  }
  for (uint64_t off = 0; off + kCacheLine <= used; off += kCacheLine) {
    if (RacyLineDiffers(region_->base() + off, durable_.data() + off)) {
      CrashState::Line l;
      l.offset = off;
      RacyCopyLine(l.data, region_->base() + off);
      cs.candidates.push_back(l);
    }
  }
  return cs;
}

CrashState SimDomain::Capture(const std::string& label) {
  std::lock_guard<std::mutex> g(mu_);
  return CaptureLocked(fences_.load(std::memory_order_relaxed), label);
}

SimDomain* SimDomain::Current() {
  if (t_override_set) return t_override;
  return g_domain.load(std::memory_order_acquire);
}

void SimDomain::SetGlobal(SimDomain* d) {
  g_domain.store(d, std::memory_order_release);
}

SimDomain::ScopedThreadOverride::ScopedThreadOverride(SimDomain* d)
    : saved_(t_override), saved_set_(t_override_set) {
  t_override = d;
  t_override_set = true;
}

SimDomain::ScopedThreadOverride::~ScopedThreadOverride() {
  t_override = saved_;
  t_override_set = saved_set_;
}

// ---- faults ----

using memtable::Fault;

void SetSimFault(Fault f) {
  internal::g_sim_fault.store(static_cast<int>(f), std::memory_order_relaxed);
}

Fault SimFault() {
  return static_cast<Fault>(
      internal::g_sim_fault.load(std::memory_order_relaxed));
}

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kNone:
      return "none";
    case Fault::kNoNodeFlush:
      return "kNoNodeFlush";
    case Fault::kNoPrepareFence:
      return "kNoPrepareFence";
    case Fault::kNoVersionFlush:
      return "kNoVersionFlush";
    case Fault::kNoLinkFlush:
      return "kNoLinkFlush";
    case Fault::kBatchModeBeforeCommit:
      return "kBatchModeBeforeCommit";
    case Fault::kNoMaxRule:
      return "kNoMaxRule";
    case Fault::kPublishBeforeGroupFence:
      return "kPublishBeforeGroupFence";
    case Fault::kCutBeforeDrain:
      return "kCutBeforeDrain";
    case Fault::kNoCutRule:
      return "kNoCutRule";
    case Fault::kGcUnlinkNotPersisted:
      return "kGcUnlinkNotPersisted";
    case Fault::kGcNoWeakDrain:
      return "kGcNoWeakDrain";
    case Fault::kNoWeakReflush:
      return "kNoWeakReflush";
  }
  return "?";
}

}  // namespace pmem
}  // namespace flintkv

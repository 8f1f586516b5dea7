// Simulated persistence domain for crash-injection tests.
//
// A process kill leaves every store in the page cache, so it cannot tell a
// missing flush or fence from a correct one. This simulation can: it keeps,
// next to the working memory of a SimRegion (what the CPU caches show), a
// separate *durable image* (what NVM holds), and updates the durable image
// only as the paper's memory model (§2.3) allows:
//  - Flush(p, n) by thread T tags every cache line of [p, p+n) in T's
//    pending set, together with the line's content at the time of the flush
//    (the CLWB "tags the last write on x by the same thread").
//  - FlushWord(p) (a non-temporal store) tags the aligned 8-byte word at p
//    alone: T's fence makes that word durable and leaves the rest of its
//    line as the durable image has it (a word made durable this way is
//    kept when an older snapshot of its line lands later).
//  - Fence() / FullFence() by T copies T's pending lines, with their
//    flush-time content, into the durable image, unless the image already
//    holds newer content of that line (made durable by another thread since
//    T's flush: a write-back never goes back in time). Another thread's
//    fence does not drain T's flushes.
//  - At any time, the cache may evict any dirty line: a crash image is the
//    durable image plus an adversarially chosen subset of candidate lines
//    (every line whose current content differs from the durable image, and
//    every flushed-but-unfenced line with its flush-time content).
// Capturing flush-time content (rather than re-reading at the fence) is the
// conservative choice: a fence guarantees only what was written before the
// flush; stores after it reach NVM only through an eviction, which the
// adversary models separately.
//
// Crash points are fences: a hook installed with set_fence_hook() runs at
// every fence, *before* the fence takes effect, with the domain lock held;
// it may call CaptureLocked() to record the crash state and let the workload
// continue. Each fence carries a label (the named point) derived from what
// it drains, e.g. "root.commit_version" or "node.next".
//
// Not modelled (see docs/crash_injection.md): intermediate values a line
// held between two of our observations, store-buffer reordering (stores are
// taken to reach the cache in program order), and torn 8-byte words.
//
// Thread safety: Flush/Fence/CaptureLocked and NewChunk are thread-safe.
// Current() is a process-wide domain, overridable per thread (recovery of a
// captured image runs on its own domain while the workload is paused).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "flintkv/status.h"
#include "memtable/policy_seams.h"
#include "pmem/layout.h"
#include "pmem/persist.h"
#include "pmem/region.h"

namespace flintkv {
namespace pmem {

class SimDomain;

// A DRAM buffer laid out like a one-list pool: a SimHeader, one ListRoot,
// then chunks (ChunkHeader + usable bytes) handed out by a bump allocator.
// Chunk allocation is atomic and durable at once (like libpmemobj's atomic
// allocation): the header and the allocator's high-water mark go straight
// into the attached domain's durable image.
class SimRegion : public Region {
 public:
  static constexpr uint64_t kMagic = 0x314d49534b544e46ull;  // "FNTKSIM1"
  static constexpr uint64_t kRootOffset = kCacheLine;
  static constexpr uint64_t kFirstChunk = kRootOffset + sizeof(ListRoot);

  // A fresh region of `size` bytes: zeroed, with an empty standalone list.
  SimRegion(uint64_t size, uint64_t chunk_size);
  // A region whose content is a copy of image[0, len) (a crash image),
  // mapped at a new address. Check Valid() before use.
  SimRegion(const char* image, uint64_t len, uint64_t size);
  ~SimRegion() override;
  SimRegion(const SimRegion&) = delete;
  SimRegion& operator=(const SimRegion&) = delete;

  // False if the image's header is not a SimRegion header.
  bool Valid() const { return valid_; }
  ListRoot* root() const { return FromOffset<ListRoot>(kRootOffset); }
  // Bytes in use ([0, used) holds everything that was ever written).
  uint64_t used() const { return used_.load(std::memory_order_acquire); }
  struct Chunk {
    uint64_t offset;  // first usable byte
    uint64_t len;
  };
  // Chunks in offset order (parsed from the headers; stops at a bad one).
  std::vector<Chunk> Chunks() const;
  // The region holds one list: every chunk.
  std::vector<ChunkInfo> ChunksOf(uint64_t list_id) const override;

  void set_domain(SimDomain* d) { domain_ = d; }

  Status NewChunk(uint64_t list_id, size_t min_len, ChunkFit fit,
                  bool use_reserve, char** begin, size_t* len) override;

 private:
  struct Header {
    uint64_t magic;
    uint64_t used;
  };
  Header* header() const { return reinterpret_cast<Header*>(base_); }
  // Zeroed memory of at least `size` bytes; false (and an invalid region)
  // if none.
  bool AllocateBase(uint64_t size);

  uint64_t chunk_size_;
  bool valid_ = true;
  std::mutex mu_;                  // serialises NewChunk
  std::atomic<uint64_t> used_{0};  // mirrors header()->used
  SimDomain* domain_ = nullptr;
};

// One captured crash state: the durable image plus the candidate lines the
// adversary may add ("evict") to it.
struct CrashState {
  uint64_t fence_index = 0;   // 1-based index of the fence in its domain
  std::string label;          // named point of the fence
  std::vector<char> durable;  // durable image of [0, used)
  struct Line {
    uint64_t offset;  // 64-byte aligned
    char data[kCacheLine];
  };
  std::vector<Line> candidates;
  // Test bookkeeping filled by the hook (e.g. acknowledged op counts).
  std::vector<uint64_t> acked;

  // The image with candidate i applied iff pick[i] (later candidates win
  // on the same line).
  void Build(const std::vector<bool>& pick, std::vector<char>* out) const;
};

// Eviction subsets to explore for n candidate lines: every subset when
// n <= exhaustive_max; otherwise none, all, each single line, all but each
// single line (n <= 24), and `randoms` random subsets.
std::vector<std::vector<bool>> EvictionSubsets(size_t n, int exhaustive_max,
                                               int randoms,
                                               std::mt19937_64* rng);

class SimDomain {
 public:
  // Starts with the region's current content as the durable image.
  explicit SimDomain(SimRegion* region);
  ~SimDomain();
  SimDomain(const SimDomain&) = delete;
  SimDomain& operator=(const SimDomain&) = delete;

  void Flush(const void* p, size_t n);
  // The write-back of one aligned 8-byte word (a non-temporal store): the
  // next fence makes that word durable with its content now, and nothing
  // else of its line.
  void FlushWord(const void* p);
  void Fence();
  // Runs fn, then makes each [off, off+len) of `ranges` durable, all under
  // the domain lock: no crash state sees fn's stores half done (atomic
  // allocation metadata, like libpmemobj's atomic allocation API).
  void Atomically(const std::function<void()>& fn,
                  const std::vector<std::pair<uint64_t, uint64_t>>& ranges);

  // hook(domain, fence_index, label), run before each fence takes effect,
  // with the domain lock held; it may call CaptureLocked().
  using FenceHook =
      std::function<void(SimDomain*, uint64_t, const std::string&)>;
  void set_fence_hook(FenceHook hook);
  // Only from inside the fence hook.
  CrashState CaptureLocked(uint64_t fence_index, const std::string& label);
  // From outside the hook (e.g. at the end of a workload).
  CrashState Capture(const std::string& label);

  // Schedule perturbation for multi-threaded campaigns: after a fence, the
  // thread sleeps `micros` with probability 1/one_in (0 = never). Sleeping
  // inside the combiner's fences lets other writers advertise meanwhile, so
  // that operations are attached by a combiner on another thread.
  void set_jitter(uint32_t one_in, uint32_t micros) {
    jitter_one_in_.store(one_in, std::memory_order_relaxed);
    jitter_micros_ = micros;
  }

  // Test seams the skiplist reaches through SimPersist: every advertisement
  // is counted, and the pass hook runs at the start of every combining pass
  // (combiner lock held, domain lock not held), before the combiner decides
  // whom the pass serves. Set the hook only while no workload thread runs.
  // Used to build multi-advertisement passes deterministically (the
  // combiner waits until the others advertised): a pass after the hook ran
  // scans every slot, whether or not the others counted themselves waiting.
  void set_pass_hook(std::function<void()> hook) {
    pass_hook_ = std::move(hook);
  }
  void NoteAdvertise() {
    advertisements_.fetch_add(1, std::memory_order_acq_rel);
  }
  bool NotePassStart() {
    if (!pass_hook_) return false;
    pass_hook_();
    return true;
  }
  uint64_t advertisements() const {
    return advertisements_.load(std::memory_order_acquire);
  }

  uint64_t fences() const { return fences_.load(std::memory_order_relaxed); }
  SimRegion* region() const { return region_; }

  // The domain SimPersist forwards to: this thread's override, else the
  // process-wide one. nullptr makes SimPersist a no-op.
  static SimDomain* Current();
  static void SetGlobal(SimDomain* d);
  class ScopedThreadOverride {
   public:
    explicit ScopedThreadOverride(SimDomain* d);
    ~ScopedThreadOverride();

   private:
    SimDomain* saved_;
    bool saved_set_;
  };

 private:
  static constexpr int kWholeLine = -1;
  struct Pending {
    uint64_t offset;
    uint64_t seq;  // order of the flush (newer content has a larger seq)
    int word = kWholeLine;  // FlushWord: the word's index in the line
    alignas(8) char data[kCacheLine];  // copied a word at a time
  };
  // A word made durable by FlushWord's fence, newer than its line's
  // durable snapshot: re-applied when an older snapshot of the line lands.
  struct DurableWord {
    uint64_t seq;
    uint64_t value;
  };
  void ApplyLocked(const Pending& x);
  // Copies into data (a copy of `line` taken at `seq`) every word FlushWord
  // made durable after seq.
  void PutBackNewerWords(uint64_t line, uint64_t seq, char* data) const;
  // A pending write-back of `line` (kWholeLine, or one word of it) by
  // this thread, with the line's content now.
  void PendLocked(uint64_t line, int word);
  // Seq of the newest write of one word FlushWord made durable (0: none).
  uint64_t DurableWordSeq(uint64_t line, int word) const;
  // Seq of the content the durable image holds for a line (0: initial).
  uint64_t DurableSeq(uint64_t offset) const;
  std::string LabelOf(const std::vector<Pending>& p) const;
  void FenceLocked();

  SimRegion* const region_;
  std::mutex mu_;
  std::vector<char> durable_;
  std::unordered_map<std::thread::id, std::vector<Pending>> pending_;
  // A write-back never makes a line older: a fence applies a pending
  // snapshot only if it is newer than the durable one (another thread may
  // have made newer content of the line durable since the flush).
  std::unordered_map<uint64_t, uint64_t> durable_seq_;
  // Per line offset, word index -> the newest word FlushWord made durable.
  std::unordered_map<uint64_t, std::unordered_map<int, DurableWord>>
      durable_words_;
  uint64_t flush_seq_ = 0;
  std::atomic<uint64_t> fences_{0};
  std::atomic<uint32_t> jitter_one_in_{0};
  uint32_t jitter_micros_ = 0;
  FenceHook hook_;
  std::function<void()> pass_hook_;
  std::atomic<uint64_t> advertisements_{0};
};

// The fault (mutant) SimPersist reports through Faulty(); kNone normally.
// A runtime switch of the simulation only: the production policies declare
// no Faulty, so memtable::Faulty<P> is a constant false for them.
void SetSimFault(memtable::Fault f);
memtable::Fault SimFault();
const char* FaultName(memtable::Fault f);

namespace internal {
extern std::atomic<int> g_sim_fault;
}  // namespace internal

// Persistence policy of the simulated domain (template argument of
// DurableSkipList in tests).
struct SimPersist {
  static constexpr bool kDurable = true;
  static void Flush(const void* p, size_t n) {
    if (SimDomain* d = SimDomain::Current()) d->Flush(p, n);
  }
  static void Fence() {
    if (SimDomain* d = SimDomain::Current()) d->Fence();
  }
  static void Persist(const void* p, size_t n) {
    Flush(p, n);
    Fence();
  }
  // A non-temporal store: the word may reach the domain at any time and
  // does by the next fence; the rest of its line does not come with it.
  static void StoreAndFlush(uint64_t* p, uint64_t v) {
    *p = v;
    if (SimDomain* d = SimDomain::Current()) d->FlushWord(p);
  }
  // MFENCE drains this thread's flushes as SFENCE does (§2.3). The model
  // makes a fence's write-backs durable at the fence, for SFENCE and MFENCE
  // alike: their difference (whether later loads may pass) never decides
  // what is durable when an acknowledgment becomes observable, because
  // every acknowledgment is a store (or a return) after an SFENCE.
  static void FullFence() { Fence(); }
  // The combiner's locked release (Alg. 1 line 40) is modelled as a plain
  // release, NOT as a fence: on AMD a locked instruction does not order
  // CLWB (pmem/persist.h), so durability must come from the SFENCE each
  // acknowledging path issues before it. A campaign fails if it does not.
  static void ReleaseWithFullFence(std::atomic<bool>* lock) {
    lock->store(false, std::memory_order_release);
  }
  static void OnAdvertise() {
    if (SimDomain* d = SimDomain::Current()) d->NoteAdvertise();
  }
  static bool OnPassStart() {
    SimDomain* d = SimDomain::Current();
    return d != nullptr && d->NotePassStart();
  }
  static bool Faulty(memtable::Fault f) {
    return f != memtable::Fault::kNone &&
           internal::g_sim_fault.load(std::memory_order_relaxed) ==
               static_cast<int>(f);
  }
};

}  // namespace pmem
}  // namespace flintkv

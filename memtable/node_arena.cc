#include "memtable/node_arena.h"

#include <sched.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "pmem/layout.h"

namespace flintkv {
namespace memtable {
namespace {

// Shard blocks: an eighth of a chunk (as ConcurrentArena's shard blocks are
// an eighth of its blocks), at most 64 KiB so idle shards hold little.
size_t ShardBlock(size_t chunk_size) {
  size_t b = std::min<size_t>(chunk_size / 8, 64 << 10);
  return std::max<size_t>(b, 256) & ~(pmem::kNodeAlign - 1);
}

// A thread's own block: small, since every thread that ever wrote to the
// list may hold one partly used (a shard block is shared by all the threads
// that run on its CPUs); a refill under the list mutex every 16 KiB is
// still one lock per ~128 nodes of the benchmark's size.
size_t ThreadBlockSize(size_t shard_block) {
  return std::min<size_t>(shard_block, 16 << 10);
}

char* AlignLine(char* p, char* end) {
  auto a = reinterpret_cast<uintptr_t>(p);
  char* q = reinterpret_cast<char*>((a + pmem::kCacheLine - 1) &
                                    ~uintptr_t{pmem::kCacheLine - 1});
  return q < end ? q : end;
}

// The calling thread's user token, unique within the process: a block
// records the token of the thread that last bumped it (Block::last_user).
// Neither a ThreadId (returned at exit) nor a thread_local's address
// (glibc gives an exited thread's TLS block to the next thread it starts)
// tells a new thread from an exited one, so a new thread with either would
// continue the old thread's partly used line. 0: not assigned yet.
std::atomic<uint64_t> next_user_token{1};
thread_local uint64_t tls_user_token = 0;

uint64_t UserToken() {
  uint64_t t = tls_user_token;
  if (t == 0) {
    // relaxed: the read-modify-write alone makes every token distinct (and
    // 2^64 never wrap); the token publishes no other data. A block passes
    // between threads under an order of its own: ThreadId's free-list
    // mutex for a thread block, the shard's mutex for a shard.
    t = next_user_token.fetch_add(1, std::memory_order_relaxed);
    tls_user_token = t;  // plain thread_local: trivially destroyed, so
                         // still valid in the thread's exit destructors
  }
  return t;
}

int NumShards() {
  unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n, 1u, 16u));
}

}  // namespace

NodeArena::NodeArena(pmem::Region* region, uint64_t list_id, size_t chunk_size)
    : region_(region),
      list_id_(list_id),
      chunk_size_(chunk_size),
      shard_block_(ShardBlock(chunk_size)),
      thread_block_(ThreadBlockSize(shard_block_)),
      num_shards_(NumShards()),
      shards_(new Shard[num_shards_]) {}

Status NodeArena::Allocate(size_t size, bool use_reserve, char** out) {
  if (free_.Bytes() >= size && free_.Take(size, out)) return Status::OK();
  if (size > chunk_size_ / 4) {
    // A chunk of its own, exactly sized: a big node does not waste the rest
    // of a chunk. Small nodes never get one, reserve or not: small objects
    // of many sizes scatter libpmemobj's heap over allocation classes until
    // a 16 MiB pool with 15 MiB free fails every allocation (seen in
    // DifferentialConcurrentTest.SmallPoolUnderPressure).
    size_t len;
    Status s = region_->NewChunk(list_id_, size, pmem::ChunkFit::kExact,
                                 use_reserve, out, &len);
    if (!s.ok()) return s;
    reserved_.fetch_add(len, std::memory_order_relaxed);
    carved_.fetch_add(size, std::memory_order_relaxed);
    // The region may round up: keep the larger of its tail and the current
    // chunk's rest for later carves, and give up the other.
    std::lock_guard<std::mutex> g(mu_);
    char* tail = *out + size;
    char* tail_end = *out + len;
    if (tail_end - tail > chunk_end_ - chunk_cur_) {
      std::swap(tail, chunk_cur_);
      std::swap(tail_end, chunk_end_);
    }
    carved_.fetch_add(static_cast<size_t>(tail_end - tail),
                      std::memory_order_relaxed);
    return Status::OK();
  }
  if (size > thread_block_ / 4) {
    std::lock_guard<std::mutex> g(mu_);
    size_t got;
    return CarveLocked(size, size, use_reserve, out, &got);
  }
  const int tid = ThreadId::Get();
  if (tid >= 0) {
    if (ThreadBlock* b = thread_blocks_.Get(tid)) {
      return BumpFrom(b, thread_block_, size, use_reserve, out);
    }
  }
  int cpu = sched_getcpu();
  Shard& sh = shards_[cpu < 0 ? 0 : cpu % num_shards_];
  std::lock_guard<std::mutex> g(sh.mu);
  return BumpFrom(&sh, shard_block_, size, use_reserve, out);
}

Status NodeArena::BumpFrom(Block* b, size_t block_size, size_t size,
                           bool use_reserve, char** out) {
  const uint64_t user = UserToken();
  if (b->last_user != user) {
    // No cache line holds nodes of two threads: they would flush and write
    // one line from two cores (false sharing), and a line's write-back
    // would carry another thread's half-written node. (A thread block
    // changes hands only when an exited thread's id is reused; the token
    // of the thread that gets it is new, so it starts on a fresh line.)
    b->cur = AlignLine(b->cur, b->end);
    b->last_user = user;
  }
  if (static_cast<size_t>(b->end - b->cur) < size) {
    const size_t want = std::max(size, b->refill ? b->refill : block_size);
    std::lock_guard<std::mutex> lm(mu_);
    char* begin;
    size_t got;
    Status s = CarveLocked(want, size, use_reserve, &begin, &got);
    if (!s.ok()) {
      b->end = b->cur = nullptr;
      b->free.store(0, std::memory_order_relaxed);
      return s;
    }
    // A carve right after the old block (nobody carved in between)
    // continues it; else the old block's tail (less than size) is given up.
    if (begin != b->end) b->cur = begin;
    b->end = begin + got;
    if (b->refill) b->refill = std::min(2 * b->refill, block_size);
  }
  *out = b->cur;
  b->cur += size;
  b->free.store(static_cast<size_t>(b->end - b->cur),
                std::memory_order_relaxed);
  return Status::OK();
}

Status NodeArena::CarveLocked(size_t want, size_t need, bool use_reserve,
                              char** begin, size_t* got) {
  // Carves start on a cache line of their own (see Allocate).
  char* aligned = AlignLine(chunk_cur_, chunk_end_);
  carved_.fetch_add(static_cast<size_t>(aligned - chunk_cur_),
                    std::memory_order_relaxed);
  chunk_cur_ = aligned;
  if (static_cast<size_t>(chunk_end_ - chunk_cur_) < need) {
    char* b;
    size_t len;
    Status s = region_->NewChunk(list_id_, need, pmem::ChunkFit::kAtLeast,
                                 use_reserve, &b, &len);
    if (!s.ok()) return s;
    reserved_.fetch_add(len, std::memory_order_relaxed);
    // The old chunk's tail (less than need) is given up.
    carved_.fetch_add(static_cast<size_t>(chunk_end_ - chunk_cur_),
                      std::memory_order_relaxed);
    chunk_cur_ = b;
    chunk_end_ = b + len;
  }
  *got = std::min(want, static_cast<size_t>(chunk_end_ - chunk_cur_));
  *begin = chunk_cur_;
  chunk_cur_ += *got;
  carved_.fetch_add(*got, std::memory_order_relaxed);
  return Status::OK();
}

void NodeArena::AdoptChunks(const std::vector<pmem::ChunkInfo>& chunks,
                            std::vector<pmem::ChunkInfo> kept) {
  std::sort(kept.begin(), kept.end(),
            [](const pmem::ChunkInfo& a, const pmem::ChunkInfo& b) {
              return a.offset < b.offset;
            });
  auto k = kept.begin();
  for (const pmem::ChunkInfo& c : chunks) {
    reserved_.fetch_add(c.len, std::memory_order_relaxed);
    carved_.fetch_add(c.len, std::memory_order_relaxed);
    uint64_t pos = c.offset;
    const uint64_t end = c.offset + c.len;
    while (k != kept.end() && k->offset < end) {
      if (k->offset > pos) free_.Add(region_->base() + pos, k->offset - pos);
      pos = std::max(pos, k->offset + k->len);
      ++k;
    }
    if (end > pos) free_.Add(region_->base() + pos, end - pos);
  }
}

size_t NodeArena::UsedBytes() const {
  size_t carved = carved_.load(std::memory_order_relaxed);
  size_t unused = 0;
  for (int i = 0; i < num_shards_; i++) {
    unused += shards_[i].free.load(std::memory_order_relaxed);
  }
  thread_blocks_.ForEach([&unused](const ThreadBlock& b) {
    unused += b.free.load(std::memory_order_relaxed);
  });
  unused += free_.Bytes();
  return carved > unused ? carved - unused : 0;
}

}  // namespace memtable
}  // namespace flintkv

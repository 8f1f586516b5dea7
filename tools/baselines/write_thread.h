// WriteThread: RocksDB 7.8.3's write-group machinery (db/write_thread.cc) in
// the configuration the FlintKV paper gives PMemRocksDB (§7.2):
// enable_pipelined_write and allow_concurrent_memtable_write. Re-implemented
// from reading RocksDB's code (no code copied), without what the benchmark
// never uses (write stalls, callbacks, WAL-less writers, merge operands).
//
// A writer links itself into the WAL queue with one CAS (JoinBatchGroup). The
// first writer becomes the WAL group leader: it takes every writer queued
// behind it (up to max_group_bytes, 1 MiB; 128 KiB + its own size when its
// batch is small, as RocksDB), and the caller writes the group's log records.
// ExitAsBatchGroupLeader then moves the group to the memtable queue and hands
// WAL leadership to the next writer at once (pipelining: the next group's log
// write overlaps this group's memtable inserts). The head of the memtable
// queue takes every queued writer as one memtable group and, when it has more
// than one writer, lets each insert its own batch in parallel; the last one to
// finish publishes the group's last sequence and completes every writer of
// the group (ExitAsMemTableWriter), which then return.
//
// Waiting (AwaitState) is RocksDB's: 200 PAUSE spins, then sched_yield for up
// to 100 us (max_yield_usec), then blocking on the writer's own mutex and
// condition variable (STATE_LOCKED_WAITING; SetState wakes it). RocksDB also
// leaves the yield phase early when yields are slow; not done here.
//
// Thread safety: every function is for the writer threads as documented;
// writers' fields are handed over with acquire/release on `state`.
#pragma once

#include <immintrin.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace flintkv {
namespace baselines {

class WriteThread {
 public:
  enum State : uint32_t {
    kInit = 1,
    kGroupLeader = 2,
    kMemtableWriterLeader = 4,
    kParallelMemtableWriter = 8,
    kCompleted = 16,
    kLockedWaiting = 32,
  };

  struct WriteGroup;
  struct Writer {
    // Filled by the caller before JoinBatchGroup.
    size_t bytes = 0;    // log bytes of the batch (group size limit)
    uint32_t count = 0;  // records (sequence numbers) in the batch
    const void* batch = nullptr;
    // Set by the WAL leader.
    uint64_t sequence = 0;  // of the first record
    char* log_pos = nullptr;
    // Queue and group links (RocksDB's, same meaning).
    std::atomic<uint32_t> state{kInit};
    WriteGroup* write_group = nullptr;
    Writer* link_older = nullptr;
    Writer* link_newer = nullptr;
    std::mutex mu;  // blocking wait only
    std::condition_variable cv;
  };

  struct WriteGroup {
    Writer* leader = nullptr;
    Writer* last_writer = nullptr;
    uint64_t last_sequence = 0;
    size_t size = 0;
    std::atomic<size_t> running{0};
    template <class Fn>
    void ForEach(Fn fn) const {
      for (Writer* w = leader;; w = w->link_newer) {
        fn(w);
        if (w == last_writer) break;
      }
    }
  };

  static constexpr size_t kMaxGroupBytes = 1 << 20;

  // Returns the state the writer woke up in (kGroupLeader, a memtable state
  // or kCompleted).
  uint32_t JoinBatchGroup(Writer* w) {
    if (LinkOne(w, &newest_writer_)) {
      SetState(w, kGroupLeader);
      return kGroupLeader;
    }
    return AwaitState(w, kGroupLeader | kMemtableWriterLeader |
                             kParallelMemtableWriter | kCompleted);
  }

  // The WAL group led by `leader` (RocksDB's size rule).
  void EnterAsBatchGroupLeader(Writer* leader, WriteGroup* group) {
    size_t size = leader->bytes;
    size_t max_size = kMaxGroupBytes;
    if (size <= kMaxGroupBytes / 8) max_size = size + kMaxGroupBytes / 8;
    leader->write_group = group;
    group->leader = group->last_writer = leader;
    group->size = 1;
    Writer* newest = newest_writer_.load(std::memory_order_acquire);
    CreateMissingNewerLinks(newest);
    for (Writer* w = leader; w != newest;) {
      w = w->link_newer;
      if (size + w->bytes > max_size) break;
      w->write_group = group;
      size += w->bytes;
      group->last_writer = w;
      group->size++;
    }
  }

  // Pipelined exit: the group joins the memtable queue, the next WAL leader
  // is woken, and the leader waits for its memtable role.
  void ExitAsBatchGroupLeader(WriteGroup* group) {
    Writer* leader = group->leader;
    Writer* last = group->last_writer;
    Writer dummy;
    Writer* head = newest_writer_.load(std::memory_order_acquire);
    if (head != last || !newest_writer_.compare_exchange_strong(head, &dummy)) {
      CreateMissingNewerLinks(head);
      last->link_newer->link_older = &dummy;
      dummy.link_newer = last->link_newer;
    }
    if (LinkGroup(group, &newest_memtable_writer_)) {
      SetState(leader, kMemtableWriterLeader);
    }
    head = newest_writer_.load(std::memory_order_acquire);
    if (head != &dummy ||
        !newest_writer_.compare_exchange_strong(head, nullptr)) {
      CreateMissingNewerLinks(head);
      Writer* next_leader = dummy.link_newer;
      next_leader->link_older = nullptr;
      SetState(next_leader, kGroupLeader);
    }
    AwaitState(leader,
               kMemtableWriterLeader | kParallelMemtableWriter | kCompleted);
  }

  // The memtable group led by `leader`: every queued writer (concurrent
  // memtable writes have no size limit in RocksDB).
  void EnterAsMemTableWriter(Writer* leader, WriteGroup* group) {
    leader->write_group = group;
    group->leader = group->last_writer = leader;
    group->size = 1;
    Writer* newest = newest_memtable_writer_.load(std::memory_order_acquire);
    CreateMissingNewerLinks(newest);
    for (Writer* w = leader; w != newest;) {
      w = w->link_newer;
      w->write_group = group;
      group->last_writer = w;
      group->size++;
    }
    group->last_sequence =
        group->last_writer->sequence + group->last_writer->count - 1;
  }

  void LaunchParallelMemTableWriters(WriteGroup* group) {
    group->running.store(group->size, std::memory_order_relaxed);
    group->ForEach([this](Writer* w) { SetState(w, kParallelMemtableWriter); });
  }

  // True for the last writer of the group to finish (it must then publish
  // and call ExitAsMemTableWriter); the others wait until completed.
  bool CompleteParallelMemTableWriter(Writer* w) {
    if (w->write_group->running.fetch_sub(1, std::memory_order_acq_rel) > 1) {
      AwaitState(w, kCompleted);
      return false;
    }
    return true;
  }

  void ExitAsMemTableWriter(WriteGroup* group) {
    Writer* leader = group->leader;
    Writer* last = group->last_writer;
    Writer* newest = last;
    if (!newest_memtable_writer_.compare_exchange_strong(newest, nullptr)) {
      CreateMissingNewerLinks(newest);
      Writer* next_leader = last->link_newer;
      next_leader->link_older = nullptr;
      SetState(next_leader, kMemtableWriterLeader);
    }
    for (Writer* w = leader;;) {
      Writer* next = w->link_newer;  // read before w may return
      if (w != leader) SetState(w, kCompleted);
      if (w == last) break;
      w = next;
    }
    SetState(leader, kCompleted);
  }

 private:
  static bool LinkOne(Writer* w, std::atomic<Writer*>* newest) {
    Writer* writers = newest->load(std::memory_order_relaxed);
    while (true) {
      w->link_older = writers;
      if (newest->compare_exchange_weak(writers, w, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
        return writers == nullptr;
      }
    }
  }

  static bool LinkGroup(WriteGroup* group, std::atomic<Writer*>* newest) {
    Writer* leader = group->leader;
    Writer* last = group->last_writer;
    for (Writer* w = last;; w = w->link_older) {
      w->link_newer = nullptr;
      w->write_group = nullptr;
      if (w == leader) break;
    }
    Writer* n = newest->load(std::memory_order_relaxed);
    while (true) {
      leader->link_older = n;
      if (newest->compare_exchange_weak(n, last, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
        return n == nullptr;
      }
    }
  }

  static void CreateMissingNewerLinks(Writer* head) {
    while (true) {
      Writer* next = head->link_older;
      if (next == nullptr || next->link_newer != nullptr) break;
      next->link_newer = head;
      head = next;
    }
  }

  static void SetState(Writer* w, uint32_t s) {
    uint32_t state = w->state.load(std::memory_order_acquire);
    if (state == kLockedWaiting || !w->state.compare_exchange_strong(
                                       state, s, std::memory_order_acq_rel)) {
      std::lock_guard<std::mutex> g(w->mu);
      w->state.store(s, std::memory_order_release);
      w->cv.notify_one();
    }
  }

  static uint32_t AwaitState(Writer* w, uint32_t goal) {
    uint32_t state = 0;
    for (int i = 0; i < 200; i++) {
      state = w->state.load(std::memory_order_acquire);
      if (state & goal) return state;
      _mm_pause();
    }
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start <
           std::chrono::microseconds(100)) {
      sched_yield();
      state = w->state.load(std::memory_order_acquire);
      if (state & goal) return state;
    }
    std::unique_lock<std::mutex> lock(w->mu);
    state = w->state.load(std::memory_order_acquire);
    while (!(state & goal)) {
      if (state != kLockedWaiting &&
          !w->state.compare_exchange_strong(state, kLockedWaiting,
                                            std::memory_order_acq_rel)) {
        continue;  // changed under us: re-check
      }
      w->cv.wait(lock);
      state = w->state.load(std::memory_order_acquire);
    }
    return state;
  }

  std::atomic<Writer*> newest_writer_{nullptr};
  std::atomic<Writer*> newest_memtable_writer_{nullptr};
};

}  // namespace baselines
}  // namespace flintkv

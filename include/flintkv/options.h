// Options for FlintKV pools and the standalone store.
//
// Plain value types; copy freely. Every size limit here is checked at the API
// boundary and violations return Status::InvalidArgument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace flintkv {

// Extra cost added to every flushed cache line and every fence, to make an
// emulated pool (tmpfs / DRAM) behave like Optane DCPMM. Zero means off.
// See docs/latency_model.md for the published figures behind the preset.
// Process-wide, not per pool: the persistence primitives that add the cost
// know no pool, so the model of the last store or factory opened with one
// enabled applies to every pool of the process. A measurement aid.
struct LatencyModel {
  uint32_t ns_per_flushed_line = 0;
  uint32_t ns_per_fence = 0;

  // Preset after published Optane DCPMM measurements (docs/latency_model.md).
  static LatencyModel Optane() { return LatencyModel{30, 90}; }
  bool enabled() const { return ns_per_flushed_line || ns_per_fence; }
};

struct PoolOptions {
  // Pool file. On fsdax PMEM use a file on the DAX mount; anything else
  // (tmpfs such as /dev/shm, or a regular file) is emulated PMEM.
  std::string path;
  // Size of a newly created pool. Ignored when opening an existing pool.
  uint64_t size = 1ull << 30;
  bool create_if_missing = true;
  bool error_if_exists = false;
  // PMEM is handed out to each writer thread in chunks of this size.
  uint64_t chunk_size = 4ull << 20;
  // Enabled: sets the process-wide model at Open (see LatencyModel); a
  // disabled one leaves whatever model the process has.
  LatencyModel latency;
  // Where one-line notices (e.g. "emulated PMEM", "pmempool not found") go;
  // none are given if empty (never to stderr: the host owns it).
  std::function<void(const std::string&)> info_log;
};

// How the standalone store makes writes durable (docs/durability_modes.md).
struct DurabilityOptions {
  // Strong writes (WriteOptions::sync, the default): false = one fence per
  // write, the paper's combiner; true = group commit, one fence per
  // combining pass for every write it served (each writer still returns
  // only after that fence).
  bool group_commit = false;
  // Weak writes (WriteOptions::sync = false) become durable without a
  // Persist() call within about this many microseconds (a background thread
  // per store, started by the first weak write, calls Persist()); plus
  // scheduling delay on a loaded machine. 0: no background thread; weak
  // writes become durable at Persist(), at the next strong write, at
  // Close(), or when 32768 weak writes wait (a bound on the memory that
  // tracks them).
  uint32_t persist_interval_us = 1000;
};

struct StoreOptions {
  PoolOptions pool;
  size_t max_key_size = 64 << 10;    // bytes
  size_t max_value_size = 64 << 20;  // bytes
  // Version garbage collection (docs/gc.md): versions hidden by a newer
  // version of their key and older than every open snapshot, iterator and
  // running read (and tombstones with nothing left to hide) are unlinked
  // durably and their PMEM and DRAM reused. Off: every version is kept
  // until the pool is full (reads then skip no GC bookkeeping).
  bool gc = true;
  // A background thread checks every gc_interval_ms and runs a pass when
  // the overwrites and deletes since its previous pass reach 1/8 of the
  // store's nodes (a pass walks them all); 0: no thread (passes run from
  // Store::GarbageCollect() and when a write finds the pool full).
  uint32_t gc_interval_ms = 10;
  // Level-0 nodes a pass examines per hold of the writers' combiner lock:
  // bounds how long a writer waits for the GC.
  uint32_t gc_nodes_per_hold = 256;
  DurabilityOptions durability;
};

class Snapshot;

// Per-read options of the standalone store (Store::Get, Store::NewIterator).
// The store has no block cache and its nodes carry no checksums, so unlike
// RocksDB's ReadOptions there are no fill or verify flags; new fields can
// be added without changing a signature.
struct ReadOptions {
  // Read as of this snapshot (one Store::GetSnapshot returned, still
  // alive); null: the latest (an iterator takes its own snapshot at
  // creation).
  const Snapshot* snapshot = nullptr;
};

// Per-write options of the standalone store.
struct WriteOptions {
  // true: the write is durable when it returns (durable linearizability).
  // false (weak durability): it returns once visible to readers; it becomes
  // durable at the next Store::Persist(), the next sync write, Close(), or
  // within DurabilityOptions::persist_interval_us. A crash keeps a prefix of
  // the commit order (never a later write without an earlier one, never
  // part of a batch).
  bool sync = true;
};

}  // namespace flintkv

// What the factory is told beside RocksDB's own calls (through
// RecoveryPort::RangeTombstonesFlushed, recovery_port.h): the factory
// class itself stays in flintkv_factory.cc. Thread safety: safe from any
// thread.
#pragma once

#include <cstdint>

#include "rocksdb/memtablerep.h"

namespace flintkv {
namespace rocks {

// A flush of `factory`'s memtables is durable (its MANIFEST edit written)
// and put a file holding sequence number `seq` in the DB, though no
// memtable rep saw an entry that new: a memtable holding only range
// tombstones, which RocksDB keeps in a table of its own. Raises the
// flushed_floor of the factory's life (pool_session.h, S3) as a flush of
// a rep would. `seq` must be in a live file (the MANIFEST records at least
// that), not merely RocksDB's LastSequence. No-op for a factory that is
// not FlintKV's or has made no memtable yet.
void OnRangeTombstonesFlushed(const rocksdb::MemTableRepFactory& factory,
                              uint64_t seq);

}  // namespace rocks
}  // namespace flintkv

// Storage for memtable iterators that RocksDB places "in its arena".
//
// When GetIterator(arena) gets an arena, RocksDB only runs the iterator's
// destructor and never frees it; the Arena type is not a public header, so
// we cannot allocate from it. Instead such iterators live in fixed-size
// blocks from a per-thread cache. A destructor hands its block to the
// cache of the thread that runs it; blocks are reused or freed only by that
// thread on a later call, i.e. strictly after the destructor has returned,
// so no thread ever touches a block whose destructor is still running.
// Thread safety: thread-local; no locks.
#pragma once

#include <cstddef>

namespace flintkv {
namespace rocks {

constexpr size_t kIteratorBlockSize = 256;

// A block of kIteratorBlockSize bytes, 16-aligned.
void* AcquireIteratorBlock();
// Called from a destructor: parks the block for later reuse by this thread.
void ReleaseIteratorBlock(void* block);

}  // namespace rocks
}  // namespace flintkv

// Waiting for pool space, the one policy for every adapter path that needs
// some (a memtable's list, a write's node): a full pool is freed only by
// flushes of older memtables, and neither a memtable creation nor an insert
// has an error channel (RocksDB uses the rep unchecked and asserts on a
// rejected insert), so the caller waits. The wait is reported to the DB's
// info log, at most once per kSpaceWaitLogInterval per pool, however many
// threads wait; to stderr only when RocksDB gave the rep no info log (it
// passes nullptr when it could not create one), since a wait that may last
// until an operator acts must not be invisible.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "flintkv/status.h"
#include "memtable/rocksdb/pool_session.h"
#include "rocksdb/env.h"

namespace flintkv {
namespace rocks {

constexpr std::chrono::seconds kSpaceWaitLogInterval{10};

// Why a wait is expected to end, for the log line: flushes of older
// memtables free the pool's space.
inline std::string WaitsForFlushes(const char* what) {
  return std::string(what) +
         " waits for flushes to free pool space (pool_size too small for "
         "write_buffer_size x max_write_buffer_number?)";
}

// Calls retry() every millisecond until it succeeds and returns its OK;
// `failed` is the status that made the caller wait. explain() says, in the
// log line, what the wait is for (WaitsForFlushes, or why it cannot end);
// it is called only when a line is due.
template <typename Retry, typename Explain>
Status WaitForPoolSpace(PoolSession* pool, rocksdb::Logger* logger,
                        Status failed, Retry&& retry, Explain&& explain) {
  Status s = std::move(failed);
  while (!s.ok()) {
    if (pool->SpaceWaitNoticeDue(kSpaceWaitLogInterval)) {
      const std::string line = "flintkv: pool " + pool->pool()->path() + ": " +
                               s.ToString() + "; " + explain();
      if (logger) {
        rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, logger, "%s",
                     line.c_str());
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = retry();
  }
  return s;
}

}  // namespace rocks
}  // namespace flintkv

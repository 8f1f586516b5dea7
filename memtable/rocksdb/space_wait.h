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
#include <thread>

#include "flintkv/status.h"
#include "memtable/rocksdb/pool_session.h"
#include "rocksdb/env.h"

namespace flintkv {
namespace rocks {

constexpr std::chrono::seconds kSpaceWaitLogInterval{10};

// Calls retry() every millisecond until it succeeds and returns its OK;
// `failed` is the status that made the caller wait, `what` names the waiter
// ("write", "new memtable") in the log line.
template <typename Retry>
Status WaitForPoolSpace(PoolSession* pool, rocksdb::Logger* logger,
                        const char* what, Status failed, Retry&& retry) {
  Status s = std::move(failed);
  while (!s.ok()) {
    if (pool->SpaceWaitNoticeDue(kSpaceWaitLogInterval)) {
      static constexpr char kFormat[] =
          "flintkv: pool %s: %s; %s waits for flushes to free pool space "
          "(pool_size too small for write_buffer_size x "
          "max_write_buffer_number?)";
      if (logger) {
        rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, logger, kFormat,
                     pool->pool()->path().c_str(), s.ToString().c_str(), what);
      } else {
        std::fprintf(stderr, kFormat, pool->pool()->path().c_str(),
                     s.ToString().c_str(), what);
        std::fputc('\n', stderr);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = retry();
  }
  return s;
}

}  // namespace rocks
}  // namespace flintkv

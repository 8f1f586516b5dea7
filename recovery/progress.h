// A recovery's progress lines (RecoveryOptions::info_log) and the clock its
// phase timings (RecoveryReport) are taken with.
// Thread safety: stateless.
#pragma once

#include <chrono>
#include <string>

#include "flintkv/recovery.h"
#include "rocksdb/env.h"

namespace flintkv {
namespace recovery {

// What recovery did (a list dropped, a record finished, the summary).
inline void LogInfo(const RecoveryOptions& o, const std::string& line) {
  if (o.info_log) {
    rocksdb::Log(rocksdb::InfoLogLevel::INFO_LEVEL, o.info_log, "%s",
                 line.c_str());
  }
}

// What an override made recovery ignore, or a step that failed without
// failing the recovery.
inline void LogWarn(const RecoveryOptions& o, const std::string& line) {
  if (o.info_log) {
    rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, o.info_log, "%s",
                 line.c_str());
  }
}

inline double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace recovery
}  // namespace flintkv

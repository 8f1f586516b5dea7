// A recovery's progress lines (RecoveryOptions::log) and the clock its
// phase timings (RecoveryReport) are taken with.
// Thread safety: stateless.
#pragma once

#include <chrono>
#include <string>

#include "flintkv/recovery.h"

namespace flintkv {
namespace recovery {

inline void Log(const RecoveryOptions& o, const std::string& line) {
  if (o.log) o.log(line);
}

inline double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace recovery
}  // namespace flintkv

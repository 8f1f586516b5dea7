// flintkv::Status -> rocksdb::Status, for every API that answers RocksDB.
// Thread safety: stateless.
#pragma once

#include <string>

#include "flintkv/status.h"
#include "rocksdb/status.h"

namespace flintkv {
namespace rocks {

inline rocksdb::Status ToRocks(const Status& s) {
  if (s.ok()) return rocksdb::Status::OK();
  // Messages made by the adapter already say whose they are.
  std::string m = s.message().rfind("flintkv", 0) == 0
                      ? s.message()
                      : "flintkv: " + s.message();
  switch (s.code()) {
    case Status::Code::kCorruption:
      return rocksdb::Status::Corruption(m);
    case Status::Code::kInvalidArgument:
      return rocksdb::Status::InvalidArgument(m);
    case Status::Code::kNotFound:
      return rocksdb::Status::NotFound(m);
    case Status::Code::kBusy:
      return rocksdb::Status::Busy(m);
    case Status::Code::kNotSupported:
      return rocksdb::Status::NotSupported(m);
    case Status::Code::kNoSpace:
      return rocksdb::Status::NoSpace(m);
    default:
      return rocksdb::Status::IOError(m);
  }
}

}  // namespace rocks
}  // namespace flintkv

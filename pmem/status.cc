#include "flintkv/status.h"

namespace flintkv {

std::string Status::ToString() const {
  const char* name = "OK";
  switch (code_) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      name = "NotFound";
      break;
    case Code::kCorruption:
      name = "Corruption";
      break;
    case Code::kInvalidArgument:
      name = "InvalidArgument";
      break;
    case Code::kIOError:
      name = "IOError";
      break;
    case Code::kNoSpace:
      name = "NoSpace";
      break;
    case Code::kBusy:
      name = "Busy";
      break;
    case Code::kNotSupported:
      name = "NotSupported";
      break;
  }
  return msg_.empty() ? std::string(name) : std::string(name) + ": " + msg_;
}

}  // namespace flintkv

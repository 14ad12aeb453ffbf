// The one exception type of the core. The C API shims turn it into a status
// and the thread-local message; nothing else crosses the boundary.
#pragma once

#include <stdexcept>
#include <string>

#include "kvcache/common.h"

namespace kvc {

class Error : public std::runtime_error {
 public:
  Error(kvc_status_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  kvc_status_t status() const noexcept { return status_; }

 private:
  kvc_status_t status_;
};

// A refusal callers meet in normal operation (out of blocks: a scheduler
// may be refused many times per step), told by return value from the
// try_ calls of BlockManager: unwinding an exception costs microseconds.
struct Refusal {
  kvc_status_t status = KVC_OK;
  std::string message;
};

[[noreturn]] inline void fail(kvc_status_t status, const std::string& message) {
  throw Error(status, message);
}

[[noreturn]] inline void invalid_argument(const std::string& message) {
  throw Error(KVC_ERR_INVALID_ARGUMENT, message);
}

}  // namespace kvc

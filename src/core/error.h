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

[[noreturn]] inline void fail(kvc_status_t status, const std::string& message) {
  throw Error(status, message);
}

[[noreturn]] inline void invalid_argument(const std::string& message) {
  throw Error(KVC_ERR_INVALID_ARGUMENT, message);
}

}  // namespace kvc

// kvc_status_string and kvc_last_error_message.
#include "capi/last_error.h"
#include "kvcache/common.h"

namespace kvc::capi {

namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string& message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    t_last_error.clear();  // out of memory for the message itself
  }
}

}  // namespace kvc::capi

extern "C" {

KVC_API const char* kvc_status_string(kvc_status_t status) {
  switch (status) {
    case KVC_OK: return "KVC_OK";
    case KVC_ERR_INVALID_ARGUMENT: return "KVC_ERR_INVALID_ARGUMENT";
    case KVC_ERR_NOT_FOUND: return "KVC_ERR_NOT_FOUND";
    case KVC_ERR_ALREADY_EXISTS: return "KVC_ERR_ALREADY_EXISTS";
    case KVC_ERR_OUT_OF_BLOCKS: return "KVC_ERR_OUT_OF_BLOCKS";
    case KVC_ERR_BUFFER_TOO_SMALL: return "KVC_ERR_BUFFER_TOO_SMALL";
    case KVC_ERR_UNSUPPORTED: return "KVC_ERR_UNSUPPORTED";
    case KVC_ERR_DEVICE: return "KVC_ERR_DEVICE";
    case KVC_ERR_OUT_OF_MEMORY: return "KVC_ERR_OUT_OF_MEMORY";
    case KVC_ERR_INVALID_STATE: return "KVC_ERR_INVALID_STATE";
    case KVC_ERR_INTERNAL: return "KVC_ERR_INTERNAL";
    default: return "KVC_ERR_UNKNOWN";
  }
}

KVC_API const char* kvc_last_error_message(void) {
  return kvc::capi::t_last_error.c_str();
}

}  // extern "C"

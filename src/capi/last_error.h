// The thread-local message behind kvc_last_error_message().
#pragma once

#include <string>

namespace kvc::capi {

void set_last_error(const std::string& message) noexcept;

}  // namespace kvc::capi

// What the opaque kvc_stateful_t handle is. Its own header (not handles.h,
// which the paged shims include) so that the fuzz harness can reach the
// cache's device to install a fault hook (backend/fault_hook.h).
#pragma once

#include <memory>

#include "kvcache/stateful.h"
#include "stateful/stateful_cache.h"

struct kvc_stateful {
  std::unique_ptr<kvc::StatefulCache> impl;
};

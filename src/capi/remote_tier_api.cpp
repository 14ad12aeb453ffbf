// The remote tier's settings (remote_tier.h). The URL and the namespace are
// checked here with the remote store's own parsers, so a malformed one is
// refused when it is set, with the message kvc_cache_create would give.
#include <string>

#include "capi/guard.h"
#include "capi/handles.h"
#include "kvcache/remote_tier.h"
#include "store/redis_store.h"
#include "store/redis_url.h"

using kvc::capi::guarded;
using kvc::capi::require;

namespace {

constexpr uint32_t kMaxTimeoutMs = 600000;

void check_timeout(uint32_t ms, const char* name) {
  if (ms == 0 || ms > kMaxTimeoutMs) {
    kvc::invalid_argument(std::string(name) + " must be in 1.." + std::to_string(kMaxTimeoutMs) +
                          " ms, got " + std::to_string(ms));
  }
}

}  // namespace

extern "C" {

KVC_API kvc_status_t kvc_config_set_remote_cache(kvc_config_t* config, const char* url,
                                                 const char* key_namespace, uint64_t bytes) {
  return guarded([&] {
    require(config, "config");
    const std::string u = url != nullptr ? url : "";
    const std::string ns = key_namespace != nullptr ? key_namespace : "kvc";
    if (u.empty() && bytes != 0) {
      kvc::invalid_argument("remote cache bytes must be 0 without a URL, got " +
                            std::to_string(bytes));
    }
    if (!u.empty()) {
      const kvc::RedisUrl parsed = kvc::parse_redis_url(u);
      if (bytes == 0) {
        kvc::invalid_argument("remote cache bytes must be > 0 for " + parsed.display() +
                              ", got 0");
      }
    }
    kvc::check_key_namespace(ns);
    config->cfg.stores.remote_url = u;
    config->cfg.stores.remote_namespace = ns;
    config->cfg.stores.remote_bytes = bytes;
  });
}

KVC_API kvc_status_t kvc_config_get_remote_cache(const kvc_config_t* config, const char** url,
                                                 const char** key_namespace, uint64_t* bytes) {
  return guarded([&] {
    require(config, "config");
    if (url != nullptr) *url = config->cfg.stores.remote_url.c_str();
    if (key_namespace != nullptr) *key_namespace = config->cfg.stores.remote_namespace.c_str();
    if (bytes != nullptr) *bytes = config->cfg.stores.remote_bytes;
  });
}

KVC_API kvc_status_t kvc_config_set_remote_cache_timeouts(kvc_config_t* config,
                                                          uint32_t connect_ms,
                                                          uint32_t command_ms) {
  return guarded([&] {
    require(config, "config");
    check_timeout(connect_ms, "connect_ms");
    check_timeout(command_ms, "command_ms");
    config->cfg.stores.remote_connect_timeout_ms = connect_ms;
    config->cfg.stores.remote_command_timeout_ms = command_ms;
  });
}

KVC_API kvc_status_t kvc_config_get_remote_cache_timeouts(const kvc_config_t* config,
                                                          uint32_t* connect_ms,
                                                          uint32_t* command_ms) {
  return guarded([&] {
    require(config, "config");
    if (connect_ms != nullptr) *connect_ms = config->cfg.stores.remote_connect_timeout_ms;
    if (command_ms != nullptr) *command_ms = config->cfg.stores.remote_command_timeout_ms;
  });
}

KVC_API kvc_status_t kvc_config_set_remote_cache_optional(kvc_config_t* config, bool optional) {
  return guarded([&] {
    require(config, "config");
    config->cfg.stores.remote_optional = optional;
  });
}

KVC_API kvc_status_t kvc_config_get_remote_cache_optional(const kvc_config_t* config,
                                                          bool* out) {
  return guarded([&] {
    require(config, "config");
    require(out, "out");
    *out = config->cfg.stores.remote_optional;
  });
}

}  // extern "C"

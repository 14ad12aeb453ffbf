// kvc_version*, kvc_abi_version, kvc_features.
#include "backend/device.h"
#include "kvcache/version.h"
#include "store/redis_connection.h"

extern "C" {

KVC_API uint32_t kvc_version(void) { return KVC_VERSION_NUMBER; }

KVC_API const char* kvc_version_string(void) { return KVC_VERSION_STRING; }

KVC_API uint32_t kvc_abi_version(void) { return KVC_ABI_VERSION; }

KVC_API uint64_t kvc_features(void) {
  try {
    uint64_t bits = 0;
    if (kvc::cuda_compiled()) {
      bits |= KVC_FEATURE_CUDA_COMPILED;
      if (kvc::cuda_device_count() > 0) bits |= KVC_FEATURE_CUDA_DEVICE;
    }
    if (kvc::redis_built()) bits |= KVC_FEATURE_REDIS;
    return bits;
  } catch (...) {
    return 0;
  }
}

}  // extern "C"

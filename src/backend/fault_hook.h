// Fault injection for tests: a hook that every backend asks before each
// allocation (pools, the host tier, the backend's own buffers) and each tier
// copy. When it answers true the operation fails as a real failure would
// (Error(KVC_ERR_OUT_OF_MEMORY) before allocating; a tier copy copies part
// of its blocks, then throws Error(KVC_ERR_DEVICE)), so tests can check
// that every failure leaves the cache as documented and leaks nothing. The
// hook also hears of every allocation and release, for leak counts. No
// production path sets one; a Device without a hook pays one branch.
#pragma once

#include <cstdint>

namespace kvc {

enum class FaultSite : uint8_t {
  kAllocate,      // Device::allocate: device memory (pools, buffers)
  kAllocateHost,  // Device::allocate_host: the host tier's memory
  kCopyTier,      // Device::copy_tier: an offload or onboard batch
};

class FaultHook {
 public:
  virtual ~FaultHook() = default;
  // True: this operation fails.
  virtual bool fail(FaultSite site) = 0;
  // A successful allocation at `site` / its release (kAllocate or kAllocateHost).
  virtual void allocated(FaultSite /*site*/, const void* /*ptr*/) {}
  virtual void released(FaultSite /*site*/, const void* /*ptr*/) {}
};

}  // namespace kvc

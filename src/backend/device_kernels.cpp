// Defaults of the Device kernel entry points, for backends that have none.
#include "backend/device.h"
#include "base/error.h"

namespace kvc {

void Device::store_kv(const StoreKvWork&, void*) {
  fail(KVC_ERR_UNSUPPORTED, "device " + name() + " has no store_kv kernel");
}

void Device::decode_attention(const DecodeWork&, void*) {
  fail(KVC_ERR_UNSUPPORTED, "device " + name() + " has no decode attention kernel");
}

uint64_t Device::decode_workspace_bytes(const DecodeWork&) const { return 0; }

AsyncError Device::async_error(void*) { return {}; }

}  // namespace kvc

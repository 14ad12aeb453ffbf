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

void Device::prefill_attention(const PrefillWork&, void*) {
  fail(KVC_ERR_UNSUPPORTED, "device " + name() + " has no prefill attention kernel");
}

uint64_t Device::prefill_workspace_bytes(const PrefillWork&) const { return 0; }

AsyncError Device::async_error(void*) { return {}; }

void* Device::allocate_on(uint64_t bytes, void* /*stream*/) { return allocate(bytes); }

void Device::deallocate_on(void* ptr, void* stream) noexcept {
  if (ptr == nullptr) return;
  try {
    synchronize(stream);
  } catch (...) {
    // A failed device is reported by the next call; the memory goes anyway.
  }
  deallocate(ptr);
}

void Device::copy_2d(void*, uint64_t, const void*, uint64_t, uint64_t, uint64_t, CopyKind,
                     void*) {
  fail(KVC_ERR_UNSUPPORTED, "device " + name() + " has no 2D copy");
}

void Device::copy_ranges(const CopyRange* ranges, size_t count, void* stream) {
  for (size_t i = 0; i < count; ++i)
    if (ranges[i].bytes > 0)
      copy_2d(ranges[i].dst, ranges[i].bytes, ranges[i].src, ranges[i].bytes, ranges[i].bytes, 1,
              CopyKind::kDeviceToDevice, stream);
}

void Device::stateful_append(const StatefulAppendWork&, void*) {
  fail(KVC_ERR_UNSUPPORTED, "device " + name() + " has no stateful append kernel");
}

void Device::table_reorder(const TableReorderWork&, void*) {
  fail(KVC_ERR_UNSUPPORTED, "device " + name() + " has no beam table reorder kernel");
}

void Device::gather_rows(const RowGatherWork&, void*) {
  fail(KVC_ERR_UNSUPPORTED, "device " + name() + " has no row gather kernel");
}

void Device::stateful_decode(const StatefulDecodeWork& work, void* stream) {
  decode_attention(work.decode, stream);
}

uint64_t Device::stateful_decode_workspace_bytes(const DecodeWork& work) const {
  return decode_workspace_bytes(work);
}

}  // namespace kvc

namespace kvc {

// A device without reserve_granularity() reserves nothing.
void* Device::reserve(uint64_t, uint64_t) {
  fail(KVC_ERR_UNSUPPORTED, "the " + name() + " device cannot reserve address space");
}
void Device::commit(void*, uint64_t, uint64_t) {
  fail(KVC_ERR_UNSUPPORTED, "the " + name() + " device cannot reserve address space");
}
uint64_t Device::decommit(void*, uint64_t, uint64_t to) noexcept { return to; }
void Device::unreserve(void*, uint64_t, uint64_t) noexcept {}

}  // namespace kvc

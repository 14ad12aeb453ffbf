// The error record that kernels fill when they meet a value the host could
// not check (a slot, length or block id in device memory). One record per
// device, in device memory; the first error wins and the host reads it in
// CudaDevice::async_error().
#pragma once

#include <cstdint>
#include <string>

namespace kvc {

enum KernelErrorCode : int32_t {
  kKernelOk = 0,
  kSlotOutOfRange = 1,    // store_kv: index = token, value = slot, limit = slots
  kSeqLenOutOfRange = 2,  // decode: index = sequence, value = length, limit = max_seq_len
  kBlockOutOfRange = 3,   // decode: index = sequence, aux = table entry, value = id, limit = blocks
  kTableTooShort = 4,     // decode CSR: index = sequence, value = entries, limit = blocks needed
  kPrefillBlockOutOfRange = 5,  // prefill: as kBlockOutOfRange
  kPrefillTableTooShort = 6,    // prefill CSR: as kTableTooShort
};

struct KernelErrorRecord {
  int32_t code;   // 0 none, -1 being written, else a KernelErrorCode
  uint32_t layer;
  int64_t index;
  int64_t value;
  int64_t limit;
  int64_t aux;
};

// Describes a record the kernels filled, for kvc_last_error_message().
std::string describe_kernel_error(const KernelErrorRecord& r);

#ifdef __CUDACC__
// Claims the record if it is free and fills it; later errors are dropped.
__device__ inline void record_kernel_error(KernelErrorRecord* r, int32_t code, uint32_t layer,
                                           int64_t index, int64_t value, int64_t limit,
                                           int64_t aux = 0) {
  if (atomicCAS(&r->code, 0, -1) != 0) return;
  r->layer = layer;
  r->index = index;
  r->value = value;
  r->limit = limit;
  r->aux = aux;
  __threadfence();
  atomicExch(&r->code, code);
}
#endif

}  // namespace kvc

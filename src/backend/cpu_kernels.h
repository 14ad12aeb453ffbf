// The CPU reference kernels: the embedded implementation on a CPU cache and
// the oracle the CUDA kernels are tested against. Plain loops in f32; the
// arguments were checked before (kernel_checks.h).
#pragma once

#include "backend/kernel_work.h"

namespace kvc {

void cpu_store_kv(const StoreKvWork& w);
void cpu_decode_attention(const DecodeWork& w);
void cpu_prefill_attention(const PrefillWork& w);

}  // namespace kvc

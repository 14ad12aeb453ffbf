// Host-side launchers of the stateful mode's kernels (stateful_kernels.cu),
// called by CudaDevice.
#pragma once

#include <cuda_runtime.h>

#include "backend/stateful_work.h"

namespace kvc {

void launch_stateful_append(const StatefulAppendWork& w, cudaStream_t stream);
void launch_table_reorder(const TableReorderWork& w, cudaStream_t stream);
void launch_gather_rows(const RowGatherWork& w, cudaStream_t stream);

}  // namespace kvc

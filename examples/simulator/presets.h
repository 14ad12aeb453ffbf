// Model shapes the simulator can cache for, and the step-time model that
// turns a scheduled batch into simulated seconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sim {

struct ModelPreset {
  std::string name;
  std::string description;
  uint32_t num_layers = 0;
  uint32_t q_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  std::vector<uint32_t> windows;  // repeats over layers; 0 = full attention
  double params_billions = 0;     // drives the simulated step time
  // Hybrid models: Mamba-2 layers beside the attention layers above, each
  // with an SSM state [mamba_heads][mamba_head_dim][d_state] and a conv
  // state [mamba_heads * mamba_head_dim + 2 * n_groups * d_state][d_conv],
  // both bf16, held as kvcache state resources (state.h). 0: none.
  uint32_t mamba_layers = 0;
  uint32_t mamba_heads = 0;
  uint32_t mamba_head_dim = 0;
  uint32_t d_state = 0;
  uint32_t n_groups = 0;
  uint32_t d_conv = 0;
};

// The presets, the default first.
const std::vector<ModelPreset> &model_presets();

// The preset called `name`, or nullptr.
const ModelPreset *find_preset(const std::string &name);

// Simulated duration of one scheduling step on an H100-class GPU (bf16):
// reading the weights once (memory bound, 3 TB/s), the matmul work of the
// computed tokens (400 TFLOP/s achieved) and reading the KV of every token
// attended to. Only relative load matters: it decides how many requests
// overlap, and so how much memory pressure a trace creates.
double step_seconds(const ModelPreset &model, uint64_t computed_tokens,
                    uint64_t attended_tokens, uint64_t kv_bytes_per_token);

}  // namespace sim

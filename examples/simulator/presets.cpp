#include "presets.h"

namespace sim {

const std::vector<ModelPreset> &model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"llama-3.1-8b", "Llama-3.1-8B: 32 layers, GQA 32/8 heads, head dim 128", 32, 32, 8, 128,
       {0}, 8.0},
      {"gemma-2-9b",
       "Gemma-2-9B: 42 layers, GQA 16/8 heads, head dim 256, every other layer a 4096-token "
       "sliding window",
       42, 16, 8, 256, {4096, 0}, 9.2},
      {"qwen2.5-0.5b", "Qwen2.5-0.5B: 24 layers, GQA 14/2 heads, head dim 64", 24, 14, 2, 64,
       {0}, 0.5},
      // Nemotron-H-8B-Base-8K (its model card and config): 52 layers, of
      // which 4 self-attention (GQA 32/8 heads of 128), 24 Mamba-2 (128
      // heads of 64, d_state 128, n_groups 8, conv kernel 4) and 24 MLP
      // (no cache). State per sequence: 24 x (2 MiB SSM + 80 KiB conv).
      {"nemotron-h-8b",
       "Nemotron-H-8B: 4 attention layers (GQA 32/8 heads, head dim 128) and 24 Mamba-2 "
       "layers (128 heads of 64, d_state 128, n_groups 8, d_conv 4; bf16 state, 2.1 MiB a "
       "layer) whose state prefix reuse needs snapshots (--publish-every)",
       4, 32, 8, 128, {0}, 8.1, 24, 128, 64, 128, 8, 4},
      {"tiny",
       "tiny: 1 layer, 1 KV head, head dim 1 (4 bytes per token: bookkeeping without KV "
       "traffic, for tests; step time as an 8B model)",
       1, 1, 1, 1, {0}, 8.0},
  };
  return presets;
}

const ModelPreset *find_preset(const std::string &name) {
  for (const ModelPreset &p : model_presets())
    if (p.name == name) return &p;
  return nullptr;
}

double step_seconds(const ModelPreset &model, uint64_t computed_tokens,
                    uint64_t attended_tokens, uint64_t kv_bytes_per_token) {
  constexpr double kMemoryBandwidth = 3.0e12;  // bytes/s
  constexpr double kMatmulRate = 400.0e12;     // FLOP/s
  const double params = model.params_billions * 1e9;
  const double weights = params * 2.0 / kMemoryBandwidth;
  const double compute = 2.0 * params * static_cast<double>(computed_tokens) / kMatmulRate;
  const double kv = static_cast<double>(attended_tokens) *
                    static_cast<double>(kv_bytes_per_token) / kMemoryBandwidth;
  return weights + compute + kv;
}

}  // namespace sim

// The staggered preallocation of the stateful mode (include/kvcache/
// stateful.h explains it): layer l's capacity is always o_l + k * step
// (k >= 1), capped by the maximum length. Distinct offsets make the layers
// of a decode loop grow on distinct steps.
#pragma once

#include <cstdint>

namespace kvc {

struct GrowthPolicy {
  uint32_t num_layers = 1;
  uint32_t step = 128;
  uint32_t max_length = 1u << 30;
  bool staggered = true;

  // o_l: floor(l * step / num_layers), distinct for num_layers <= step.
  uint32_t offset(uint32_t layer) const {
    return staggered ? uint32_t(uint64_t(layer) * step / num_layers) : 0;
  }

  // The smallest capacity on layer `layer`'s grid that holds `need` tokens
  // (need >= 1), capped at max_length (need <= max_length).
  uint32_t capacity_for(uint32_t layer, uint32_t need) const {
    const uint64_t o = offset(layer);
    const uint64_t k = need <= o + step ? 1 : (uint64_t(need) - o + step - 1) / step;
    const uint64_t cap = o + k * step;
    return cap > max_length ? max_length : uint32_t(cap);
  }
};

}  // namespace kvc

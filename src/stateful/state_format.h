// The bytes of an exported row state (kvc_stateful_export_row): a header
// with the geometry, the layers' heads, then each layer's K and V of the
// row in the cache's layout with capacity = length.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcache/config.h"

namespace kvc {

struct StateGeometry {
  uint32_t num_layers = 0;
  uint32_t head_dim = 0;
  kvc_dtype_t dtype = 0;
  kvc_layout_t layout = 0;
  uint32_t kv_factor = 0;
  std::vector<uint32_t> kv_heads;  // per layer
};

// Bytes before the first layer's data.
uint64_t state_header_bytes(uint32_t num_layers);
// Bytes of layer `layer`'s K and V of `length` positions.
uint64_t state_layer_bytes(const StateGeometry& g, uint32_t layer, uint32_t length);
// Header + every layer.
uint64_t state_bytes(const StateGeometry& g, uint32_t length);

// Writes the header for `length` positions (state_header_bytes bytes).
void write_state_header(const StateGeometry& g, uint32_t length, void* out);
// Checks a buffer of `size` bytes against this cache's geometry; returns
// its length. Throws Error(KVC_ERR_INVALID_ARGUMENT) naming what differs.
uint32_t read_state_header(const StateGeometry& g, const void* buffer, uint64_t size);

}  // namespace kvc

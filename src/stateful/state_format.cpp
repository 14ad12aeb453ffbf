#include "stateful/state_format.h"

#include <cstring>
#include <string>

#include "base/dtype.h"
#include "base/error.h"

namespace kvc {

namespace {

constexpr char kMagic[8] = {'K', 'V', 'C', 'S', 'T', 'A', 'T', 0};
constexpr uint32_t kVersion = 1;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t num_layers;
  uint32_t head_dim;
  uint32_t dtype;
  uint32_t layout;
  uint32_t kv_factor;
  uint32_t length;
  uint32_t reserved;
  uint64_t total_bytes;
};
static_assert(sizeof(Header) == 48, "the header is part of the saved format");

std::string str(uint64_t v) { return std::to_string(v); }

void expect(const char* what, uint64_t got, uint64_t want) {
  if (got != want)
    invalid_argument("state buffer " + std::string(what) + " is " + str(got) +
                     ", this cache has " + str(want));
}

}  // namespace

uint64_t state_header_bytes(uint32_t num_layers) {
  return (sizeof(Header) + 4ull * num_layers + 15) / 16 * 16;
}

uint64_t state_layer_bytes(const StateGeometry& g, uint32_t layer, uint32_t length) {
  return uint64_t(g.kv_factor) * g.kv_heads[layer] * length * g.head_dim * dtype_size(g.dtype);
}

uint64_t state_bytes(const StateGeometry& g, uint32_t length) {
  uint64_t n = state_header_bytes(g.num_layers);
  for (uint32_t l = 0; l < g.num_layers; ++l) n += state_layer_bytes(g, l, length);
  return n;
}

void write_state_header(const StateGeometry& g, uint32_t length, void* out) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.num_layers = g.num_layers;
  h.head_dim = g.head_dim;
  h.dtype = g.dtype;
  h.layout = g.layout;
  h.kv_factor = g.kv_factor;
  h.length = length;
  h.total_bytes = state_bytes(g, length);
  auto* bytes = static_cast<unsigned char*>(out);
  std::memset(bytes, 0, state_header_bytes(g.num_layers));
  std::memcpy(bytes, &h, sizeof h);
  std::memcpy(bytes + sizeof h, g.kv_heads.data(), 4ull * g.num_layers);
}

uint32_t read_state_header(const StateGeometry& g, const void* buffer, uint64_t size) {
  if (size < sizeof(Header))
    invalid_argument("state buffer of " + str(size) + " bytes is shorter than its " +
                     str(sizeof(Header)) + "-byte header");
  Header h;
  std::memcpy(&h, buffer, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    invalid_argument("buffer is not a kvcache stateful row state (bad magic)");
  if (h.version != kVersion)
    invalid_argument("state buffer has format version " + str(h.version) + ", this library reads " +
                     str(kVersion));
  expect("num_layers", h.num_layers, g.num_layers);
  expect("head_dim", h.head_dim, g.head_dim);
  if (h.dtype != g.dtype)
    invalid_argument("state buffer dtype is " + std::string(dtype_name(h.dtype)) +
                     ", this cache has " + dtype_name(g.dtype));
  if (h.layout != g.layout)
    invalid_argument("state buffer layout is " + std::string(layout_name(h.layout)) +
                     ", this cache has " + layout_name(g.layout));
  expect("kv_factor", h.kv_factor, g.kv_factor);
  if (size < state_header_bytes(g.num_layers))
    invalid_argument("state buffer of " + str(size) + " bytes is shorter than its header");
  const auto* heads = static_cast<const unsigned char*>(buffer) + sizeof h;
  for (uint32_t l = 0; l < g.num_layers; ++l) {
    uint32_t v;
    std::memcpy(&v, heads + 4ull * l, 4);
    if (v != g.kv_heads[l])
      invalid_argument("state buffer layer " + str(l) + " has " + str(v) +
                       " kv heads, this cache has " + str(g.kv_heads[l]));
  }
  const uint64_t want = state_bytes(g, h.length);
  if (h.total_bytes != want || size != want)
    invalid_argument("state buffer of " + str(size) + " bytes (header says " +
                     str(h.total_bytes) + ") does not match the " + str(want) + " bytes of " +
                     str(h.length) + " positions of this geometry");
  return h.length;
}

}  // namespace kvc

#include "core/cache_config.h"

#include <cmath>
#include <string>

#include "base/error.h"
#include "core/layer_groups.h"
#include "core/memory_plan.h"

namespace kvc {

namespace {
constexpr uint32_t kMaxTokensPerBlock = 1024;
constexpr uint32_t kMaxLayers = 1u << 16;
constexpr uint32_t kMaxHeads = 1u << 12;
constexpr uint32_t kMaxHeadDim = 1u << 12;
constexpr uint32_t kMaxPriority = 100;
}  // namespace

void CacheConfig::check_num_layers(uint32_t v) {
  if (v == 0 || v > kMaxLayers)
    invalid_argument("num_layers must be in 1.." + std::to_string(kMaxLayers) + ", got " +
                     std::to_string(v));
}

void CacheConfig::check_kv_heads(uint32_t v, const char* what) {
  if (v == 0 || v > kMaxHeads)
    invalid_argument(std::string(what) + " must be in 1.." + std::to_string(kMaxHeads) +
                     ", got " + std::to_string(v));
}

void CacheConfig::check_head_dim(uint32_t v) {
  if (v == 0 || v > kMaxHeadDim)
    invalid_argument("head_dim must be in 1.." + std::to_string(kMaxHeadDim) + ", got " +
                     std::to_string(v));
}

void CacheConfig::check_dtype(kvc_dtype_t v) {
  if (v < KVC_DTYPE_F32 || v > KVC_DTYPE_FP8_E4M3)
    invalid_argument("dtype must be one of KVC_DTYPE_F32 (1), KVC_DTYPE_F16 (2), "
                     "KVC_DTYPE_BF16 (3), KVC_DTYPE_FP8_E4M3 (4), got " + std::to_string(v));
}

void CacheConfig::check_kv_factor(uint32_t v) {
  if (v != 1 && v != 2) invalid_argument("kv_factor must be 1 or 2, got " + std::to_string(v));
}

void CacheConfig::check_layout(kvc_layout_t v) {
  if (v != KVC_LAYOUT_NHD && v != KVC_LAYOUT_HND)
    invalid_argument("layout must be KVC_LAYOUT_NHD (1) or KVC_LAYOUT_HND (2), got " +
                     std::to_string(v));
}

void CacheConfig::check_tokens_per_block(uint32_t v) {
  if (v < 2 || (v & (v - 1)) != 0 || v > kMaxTokensPerBlock)
    invalid_argument("tokens_per_block must be a power of two > 1 and <= " +
                     std::to_string(kMaxTokensPerBlock) + ", got " + std::to_string(v));
}

void CacheConfig::check_window(uint32_t v, size_t index) {
  // Any value is a valid window; 0 means full attention. The bound keeps
  // token arithmetic in 32 bits.
  if (v > (1u << 30))
    invalid_argument("attention window [" + std::to_string(index) +
                     "] must be <= 2^30 tokens (0 = full attention), got " + std::to_string(v));
}

void CacheConfig::check_device(kvc_device_kind_t kind, int32_t ordinal) {
  if (kind == KVC_DEVICE_CPU) {
    if (ordinal != 0)
      invalid_argument("device ordinal must be 0 for KVC_DEVICE_CPU, got " +
                       std::to_string(ordinal));
    return;
  }
  if (kind == KVC_DEVICE_CUDA) {
    if (ordinal < 0)
      invalid_argument("device ordinal must be >= 0 for KVC_DEVICE_CUDA, got " +
                       std::to_string(ordinal));
    return;
  }
  invalid_argument("device kind must be KVC_DEVICE_CPU (1) or KVC_DEVICE_CUDA (2), got " +
                   std::to_string(kind));
}

void CacheConfig::check_ranks(kvc_device_kind_t kind, const int32_t* ordinals,
                              uint32_t num_ranks) {
  if (num_ranks == 0 || num_ranks > kMaxRanks)
    invalid_argument("num_ranks must be in 1.." + std::to_string(kMaxRanks) + ", got " +
                     std::to_string(num_ranks));
  if (num_ranks == 1) return check_device(kind, ordinals[0]);
  check_device(kind, 0);  // the kind
  for (uint32_t i = 0; i < num_ranks; ++i) {
    if (ordinals[i] < 0)
      invalid_argument("ordinals[" + std::to_string(i) + "] must be >= 0, got " +
                       std::to_string(ordinals[i]));
    for (uint32_t j = 0; j < i; ++j)
      if (ordinals[j] == ordinals[i])
        invalid_argument("ordinals[" + std::to_string(j) + "] and ordinals[" + std::to_string(i) +
                         "] are both " + std::to_string(ordinals[i]) +
                         ": every rank needs its own " +
                         (kind == KVC_DEVICE_CUDA ? "device" : "host pool"));
  }
}

uint32_t CacheConfig::heads_per_rank(uint32_t heads) const {
  const uint32_t r = num_ranks();
  return heads % r == 0 ? heads / r : 1;
}

uint32_t CacheConfig::head_replication(uint32_t heads) const {
  const uint32_t r = num_ranks();
  return heads % r == 0 ? 1 : r / heads;
}

uint32_t CacheConfig::first_head(uint32_t heads, uint32_t rank) const {
  const uint32_t r = num_ranks();
  return heads % r == 0 ? rank * (heads / r) : rank / (r / heads);
}

void CacheConfig::check_event_buffer_size(uint32_t v) {
  // The ring keeps tokens_per_block token ids per event.
  if (v > kMaxEventBufferSize)
    invalid_argument("event_buffer_size must be at most " + std::to_string(kMaxEventBufferSize) +
                     " events, got " + std::to_string(v));
}

void CacheConfig::check_fraction(double v) {
  if (!(v > 0.0 && v <= 1.0))
    invalid_argument("free_gpu_memory_fraction must be in (0, 1], got " + std::to_string(v));
}

void CacheConfig::check_priority(uint32_t v, const char* what) {
  if (v > kMaxPriority)
    invalid_argument(std::string(what) + " must be in 0..100, got " + std::to_string(v));
}

void CacheConfig::validate_shape() const {
  if (num_layers == 0) invalid_argument("num_layers must be set (> 0), got 0");
  for (uint32_t l = 0; l < layer_kv_resource.size(); ++l)
    if (layer_kv_resource[l] == kNoResource)
      invalid_argument("layer " + std::to_string(l) + " is in no KV resource: the " +
                       std::to_string(kv_resources.size()) + " KV resources must cover layers 0.." +
                       std::to_string(num_layers - 1) + " (kvc_config_add_kv_resource)");
  if (kv_heads.empty()) invalid_argument("kv_heads must be set (> 0) before use");
  if (kv_heads.size() != 1 && kv_heads.size() != num_layers)
    invalid_argument("kv_heads per layer has " + std::to_string(kv_heads.size()) +
                     " entries but num_layers is " + std::to_string(num_layers));
  for (size_t i = 0; i < kv_heads.size(); ++i) check_kv_heads(kv_heads[i], "kv_heads");
  if (head_dim == 0) invalid_argument("head_dim must be set (> 0), got 0");
  check_head_dim(head_dim);
  check_dtype(dtype);
  check_kv_factor(kv_factor);
  check_layout(layout);
  check_tokens_per_block(tokens_per_block);
  if (windows.size() > num_layers)
    invalid_argument("attention window list has " + std::to_string(windows.size()) +
                     " entries but num_layers is " + std::to_string(num_layers) +
                     " (a shorter list repeats over the layers)");
  for (size_t i = 0; i < windows.size(); ++i) check_window(windows[i], i);
  check_device(device_kind, device_ordinal);
  if (!rank_ordinals.empty()) {
    check_ranks(device_kind, rank_ordinals.data(), uint32_t(rank_ordinals.size()));
    const uint32_t r = num_ranks();
    for (uint32_t l = 0; l < num_layers; ++l) {
      const uint32_t h = kv_heads_of(l);
      if (h % r != 0 && r % h != 0)
        invalid_argument("layer " + std::to_string(l) + " has " + std::to_string(h) +
                         " kv heads, which " + std::to_string(r) +
                         " ranks can neither split (heads % ranks != 0) nor replicate "
                         "(ranks % heads != 0)");
    }
    // What the ranks do not shard yet is refused, never ignored.
    if (mixed_kv_geometry())
      invalid_argument("KV resources of different geometries (head_dim, dtype, kv_factor, "
                       "layout) are not supported with " + std::to_string(r) +
                       " ranks (kvc_config_set_ranks with 1 rank)");
    if (!resources.empty())
      invalid_argument("state resources (" + std::to_string(resources.size()) +
                       ") are not supported with " + std::to_string(r) +
                       " ranks (tensor parallelism shards only the paged KV pools)");
    if (stores.any())
      invalid_argument("a disk or remote cache is not supported with " + std::to_string(r) +
                       " ranks (tensor parallelism keeps a host tier per rank, no stores)");
  }
  check_fraction(free_gpu_memory_fraction);
  check_priority(secondary_offload_min_priority, "secondary_offload_min_priority");
  // A store serves reuse: with block reuse off nothing would be stored or
  // looked up, and a setting accepted and ignored is refused instead.
  if (!stores.disk_dir.empty() && !block_reuse)
    invalid_argument("the disk cache ('" + stores.disk_dir +
                     "') needs block reuse, which is off (kvc_config_set_block_reuse)");
  if (!stores.remote_url.empty() && !block_reuse)
    invalid_argument("the remote cache needs block reuse, which is off "
                     "(kvc_config_set_block_reuse)");
  // A cache with state resources reuses a prefix only through its state
  // snapshots (state.h), which the block stores do not hold.
  if (!resources.empty() && stores.any())
    invalid_argument("a disk or remote cache is not supported with state resources (" +
                     std::to_string(resources.size()) +
                     "): the block stores do not hold state snapshots");
  // The block records carry one geometry (block_record.h).
  if (mixed_kv_geometry() && stores.any())
    invalid_argument("a disk or remote cache is not supported with KV resources of different "
                     "geometries (head_dim, dtype, kv_factor, layout): the block records "
                     "carry one geometry");
  // The remote tier's own settings without the tier would be ignored.
  const StoreSettings defaults;
  if (stores.remote_url.empty() &&
      (stores.remote_connect_timeout_ms != defaults.remote_connect_timeout_ms ||
       stores.remote_command_timeout_ms != defaults.remote_command_timeout_ms ||
       stores.remote_optional)) {
    invalid_argument("remote cache timeouts (" +
                     std::to_string(stores.remote_connect_timeout_ms) + ", " +
                     std::to_string(stores.remote_command_timeout_ms) + " ms) or optional flag (" +
                     (stores.remote_optional ? "true" : "false") +
                     ") are set without a remote cache (kvc_config_set_remote_cache); set them "
                     "back to 1000, 1000 and false, or set the URL");
  }
}

void CacheConfig::validate() const {
  validate_shape();
  // A CUDA cache bounded only by the free-memory fraction is checked at
  // creation, when the free memory is known.
  if (device_kind == KVC_DEVICE_CUDA && primary_bytes == 0 && max_tokens == 0) return;
  plan_memory(*this, group_layers(*this), 0);
}

uint32_t CacheConfig::kv_heads_of(uint32_t layer) const {
  return kv_heads.size() == 1 ? kv_heads[0] : kv_heads.at(layer);
}

uint32_t CacheConfig::window_of(uint32_t layer) const {
  return windows.empty() ? 0 : windows[layer % windows.size()];
}

}  // namespace kvc

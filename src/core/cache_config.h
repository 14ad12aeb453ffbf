// The validated settings a cache is built from. The C config object wraps
// one of these; setters validate single values, validate() the whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_store.h"
#include "kvcache/config.h"
#include "kvcache/state.h"

namespace kvc {

// A state resource as added to the config (kvcache/state.h); the fields of
// its kind are set, the others 0.
struct StateResource {
  kvc_resource_kind_t kind = 0;
  uint32_t num_heads = 0, head_dim = 0, d_state = 0;  // SSM
  uint32_t conv_dim = 0, d_conv = 0;                  // conv
  kvc_dtype_t dtype = 0;                              // SSM, conv
  uint64_t bytes = 0, alignment = 0;                  // generic (alignment 0: 256)
  uint64_t bytes_per_token = 0, max_tokens = 0;       // unpaged
};

// A paged KV resource as added to the config (kvcache/kv_resource.h): its
// layers (model layer ids, ascending, distinct) and their geometry.
struct KvResource {
  std::vector<uint32_t> layers;
  uint32_t kv_heads = 0, head_dim = 0;
  kvc_dtype_t dtype = 0;
  uint32_t kv_factor = 0;
  kvc_layout_t layout = 0;
  uint32_t window = 0;
  // The geometry class: KV resources of one class are managed together.
  bool same_class(const KvResource& o) const {
    return head_dim == o.head_dim && dtype == o.dtype && kv_factor == o.kv_factor &&
           layout == o.layout;
  }
};

struct CacheConfig {
  // Model shape.
  uint32_t num_layers = 0;
  std::vector<uint32_t> kv_heads;  // empty: unset; 1 value: every layer; else per layer
  uint32_t head_dim = 0;
  kvc_dtype_t dtype = KVC_DTYPE_BF16;
  uint32_t kv_factor = 2;
  kvc_layout_t layout = KVC_LAYOUT_NHD;
  uint32_t tokens_per_block = 16;
  std::vector<uint32_t> windows;  // repeats over layers; empty: all full

  // Paged KV resources (kv_resource.h), in the order added. When any is
  // there they describe every attention layer: add_kv_resource() derives
  // num_layers, kv_heads and windows (per layer) from them, and head_dim,
  // dtype, kv_factor and layout hold the first resource's (its class's);
  // the global shape setters are refused (claim_global_shape).
  std::vector<KvResource> kv_resources;
  std::vector<uint32_t> layer_kv_resource;  // per layer: its resource, kNoResource in a gap
  static constexpr uint32_t kNoResource = ~0u;
  static constexpr uint32_t kMaxKvResources = 1024;
  std::string global_shape_setter;  // the first global shape setter called ("" none)

  // Device and memory.
  kvc_device_kind_t device_kind = KVC_DEVICE_CPU;
  int32_t device_ordinal = 0;
  // Tensor parallelism (kvc_config_set_ranks): the ordinals of the ranks,
  // distinct (CUDA device ordinals; on the CPU backend names of host
  // pools). Empty: one rank, device_ordinal (the cache of before). KV heads
  // are split across the ranks (kv_heads_per_rank), every rank's pools are
  // sized for its heads, and every byte budget below is per rank.
  std::vector<int32_t> rank_ordinals;
  static constexpr uint32_t kMaxRanks = 64;
  uint64_t primary_bytes = 0;  // 0: no byte bound
  uint64_t max_tokens = 0;     // 0: no token bound
  uint64_t max_primary_bytes = 0;  // ceiling of kvc_cache_resize; 0: the budget at creation
  double free_gpu_memory_fraction = 0.9;
  uint64_t host_cache_bytes = 0;
  uint32_t secondary_offload_min_priority = 35;

  // State resources (state.h), in the order added; 0 slots: planned.
  std::vector<StateResource> resources;
  uint32_t max_state_slots = 0;
  static constexpr uint32_t kMaxStateSlots = 1u << 20;
  // State snapshots (state.h): 0 planned, kNoSnapshots none, else the count.
  uint32_t max_state_snapshots = 0;
  static constexpr uint32_t kNoSnapshots = ~0u;

  // Reuse and events.
  bool block_reuse = true;
  bool partial_reuse = true;
  bool copy_on_partial_reuse = true;
  uint32_t event_buffer_size = 0;  // 0: events off
  uint64_t event_hash_seed = 0;    // portable block hashes (events.h)

  // Block stores below the tree (block_store.h): disk, remote.
  StoreSettings stores;

  // Retention durations run on a manual clock that only
  // kvc_cache_advance_clock() moves (tests), instead of the monotonic clock.
  bool manual_clock = false;

  // Single-value checks, shared by the setters and validate(); each throws
  // kvc::Error(KVC_ERR_INVALID_ARGUMENT) naming the setting and value.
  static void check_num_layers(uint32_t v);
  static void check_kv_heads(uint32_t v, const char* what);
  static void check_head_dim(uint32_t v);
  static void check_dtype(kvc_dtype_t v);
  static void check_kv_factor(uint32_t v);
  static void check_layout(kvc_layout_t v);
  static void check_tokens_per_block(uint32_t v);
  static void check_window(uint32_t v, size_t index);
  static void check_device(kvc_device_kind_t kind, int32_t ordinal);
  // kvc_config_set_ranks: 1..kMaxRanks distinct ordinals >= 0 (CPU with
  // one rank: 0, as check_device).
  static void check_ranks(kvc_device_kind_t kind, const int32_t* ordinals, uint32_t num_ranks);
  static void check_fraction(double v);
  static void check_priority(uint32_t v, const char* what);
  // Events are not implemented yet: 0 only (KVC_ERR_UNSUPPORTED otherwise).
  static constexpr uint32_t kMaxEventBufferSize = 1u << 20;
  static void check_event_buffer_size(uint32_t v);

  // Whole-config checks, except the memory budget against the pools, which
  // needs the layer groups (see memory_plan.h).
  void validate_shape() const;
  // validate_shape() + the memory checks.
  void validate() const;

  uint32_t kv_heads_of(uint32_t layer) const;
  // A layer's geometry: its KV resource's, else the global setting.
  uint32_t head_dim_of(uint32_t layer) const;
  kvc_dtype_t dtype_of(uint32_t layer) const;
  uint32_t kv_factor_of(uint32_t layer) const;
  kvc_layout_t layout_of(uint32_t layer) const;
  // Whether KV resources of more than one class (head_dim, dtype,
  // kv_factor, layout) are there: what ranks, the stateful mode, the block
  // stores and block export/import refuse.
  bool mixed_kv_geometry() const;
  // Records a global shape setter (`name` without kvc_config_set_); throws
  // KVC_ERR_INVALID_STATE when the config has KV resources.
  void claim_global_shape(const char* name);
  // Checks `r` against the config (dimensions, dtype, layers not in another
  // resource) and appends it; nothing changed on failure. Returns its index.
  uint32_t add_kv_resource(KvResource r);
  uint32_t num_ranks() const { return rank_ordinals.empty() ? 1 : uint32_t(rank_ordinals.size()); }
  int32_t rank_ordinal(uint32_t rank) const {
    return rank_ordinals.empty() ? device_ordinal : rank_ordinals.at(rank);
  }
  // The sharding of `heads` kv heads over num_ranks() ranks: heads / ranks
  // per rank when ranks divide them, else one head per rank, replicated on
  // ranks / heads ranks, when heads divide the ranks (as vLLM and
  // TensorRT-LLM do); validate_shape() refuses every other pair.
  uint32_t heads_per_rank(uint32_t heads) const;
  // Ranks holding each head (1: no replication).
  uint32_t head_replication(uint32_t heads) const;
  // The model's first kv head that rank `rank` holds.
  uint32_t first_head(uint32_t heads, uint32_t rank) const;
  uint32_t window_of(uint32_t layer) const;
};

}  // namespace kvc

// Maps the simulator's cache operations onto kvcache's C API (config,
// cache, sequence, batch and stats modules). Out of blocks is an expected
// answer (the scheduler waits or preempts); any other failure is a bug or a
// bad setting and stops the run with the library's message.
#include "cache_adapter.h"

#include <kvcache/kvcache.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sim {
namespace {

void check(kvc_status_t s, const std::string &what) {
  if (s != KVC_OK)
    throw std::runtime_error(what + ": " + kvc_status_string(s) + ": " + kvc_last_error_message());
}

// kvcache's options for a sequence, with the retention range they point to.
struct KvcOptions {
  kvc_sequence_options_t k = KVC_SEQUENCE_OPTIONS_INIT;
  kvc_retention_range_t system{};
  explicit KvcOptions(const SequenceOptions &o) {
    if (o.salt) {
      k.salt = o.salt->data();
      k.salt_size = o.salt->size();
    }
    if (o.prompt_priority) k.prompt_priority = o.prompt_priority;
    // The system prompt as one retention range; the rest of the prompt
    // takes prompt_priority and generated blocks decode_priority.
    if (o.system_priority && o.system_length) {
      system.start = 0;
      system.end = o.system_length;
      system.priority = o.system_priority;
      system.duration_ms = 0;  // for ever
      k.retention_ranges = &system;
      k.num_retention_ranges = 1;
    }
  }
  KvcOptions(const KvcOptions &) = delete;
  KvcOptions &operator=(const KvcOptions &) = delete;
};

// Owns a config until the cache is created from it.
struct ConfigHandle {
  kvc_config_t *c = nullptr;
  ~ConfigHandle() { kvc_config_destroy(c); }
};

}  // namespace

CacheAdapter::CacheAdapter(const SimConfig &config, uint64_t unlimited_tokens) {
  ConfigHandle cfg;
  check(kvc_config_create(&cfg.c), "kvc_config_create");
  const ModelPreset &m = config.model;
  check(kvc_config_set_num_layers(cfg.c, m.num_layers), "model: num_layers");
  check(kvc_config_set_kv_heads(cfg.c, m.kv_heads), "model: kv_heads");
  check(kvc_config_set_head_dim(cfg.c, m.head_dim), "model: head_dim");
  check(kvc_config_set_dtype(cfg.c, KVC_DTYPE_BF16), "model: dtype");
  check(kvc_config_set_attention_windows(cfg.c, m.windows.data(), m.windows.size()),
        "model: attention windows");
  check(kvc_config_set_tokens_per_block(cfg.c, config.tokens_per_block), "--tokens-per-block");
  if (config.device == "cpu") {
    check(kvc_config_set_device(cfg.c, KVC_DEVICE_CPU, 0), "--device");
  } else {
    const int32_t ordinal = static_cast<int32_t>(std::stoi(config.device.substr(5)));
    check(kvc_config_set_device(cfg.c, KVC_DEVICE_CUDA, ordinal), "--device");
  }
  if (config.unlimited)
    check(kvc_config_set_max_tokens(cfg.c, unlimited_tokens), "--memory unlimited");
  else
    check(kvc_config_set_primary_bytes(cfg.c, config.memory_bytes), "--memory");
  check(kvc_config_set_block_reuse(cfg.c, config.policy.reuse), "--reuse");
  check(kvc_config_set_partial_reuse(cfg.c, config.partial_reuse), "--partial-reuse");
  check(kvc_config_set_host_cache_bytes(cfg.c, config.host_cache_bytes), "--host-cache");
  if (!config.disk_cache_dir.empty())
    check(kvc_config_set_disk_cache(cfg.c, config.disk_cache_dir.c_str(), config.disk_cache_bytes),
          "--disk-cache");
  if (!config.remote_cache_url.empty()) {
    check(kvc_config_set_remote_cache(cfg.c, config.remote_cache_url.c_str(),
                                      config.remote_namespace.c_str(), config.remote_cache_bytes),
          "--remote-cache");
  }
  for (uint32_t l = 0; l < m.mamba_layers; ++l) {
    uint32_t index = 0;
    check(kvc_config_add_ssm_state(cfg.c, m.mamba_heads, m.mamba_head_dim, m.d_state,
                                   KVC_DTYPE_BF16, &index),
          "model: SSM state");
    check(kvc_config_add_conv_state(cfg.c, m.mamba_heads * m.mamba_head_dim +
                                               2 * m.n_groups * m.d_state,
                                    m.d_conv, KVC_DTYPE_BF16, &index),
          "model: conv state");
  }
  if (m.mamba_layers > 0)
    check(kvc_config_set_max_state_snapshots(cfg.c, config.state_snapshots), "--state-snapshots");
  check(kvc_cache_create(cfg.c, &cache_), "kvc_cache_create");

  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  check(kvc_cache_describe(cache_, &d), "kvc_cache_describe");
  num_groups_ = d.num_groups;
  primary_bytes_ = d.primary_bytes;
  for (uint32_t g = 0; g < d.num_groups; ++g) {
    kvc_group_desc_t gd = KVC_GROUP_DESC_INIT;
    check(kvc_cache_describe_group(cache_, g, &gd), "kvc_cache_describe_group");
    bytes_per_token_ += gd.bytes_per_token;
  }
}

CacheAdapter::~CacheAdapter() { kvc_cache_destroy(cache_); }

void CacheAdapter::flush_tiers() { check(kvc_cache_flush_tiers(cache_), "kvc_cache_flush_tiers"); }

bool CacheAdapter::add(uint64_t id, const std::vector<int32_t> &tokens,
                       const SequenceOptions &options, uint64_t &cached) {
  const KvcOptions o(options);
  const kvc_status_t s =
      kvc_sequence_add(cache_, id, tokens.data(), tokens.size(), &o.k, nullptr, &cached);
  if (s == KVC_ERR_OUT_OF_BLOCKS) return false;
  check(s, "kvc_sequence_add(" + std::to_string(id) + ")");
  return true;
}

uint64_t CacheAdapter::probe(uint64_t id, const std::vector<int32_t> &tokens,
                             const SequenceOptions &options) {
  const KvcOptions o(options);
  uint64_t cached = 0;
  check(kvc_cache_probe(cache_, tokens.data(), tokens.size(), &o.k, &cached),
        "kvc_cache_probe(" + std::to_string(id) + ")");
  return cached;
}

bool CacheAdapter::extend(const std::vector<uint64_t> &ids, const std::vector<int32_t> &tokens) {
  const kvc_status_t s = kvc_batch_extend(cache_, ids.data(), tokens.data(), ids.size(), nullptr);
  if (s == KVC_ERR_OUT_OF_BLOCKS) return false;
  check(s, "kvc_batch_extend");
  return true;
}

bool CacheAdapter::extend_chunk(uint64_t id, const int32_t *tokens, size_t count) {
  const kvc_status_t s = kvc_sequence_extend(cache_, id, tokens, count, nullptr);
  if (s == KVC_ERR_OUT_OF_BLOCKS) return false;
  check(s, "kvc_sequence_extend(" + std::to_string(id) + ")");
  return true;
}

void CacheAdapter::commit(uint64_t id, uint64_t tokens) {
  check(kvc_sequence_commit(cache_, id, tokens), "kvc_sequence_commit(" + std::to_string(id) + ")");
}

bool CacheAdapter::publish(uint64_t id, uint64_t position) {
  const kvc_status_t s = kvc_sequence_publish_state(cache_, id, position, nullptr);
  if (s == KVC_ERR_INVALID_STATE) return false;
  check(s, "kvc_sequence_publish_state(" + std::to_string(id) + ", " + std::to_string(position) +
               ")");
  return true;
}

void CacheAdapter::make_room(uint64_t sets) {
  check(kvc_cache_make_room(cache_, sets, nullptr, nullptr), "kvc_cache_make_room");
}

void CacheAdapter::remove(uint64_t id) {
  check(kvc_sequence_remove(cache_, id), "kvc_sequence_remove(" + std::to_string(id) + ")");
}

void CacheAdapter::batch(const std::vector<uint64_t> &ids,
                         std::vector<SlotRow> &slots,
                         std::vector<TableRows> *tables, uint32_t *table_stride,
                         std::vector<int32_t> *seq_lens) {
  slots.resize(num_groups_);
  for (uint32_t g = 0; g < num_groups_; ++g) {
    SlotRow &out = slots[g];
    size_t n = 0;
    out.resize(std::max<size_t>(out.capacity(), 1024));
    kvc_status_t s = kvc_batch_slot_mapping(cache_, g, ids.data(), ids.size(), out.data(),
                                            out.size(), &n, nullptr);
    if (s == KVC_ERR_BUFFER_TOO_SMALL) {  // nothing advanced: retry with room
      out.resize(n);
      s = kvc_batch_slot_mapping(cache_, g, ids.data(), ids.size(), out.data(), out.size(), &n,
                                 nullptr);
    }
    check(s, "kvc_batch_slot_mapping");
    out.resize(n);
  }
  if (!tables) return;
  size_t stride = 0;
  tables->resize(num_groups_);
  for (uint32_t g = 0; g < num_groups_; ++g) {
    size_t need = 0;
    kvc_status_t s = kvc_batch_block_table(cache_, g, ids.data(), ids.size(), nullptr, 0, -1, &need);
    if (s != KVC_ERR_BUFFER_TOO_SMALL) check(s, "kvc_batch_block_table");
    stride = std::max(stride, need);
  }
  for (uint32_t g = 0; g < num_groups_; ++g) {
    (*tables)[g].resize(ids.size() * stride);  // every entry written (ids or pad)
    check(kvc_batch_block_table(cache_, g, ids.data(), ids.size(), (*tables)[g].data(), stride,
                                -1, nullptr),
          "kvc_batch_block_table");
  }
  *table_stride = static_cast<uint32_t>(stride);
  seq_lens->resize(ids.size());
  check(kvc_batch_sequence_lengths(cache_, ids.data(), ids.size(), seq_lens->data()),
        "kvc_batch_sequence_lengths");
}

CacheCounters CacheAdapter::counters() const {
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  check(kvc_cache_get_stats(cache_, &s), "kvc_cache_get_stats");
  CacheCounters c;
  c.capacity = s.num_blocks;
  c.free = s.free_blocks;
  c.cached = s.cached_blocks;
  c.in_use = s.in_use_blocks;
  c.reused = s.reused_blocks;
  c.evicted = s.evicted_blocks;
  c.has_tiers = s.host_blocks > 0;  // a host tier was configured (--host-cache)
  c.offloaded = s.offloaded_blocks;
  c.onboarded = s.onboarded_blocks;
  kvc_tier_stats_t d = KVC_TIER_STATS_INIT;
  const kvc_status_t ds = kvc_cache_get_tier_stats(cache_, KVC_TIER_DISK, &d);
  if (ds != KVC_ERR_NOT_FOUND) {
    check(ds, "kvc_cache_get_tier_stats");
    c.has_disk = true;
    c.disk_offered = d.offered_blocks;
    c.disk_onboarded = d.onboarded_blocks;
    c.disk_dropped = d.dropped_blocks;
    c.disk_rejected = d.rejected;
  }
  kvc_tier_stats_t rt = KVC_TIER_STATS_INIT;
  const kvc_status_t rs = kvc_cache_get_tier_stats(cache_, KVC_TIER_REMOTE, &rt);
  if (rs != KVC_ERR_NOT_FOUND) {
    check(rs, "kvc_cache_get_tier_stats");
    c.has_remote = true;
    c.remote_offered = rt.offered_blocks;
    c.remote_onboarded = rt.onboarded_blocks;
    c.remote_dropped = rt.dropped_blocks;
    c.remote_rejected = rt.rejected;
    c.remote_errors = rt.errors;
  }
  kvc_cache_desc_t desc = KVC_CACHE_DESC_INIT;
  check(kvc_cache_describe(cache_, &desc), "kvc_cache_describe");
  if (desc.num_resources > 0) {
    kvc_snapshot_stats_t ss = KVC_SNAPSHOT_STATS_INIT;
    check(kvc_cache_get_snapshot_stats(cache_, &ss), "kvc_cache_get_snapshot_stats");
    c.has_state = true;
    c.snapshot_slots = ss.num_slots;
    c.snapshot_bytes = ss.bytes_per_snapshot;
    c.snapshots_published = ss.published;
    c.snapshot_hits = ss.hits;
    c.snapshot_hit_tokens = ss.hit_tokens;
    c.snapshots_evicted = ss.evicted;
    c.snapshots_dropped = ss.dropped;
  }
  return c;
}

}  // namespace sim

"""The low-level layer: libkvcache loaded with ctypes, every C function
and transparent struct of include/kvcache/*.h declared from its C
prototype, one line each.

Adding a C function to the binding is one PROTOTYPES line (its prototype
copied from the header); a struct is one STRUCTS entry. The coverage test
(tests/test_coverage.py) compares both with the headers, so a function or
member missing here, or declared with another type, fails it.

Mapping: fixed-width integers, bool, float and double map to their
ctypes types of the same width; every pointer is a c_void_p (pass an int
address, None, ctypes.byref(x) or a ctypes array); `const char *` results
are bytes. kvc_status_t is a c_int32.
"""
import ctypes
import ctypes.util
import os
import re

__all__ = ["lib", "library_path", "PROTOTYPES", "STRUCTS", "struct", "ctype_of"]

# C prototypes of every exported function, as the headers declare them.
PROTOTYPES = """
const char *kvc_status_string(kvc_status_t status);
const char *kvc_last_error_message(void);
uint32_t kvc_version(void);
const char *kvc_version_string(void);
uint32_t kvc_abi_version(void);
uint64_t kvc_features(void);

kvc_status_t kvc_config_create(kvc_config_t **out);
kvc_status_t kvc_config_clone(const kvc_config_t *config, kvc_config_t **out);
void kvc_config_destroy(kvc_config_t *config);
kvc_status_t kvc_config_validate(const kvc_config_t *config);
kvc_status_t kvc_config_set_num_layers(kvc_config_t *config, uint32_t num_layers);
kvc_status_t kvc_config_get_num_layers(const kvc_config_t *config, uint32_t *out);
kvc_status_t kvc_config_set_kv_heads(kvc_config_t *config, uint32_t kv_heads);
kvc_status_t kvc_config_set_kv_heads_per_layer(kvc_config_t *config, const uint32_t *kv_heads, size_t count);
kvc_status_t kvc_config_get_kv_heads(const kvc_config_t *config, uint32_t layer, uint32_t *out);
kvc_status_t kvc_config_set_head_dim(kvc_config_t *config, uint32_t head_dim);
kvc_status_t kvc_config_get_head_dim(const kvc_config_t *config, uint32_t *out);
kvc_status_t kvc_config_set_dtype(kvc_config_t *config, kvc_dtype_t dtype);
kvc_status_t kvc_config_get_dtype(const kvc_config_t *config, kvc_dtype_t *out);
kvc_status_t kvc_config_set_kv_factor(kvc_config_t *config, uint32_t kv_factor);
kvc_status_t kvc_config_get_kv_factor(const kvc_config_t *config, uint32_t *out);
kvc_status_t kvc_config_set_layout(kvc_config_t *config, kvc_layout_t layout);
kvc_status_t kvc_config_get_layout(const kvc_config_t *config, kvc_layout_t *out);
kvc_status_t kvc_config_set_tokens_per_block(kvc_config_t *config, uint32_t tokens);
kvc_status_t kvc_config_get_tokens_per_block(const kvc_config_t *config, uint32_t *out);
kvc_status_t kvc_config_set_attention_windows(kvc_config_t *config, const uint32_t *windows, size_t count);
kvc_status_t kvc_config_get_attention_window(const kvc_config_t *config, uint32_t layer, uint32_t *out);
kvc_status_t kvc_config_set_device(kvc_config_t *config, kvc_device_kind_t kind, int32_t ordinal);
kvc_status_t kvc_config_set_ranks(kvc_config_t *config, kvc_device_kind_t kind, const int32_t *ordinals, uint32_t num_ranks);
kvc_status_t kvc_config_get_ranks(const kvc_config_t *config, int32_t *ordinals, uint32_t capacity, uint32_t *num_ranks);
kvc_status_t kvc_config_get_device(const kvc_config_t *config, kvc_device_kind_t *kind, int32_t *ordinal);
kvc_status_t kvc_config_set_primary_bytes(kvc_config_t *config, uint64_t bytes);
kvc_status_t kvc_config_get_primary_bytes(const kvc_config_t *config, uint64_t *out);
kvc_status_t kvc_config_set_max_tokens(kvc_config_t *config, uint64_t max_tokens);
kvc_status_t kvc_config_set_max_primary_bytes(kvc_config_t *config, uint64_t bytes);
kvc_status_t kvc_config_get_max_primary_bytes(const kvc_config_t *config, uint64_t *out);
kvc_status_t kvc_config_get_max_tokens(const kvc_config_t *config, uint64_t *out);
kvc_status_t kvc_config_set_free_gpu_memory_fraction(kvc_config_t *config, double fraction);
kvc_status_t kvc_config_get_free_gpu_memory_fraction(const kvc_config_t *config, double *out);
kvc_status_t kvc_config_set_host_cache_bytes(kvc_config_t *config, uint64_t bytes);
kvc_status_t kvc_config_get_host_cache_bytes(const kvc_config_t *config, uint64_t *out);
kvc_status_t kvc_config_set_secondary_offload_min_priority(kvc_config_t *config, uint32_t priority);
kvc_status_t kvc_config_get_secondary_offload_min_priority(const kvc_config_t *config, uint32_t *out);
kvc_status_t kvc_config_set_block_reuse(kvc_config_t *config, bool enable);
kvc_status_t kvc_config_get_block_reuse(const kvc_config_t *config, bool *out);
kvc_status_t kvc_config_set_partial_reuse(kvc_config_t *config, bool enable);
kvc_status_t kvc_config_get_partial_reuse(const kvc_config_t *config, bool *out);
kvc_status_t kvc_config_set_copy_on_partial_reuse(kvc_config_t *config, bool enable);
kvc_status_t kvc_config_get_copy_on_partial_reuse(const kvc_config_t *config, bool *out);
kvc_status_t kvc_config_set_event_buffer_size(kvc_config_t *config, uint32_t events);
kvc_status_t kvc_config_get_event_buffer_size(const kvc_config_t *config, uint32_t *out);
kvc_status_t kvc_config_set_event_hash_seed(kvc_config_t *config, uint64_t seed);
kvc_status_t kvc_config_get_event_hash_seed(const kvc_config_t *config, uint64_t *out);
kvc_status_t kvc_config_set_manual_clock(kvc_config_t *config, bool enable);
kvc_status_t kvc_config_get_manual_clock(const kvc_config_t *config, bool *out);

kvc_status_t kvc_cache_create(const kvc_config_t *config, kvc_cache_t **out);
void kvc_cache_destroy(kvc_cache_t *cache);
void kvc_cache_desc_init(kvc_cache_desc_t *desc);
kvc_status_t kvc_cache_describe(const kvc_cache_t *cache, kvc_cache_desc_t *out);
void kvc_group_desc_init(kvc_group_desc_t *desc);
kvc_status_t kvc_cache_describe_group(const kvc_cache_t *cache, uint32_t group, kvc_group_desc_t *out);
void kvc_pool_desc_init(kvc_pool_desc_t *desc);
kvc_status_t kvc_cache_describe_pool(const kvc_cache_t *cache, uint32_t pool, kvc_pool_desc_t *out);
void kvc_layer_view_init(kvc_layer_view_t *view);
kvc_status_t kvc_cache_layer_view(const kvc_cache_t *cache, uint32_t layer, kvc_layer_view_t *out);
kvc_status_t kvc_cache_layer_view_rank(const kvc_cache_t *cache, uint32_t rank, uint32_t layer, kvc_layer_view_t *out);

void kvc_sequence_options_init(kvc_sequence_options_t *options);
kvc_status_t kvc_sequence_add(kvc_cache_t *cache, uint64_t id, const int32_t *tokens, size_t num_tokens, const kvc_sequence_options_t *options, void *stream, uint64_t *cached_tokens);
kvc_status_t kvc_sequence_extend(kvc_cache_t *cache, uint64_t id, const int32_t *tokens, size_t num_tokens, void *stream);
kvc_status_t kvc_sequence_commit(kvc_cache_t *cache, uint64_t id, uint64_t num_computed);
kvc_status_t kvc_sequence_rewind(kvc_cache_t *cache, uint64_t id, uint64_t num_tokens);
kvc_status_t kvc_sequence_fork(kvc_cache_t *cache, uint64_t parent, uint64_t child);
kvc_status_t kvc_sequence_remove(kvc_cache_t *cache, uint64_t id);
kvc_status_t kvc_sequence_pin(kvc_cache_t *cache, uint64_t id);
kvc_status_t kvc_sequence_unpin(kvc_cache_t *cache, uint64_t id);
void kvc_sequence_desc_init(kvc_sequence_desc_t *desc);
kvc_status_t kvc_sequence_describe(const kvc_cache_t *cache, uint64_t id, kvc_sequence_desc_t *out);
kvc_status_t kvc_sequence_block_ids(const kvc_cache_t *cache, uint64_t id, uint32_t group, int32_t *ids, size_t capacity, size_t *count);
kvc_status_t kvc_sequence_blocks_needed(const kvc_cache_t *cache, uint64_t id, uint64_t num_tokens, uint64_t *out);
kvc_status_t kvc_cache_probe(const kvc_cache_t *cache, const int32_t *tokens, size_t num_tokens, const kvc_sequence_options_t *options, uint64_t *cached_tokens);
kvc_status_t kvc_cache_make_room(kvc_cache_t *cache, uint64_t block_sets, void *stream, uint64_t *free_sets);
kvc_status_t kvc_cache_advance_clock(kvc_cache_t *cache, uint64_t milliseconds);

kvc_status_t kvc_batch_extend(kvc_cache_t *cache, const uint64_t *ids, const int32_t *tokens, size_t count, void *stream);
kvc_status_t kvc_batch_block_table(const kvc_cache_t *cache, uint32_t group, const uint64_t *ids, size_t count, int32_t *table, size_t max_blocks, int32_t pad, size_t *blocks_needed);
kvc_status_t kvc_batch_block_table_csr(const kvc_cache_t *cache, uint32_t group, const uint64_t *ids, size_t count, int32_t *indptr, int32_t *indices, size_t indices_capacity, int32_t *last_page_len, size_t *num_indices);
kvc_status_t kvc_batch_sequence_lengths(const kvc_cache_t *cache, const uint64_t *ids, size_t count, int32_t *lengths);
kvc_status_t kvc_batch_slot_mapping(kvc_cache_t *cache, uint32_t group, const uint64_t *ids, size_t count, int64_t *slots, size_t capacity, size_t *num_slots, int32_t *new_tokens);

void kvc_cache_stats_init(kvc_cache_stats_t *stats);
kvc_status_t kvc_cache_get_stats(const kvc_cache_t *cache, kvc_cache_stats_t *out);
void kvc_group_stats_init(kvc_group_stats_t *stats);
kvc_status_t kvc_cache_get_group_stats(const kvc_cache_t *cache, uint32_t group, kvc_group_stats_t *out);
kvc_status_t kvc_cache_reset_reuse(kvc_cache_t *cache);
void kvc_resize_inputs_init(kvc_resize_inputs_t *inputs);
void kvc_resize_plan_init(kvc_resize_plan_t *plan);
kvc_status_t kvc_cache_plan_resize(const kvc_cache_t *cache, const kvc_resize_inputs_t *inputs, kvc_resize_plan_t *out, uint64_t *pool_blocks, size_t pool_capacity);
kvc_status_t kvc_cache_resize(kvc_cache_t *cache, uint64_t primary_bytes);
kvc_status_t kvc_cache_check(const kvc_cache_t *cache);

kvc_status_t kvc_config_add_ssm_state(kvc_config_t *config, uint32_t num_heads, uint32_t head_dim, uint32_t d_state, kvc_dtype_t dtype, uint32_t *index);
kvc_status_t kvc_config_add_conv_state(kvc_config_t *config, uint32_t conv_dim, uint32_t d_conv, kvc_dtype_t dtype, uint32_t *index);
kvc_status_t kvc_config_add_generic_state(kvc_config_t *config, uint64_t bytes, uint64_t alignment, uint32_t *index);
kvc_status_t kvc_config_add_unpaged_resource(kvc_config_t *config, uint64_t bytes_per_token, uint64_t max_tokens, uint32_t *index);
kvc_status_t kvc_config_get_num_resources(const kvc_config_t *config, uint32_t *out);
kvc_status_t kvc_config_set_max_state_slots(kvc_config_t *config, uint32_t slots);
kvc_status_t kvc_config_get_max_state_slots(const kvc_config_t *config, uint32_t *out);
void kvc_resource_desc_init(kvc_resource_desc_t *desc);
kvc_status_t kvc_cache_describe_resource(const kvc_cache_t *cache, uint32_t index, kvc_resource_desc_t *out);
void kvc_kv_resource_init(kvc_kv_resource_t *desc);
kvc_status_t kvc_config_add_kv_resource(kvc_config_t *config, const kvc_kv_resource_t *desc, uint32_t *index);
void kvc_kv_resource_desc_init(kvc_kv_resource_desc_t *desc);
kvc_status_t kvc_cache_describe_kv_resource(const kvc_cache_t *cache, uint32_t index, kvc_kv_resource_desc_t *out);
kvc_status_t kvc_batch_state_slots(const kvc_cache_t *cache, const uint64_t *ids, size_t count, uint32_t resource, int32_t *slots);
kvc_status_t kvc_config_set_max_state_snapshots(kvc_config_t *config, uint32_t slots);
kvc_status_t kvc_config_get_max_state_snapshots(const kvc_config_t *config, uint32_t *out);
kvc_status_t kvc_sequence_publish_state(kvc_cache_t *cache, uint64_t id, uint64_t position, void *stream);
void kvc_snapshot_stats_init(kvc_snapshot_stats_t *stats);
kvc_status_t kvc_cache_get_snapshot_stats(const kvc_cache_t *cache, kvc_snapshot_stats_t *out);

void kvc_store_args_init(kvc_store_args_t *args);
kvc_status_t kvc_store_kv(kvc_cache_t *cache, const kvc_store_args_t *args, void *stream);
void kvc_store_strides_init(kvc_store_strides_t *strides);
kvc_status_t kvc_store_kv_strided(kvc_cache_t *cache, const kvc_store_args_t *args, const kvc_store_strides_t *strides, void *stream);
kvc_status_t kvc_copy_blocks(kvc_cache_t *cache, uint32_t group, const int32_t *src, const int32_t *dst, const uint32_t *num_tokens, uint32_t count, void *stream);
void kvc_decode_args_init(kvc_decode_args_t *args);
kvc_status_t kvc_decode_workspace_size(const kvc_cache_t *cache, const kvc_decode_args_t *args, uint64_t *bytes);
kvc_status_t kvc_decode_attention(kvc_cache_t *cache, const kvc_decode_args_t *args, void *stream);
void kvc_prefill_args_init(kvc_prefill_args_t *args);
kvc_status_t kvc_prefill_workspace_size(const kvc_cache_t *cache, const kvc_prefill_args_t *args, uint64_t *bytes);
kvc_status_t kvc_prefill_attention(kvc_cache_t *cache, const kvc_prefill_args_t *args, void *stream);
kvc_status_t kvc_cache_get_async_error(kvc_cache_t *cache, void *stream, kvc_status_t *async_error);

void kvc_stateful_options_init(kvc_stateful_options_t *options);
kvc_status_t kvc_stateful_create(const kvc_config_t *config, const kvc_stateful_options_t *options, kvc_stateful_t **out);
void kvc_stateful_destroy(kvc_stateful_t *cache);
void kvc_stateful_view_init(kvc_stateful_view_t *view);
kvc_status_t kvc_stateful_layer_view(const kvc_stateful_t *cache, uint32_t layer, kvc_stateful_view_t *view);
kvc_status_t kvc_stateful_get_lengths(const kvc_stateful_t *cache, uint32_t layer, uint32_t *lengths, uint32_t count);
void kvc_stateful_append_args_init(kvc_stateful_append_args_t *args);
kvc_status_t kvc_stateful_append(kvc_stateful_t *cache, const kvc_stateful_append_args_t *args, void *stream);
kvc_status_t kvc_stateful_reorder(kvc_stateful_t *cache, const int32_t *beam_idx, uint32_t count, void *stream);
kvc_status_t kvc_stateful_compact(kvc_stateful_t *cache, void *stream);
kvc_status_t kvc_stateful_trim(kvc_stateful_t *cache, uint32_t row, uint32_t num_tokens, void *stream);
kvc_status_t kvc_stateful_reset(kvc_stateful_t *cache, bool release_memory, void *stream);
kvc_status_t kvc_stateful_export_row(kvc_stateful_t *cache, uint32_t row, void *buffer, uint64_t capacity, uint64_t *size, void *stream);
kvc_status_t kvc_stateful_import_row(kvc_stateful_t *cache, uint32_t row, const void *buffer, uint64_t size, void *stream);
void kvc_stateful_decode_args_init(kvc_stateful_decode_args_t *args);
kvc_status_t kvc_stateful_decode_workspace_size(const kvc_stateful_t *cache, const kvc_stateful_decode_args_t *args, uint64_t *bytes);
kvc_status_t kvc_stateful_decode(kvc_stateful_t *cache, const kvc_stateful_decode_args_t *args, void *stream);
kvc_status_t kvc_stateful_get_async_error(kvc_stateful_t *cache, void *stream, kvc_status_t *async_error);
void kvc_stateful_stats_init(kvc_stateful_stats_t *stats);
kvc_status_t kvc_stateful_get_stats(const kvc_stateful_t *cache, kvc_stateful_stats_t *stats);
void kvc_stateful_layer_stats_init(kvc_stateful_layer_stats_t *stats);
kvc_status_t kvc_stateful_get_layer_stats(const kvc_stateful_t *cache, uint32_t layer, kvc_stateful_layer_stats_t *stats);

void kvc_event_drain_init(kvc_event_drain_t *drain);
kvc_status_t kvc_cache_drain_events(kvc_cache_t *cache, kvc_event_t *events, size_t capacity, int32_t *tokens, size_t token_capacity, kvc_event_drain_t *result);
kvc_status_t kvc_cache_snapshot(const kvc_cache_t *cache, kvc_snapshot_entry_t *entries, size_t capacity, size_t *count, uint64_t *event_id);
kvc_status_t kvc_block_hashes(const kvc_config_t *config, const int32_t *tokens, size_t num_tokens, const kvc_sequence_options_t *options, uint64_t *hashes, size_t capacity, size_t *count);

kvc_status_t kvc_config_set_disk_cache(kvc_config_t *config, const char *directory, uint64_t bytes);
kvc_status_t kvc_config_get_disk_cache(const kvc_config_t *config, const char **directory, uint64_t *bytes);
void kvc_tier_stats_init(kvc_tier_stats_t *stats);
kvc_status_t kvc_cache_get_tier_stats(const kvc_cache_t *cache, kvc_tier_t tier, kvc_tier_stats_t *out);
kvc_status_t kvc_cache_flush_tiers(kvc_cache_t *cache);

kvc_status_t kvc_config_set_remote_cache(kvc_config_t *config, const char *url, const char *key_namespace, uint64_t bytes);
kvc_status_t kvc_config_get_remote_cache(const kvc_config_t *config, const char **url, const char **key_namespace, uint64_t *bytes);
kvc_status_t kvc_config_set_remote_cache_timeouts(kvc_config_t *config, uint32_t connect_ms, uint32_t command_ms);
kvc_status_t kvc_config_get_remote_cache_timeouts(const kvc_config_t *config, uint32_t *connect_ms, uint32_t *command_ms);
kvc_status_t kvc_config_set_remote_cache_optional(kvc_config_t *config, bool optional);
kvc_status_t kvc_config_get_remote_cache_optional(const kvc_config_t *config, bool *out);

void kvc_transfer_desc_init(kvc_transfer_desc_t *desc);
kvc_status_t kvc_cache_export_sequence(kvc_cache_t *cache, uint64_t seq_id, uint64_t num_tokens, kvc_export_t **out);
void kvc_export_release(kvc_export_t *exp);
kvc_status_t kvc_export_describe(const kvc_export_t *exp, kvc_transfer_desc_t *out);
kvc_status_t kvc_export_block_ids(const kvc_export_t *exp, uint32_t group, int32_t *ids, size_t capacity, size_t *count);
kvc_status_t kvc_export_keys(const kvc_export_t *exp, void *buf, size_t capacity, size_t *size);
kvc_status_t kvc_cache_import_begin(kvc_cache_t *cache, uint64_t seq_id, const int32_t *tokens, size_t num_tokens, const kvc_sequence_options_t *options, const void *keys, size_t keys_size, kvc_import_t **out);
kvc_status_t kvc_import_describe(const kvc_import_t *imp, kvc_transfer_desc_t *out);
kvc_status_t kvc_import_block_ids(const kvc_import_t *imp, uint32_t group, int32_t *ids, size_t capacity, size_t *count);
kvc_status_t kvc_import_complete(kvc_import_t *imp, uint64_t blocks_written);
kvc_status_t kvc_import_abort(kvc_import_t *imp);
void kvc_import_destroy(kvc_import_t *imp);
void kvc_pool_share_init(kvc_pool_share_t *share);
void kvc_share_chunk_init(kvc_share_chunk_t *chunk);
kvc_status_t kvc_cache_describe_pool_share(const kvc_cache_t *cache, uint32_t rank, uint32_t pool, kvc_pool_share_t *out);
kvc_status_t kvc_cache_export_pool_chunk(const kvc_cache_t *cache, uint32_t rank, uint32_t pool, uint64_t chunk, kvc_share_chunk_t *out);
"""

# Transparent structs, members in header order.
STRUCTS = {
    "kvc_cache_desc_t": """uint32_t struct_size; kvc_device_kind_t device_kind;
        int32_t device_ordinal; kvc_dtype_t dtype; kvc_layout_t layout; uint32_t num_layers;
        uint32_t num_groups; uint32_t num_pools; uint32_t tokens_per_block; uint32_t kv_factor;
        uint64_t num_blocks; uint64_t token_capacity; uint64_t primary_bytes;
        uint64_t host_cache_bytes; uint64_t device_free_bytes; uint64_t device_total_bytes;
        uint32_t num_resources; uint32_t num_state_slots; uint64_t state_bytes;
        uint32_t num_ranks; uint32_t max_head_replication; uint32_t num_kv_resources;""",
    "kvc_kv_resource_t": """uint32_t struct_size; const uint32_t *layers; uint32_t num_layers;
        uint32_t kv_heads; uint32_t head_dim; kvc_dtype_t dtype; uint32_t kv_factor;
        kvc_layout_t layout; uint32_t window;""",
    "kvc_kv_resource_desc_t": """uint32_t struct_size; uint32_t managed;
        kvc_resource_reason_t reason; const char *reason_text; uint32_t managed_with;
        uint32_t num_layers; uint32_t kv_heads; uint32_t head_dim; kvc_dtype_t dtype;
        uint32_t kv_factor; kvc_layout_t layout; uint32_t window; uint32_t group; uint32_t pool;
        uint64_t block_bytes;""",
    "kvc_resource_desc_t": """uint32_t struct_size; kvc_resource_kind_t kind; uint32_t managed;
        kvc_resource_reason_t reason; const char *reason_text; kvc_dtype_t dtype;
        uint32_t num_heads; uint32_t head_dim; uint32_t d_state; uint32_t conv_dim;
        uint32_t d_conv; uint32_t n_groups; uint32_t num_slots; uint32_t slots_used;
        uint64_t bytes_per_token; uint64_t max_tokens; uint64_t alignment; uint64_t slot_bytes;
        uint64_t slot_stride; uint64_t stride0; uint64_t stride1; uint64_t stride2;
        void *base;""",
    "kvc_snapshot_stats_t": """uint32_t struct_size; uint32_t num_slots; uint32_t slots_used;
        uint32_t reserved; uint64_t bytes_per_snapshot; uint64_t bytes; uint64_t published;
        uint64_t hits; uint64_t hit_tokens; uint64_t restores; uint64_t evicted;
        uint64_t dropped; uint32_t host_num_slots; uint32_t host_slots_used;
        uint64_t host_bytes; uint64_t offloaded; uint64_t onboarded; uint64_t host_evicted;""",
    "kvc_group_desc_t": """uint32_t struct_size; uint32_t window; uint32_t kv_heads;
        uint32_t head_dim; uint32_t num_layers; uint32_t pool; uint64_t block_bytes;
        uint64_t bytes_per_token; uint32_t kv_heads_per_rank; uint32_t head_replication;
        kvc_dtype_t dtype; uint32_t kv_factor; kvc_layout_t layout;""",
    "kvc_pool_desc_t": """uint32_t struct_size; uint32_t num_groups; uint64_t block_bytes;
        uint64_t num_blocks; uint64_t bytes; void *base;""",
    "kvc_layer_view_t": """uint32_t struct_size; uint32_t group; uint32_t pool;
        kvc_dtype_t dtype; kvc_layout_t layout; uint32_t kv_heads; uint32_t head_dim;
        uint32_t tokens_per_block; uint32_t kv_factor; uint32_t elem_size; void *base;
        uint64_t num_blocks; uint64_t block_stride; uint64_t kv_stride; uint64_t token_stride;
        uint64_t head_stride; uint32_t rank; uint32_t first_kv_head; uint32_t total_kv_heads;""",
    "kvc_resize_inputs_t": """uint32_t struct_size; uint32_t reserved;
        double free_gpu_memory_fraction; uint64_t free_bytes; uint64_t non_paged_bytes;
        uint64_t forward_bytes;""",
    "kvc_resize_plan_t": """uint32_t struct_size; uint32_t num_pools; uint64_t free_bytes;
        uint64_t mem_for_paged; uint64_t primary_bytes; uint64_t max_primary_bytes;
        uint64_t blocks_per_group; uint64_t token_capacity; uint64_t num_blocks;
        uint64_t total_bytes;""",
    "kvc_transfer_desc_t": """uint32_t struct_size; uint32_t num_groups;
        uint32_t tokens_per_block; uint32_t reserved; uint64_t seq_id; uint64_t num_blocks;
        uint64_t first_block; uint64_t num_tokens; uint64_t keys_bytes;""",
    "kvc_pool_share_t": """uint32_t struct_size; int32_t device_ordinal; uint32_t rank;
        uint32_t pool; kvc_share_handle_t handle_type; uint32_t reserved; uint64_t num_chunks;
        uint64_t granularity; uint64_t reserved_bytes; uint64_t mapped_bytes;""",
    "kvc_share_chunk_t": """uint32_t struct_size; int32_t fd; uint64_t index; uint64_t offset;
        uint64_t size;""",
    "kvc_extra_key_t": """uint64_t offset; uint64_t length; const void *data; size_t size;""",
    "kvc_retention_range_t": """uint64_t start; uint64_t end; uint32_t priority;
        uint32_t reserved; uint64_t duration_ms;""",
    "kvc_sequence_options_t": """uint32_t struct_size; uint32_t prompt_priority;
        uint32_t decode_priority; bool has_lora; uint64_t lora_id; const void *salt;
        size_t salt_size; const kvc_extra_key_t *extra_keys; size_t num_extra_keys;
        const kvc_retention_range_t *retention_ranges; size_t num_retention_ranges;
        uint64_t decode_duration_ms;""",
    "kvc_sequence_desc_t": """uint32_t struct_size; uint32_t prompt_priority;
        uint32_t decode_priority; uint32_t reserved; uint64_t num_tokens; uint64_t prompt_tokens;
        uint64_t cached_tokens; uint64_t committed_tokens; uint64_t num_blocks;""",
    "kvc_cache_stats_t": """uint32_t struct_size; uint32_t reserved; uint64_t num_blocks;
        uint64_t free_blocks; uint64_t cached_blocks; uint64_t in_use_blocks;
        uint64_t reused_blocks; uint64_t missed_blocks; double hit_rate; uint64_t evicted_blocks;
        uint64_t num_sequences; uint64_t num_pinned; uint64_t tree_nodes;
        uint64_t offloaded_blocks; uint64_t onboarded_blocks; uint64_t offloaded_bytes;
        uint64_t onboarded_bytes; uint64_t host_blocks; uint64_t host_free_blocks;
        uint64_t host_cached_blocks;""",
    "kvc_group_stats_t": """uint32_t struct_size; uint32_t pool; uint64_t in_use_blocks;
        uint64_t cached_blocks; uint64_t pool_free_blocks; uint64_t reused_blocks;
        uint64_t missed_blocks; uint64_t evicted_blocks; uint64_t released_blocks;""",
    "kvc_tier_stats_t": """uint32_t struct_size; uint32_t tier; uint64_t blocks; uint64_t bytes;
        uint64_t capacity_bytes; uint64_t hits; uint64_t misses; uint64_t rejected;
        uint64_t onboarded_blocks; uint64_t onboarded_bytes; uint64_t offered_blocks;
        uint64_t stored_blocks; uint64_t dropped_blocks; uint64_t errors; uint64_t evicted_blocks;
        uint64_t queued_blocks; uint64_t load_count; uint64_t load_p50_us; uint64_t load_p99_us;
        uint64_t load_max_us; uint64_t write_count; uint64_t write_p50_us; uint64_t write_p99_us;
        uint64_t write_max_us;""",
    "kvc_store_args_t": """uint32_t struct_size; uint32_t layer; uint32_t num_tokens;
        kvc_dtype_t src_dtype; const void *key; const void *value; const int64_t *slot_mapping;
        float k_scale; float v_scale; uint32_t rank;""",
    "kvc_store_strides_t": """uint32_t struct_size; uint32_t seq_len; int64_t key_seq_stride;
        int64_t key_token_stride; int64_t key_head_stride; int64_t value_seq_stride;
        int64_t value_token_stride; int64_t value_head_stride;""",
    "kvc_decode_args_t": """uint32_t struct_size; uint32_t layer; uint32_t batch;
        uint32_t q_heads; kvc_dtype_t q_dtype; kvc_table_format_t table_format;
        const void *query; void *out; const int32_t *seq_lens; const int32_t *block_table;
        const int32_t *indptr; uint32_t table_stride; uint32_t max_seq_len; uint32_t window;
        float softmax_scale; float k_scale; float v_scale; void *workspace;
        uint64_t workspace_bytes; uint32_t rank;""",
    "kvc_prefill_args_t": """uint32_t struct_size; uint32_t layer; uint32_t batch;
        uint32_t total_q; uint32_t q_heads; kvc_dtype_t q_dtype; kvc_table_format_t table_format;
        const void *query; void *out; float *lse; const int32_t *qo_indptr;
        const int32_t *kv_lens; const int32_t *block_table; const int32_t *indptr;
        uint32_t table_stride; uint32_t max_kv_len; uint32_t window; float softmax_scale;
        float logits_soft_cap; float k_scale; float v_scale; void *workspace;
        uint64_t workspace_bytes; uint32_t rank;""",
    "kvc_stateful_options_t": """uint32_t struct_size; uint32_t batch; kvc_layout_t layout;
        uint32_t growth_step; kvc_growth_policy_t growth_policy; uint32_t max_length;
        uint32_t initial_length;""",
    "kvc_stateful_view_t": """uint32_t struct_size; uint32_t layer; void *key; void *value;
        uint64_t row_stride; uint64_t head_stride; uint64_t token_stride; uint32_t batch;
        uint32_t capacity; uint32_t kv_heads; uint32_t head_dim; kvc_dtype_t dtype;
        kvc_layout_t layout; uint32_t max_length; uint32_t beam_table_stride;
        const int32_t *lengths; const int32_t *beam_table;""",
    "kvc_stateful_append_args_t": """uint32_t struct_size; uint32_t layer; uint32_t num_tokens;
        kvc_dtype_t src_dtype; const void *key; const void *value; const uint32_t *row_tokens;
        float k_scale; float v_scale;""",
    "kvc_stateful_decode_args_t": """uint32_t struct_size; uint32_t layer; uint32_t q_heads;
        kvc_dtype_t q_dtype; const void *query; void *out; uint32_t max_seq_len;
        float softmax_scale; float k_scale; float v_scale; void *workspace;
        uint64_t workspace_bytes;""",
    "kvc_stateful_stats_t": """uint32_t struct_size; uint32_t num_layers; uint64_t bytes_allocated;
        uint64_t peak_bytes; uint64_t kv_bytes; uint64_t table_bytes; uint64_t reallocations;
        uint64_t reorders; uint64_t table_entries_copied; uint64_t compactions;""",
    "kvc_stateful_layer_stats_t": """uint32_t struct_size; uint32_t layer; uint32_t capacity;
        uint32_t growth_offset; uint64_t bytes; uint64_t reallocations;
        uint32_t last_growth_length; uint32_t max_length;""",
    "kvc_event_t": """uint64_t id; uint32_t kind; uint32_t tier; uint64_t hash;
        uint64_t parent_hash; uint64_t groups; uint64_t lora_id; uint32_t has_lora;
        uint32_t priority; uint32_t num_tokens; uint32_t reserved; uint64_t token_offset;
        uint64_t lost_count;""",
    "kvc_event_drain_t": """uint32_t struct_size; uint32_t reserved; uint64_t events;
        uint64_t tokens; uint64_t events_pending; uint64_t tokens_pending; uint64_t last_id;""",
    "kvc_snapshot_entry_t": """uint64_t hash; uint64_t parent_hash; uint64_t groups;
        uint64_t lora_id; uint32_t has_lora; uint32_t tier; uint32_t priority;
        uint32_t num_tokens;""",
}

_SCALARS = {
    "void": None,
    "bool": ctypes.c_bool,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "kvc_status_t": ctypes.c_int32,
    "kvc_dtype_t": ctypes.c_uint32,
    "kvc_layout_t": ctypes.c_uint32,
    "kvc_device_kind_t": ctypes.c_uint32,
    "kvc_table_format_t": ctypes.c_uint32,
    "kvc_tier_t": ctypes.c_uint32,
    "kvc_share_handle_t": ctypes.c_uint32,
    "kvc_growth_policy_t": ctypes.c_uint32,
    "kvc_resource_kind_t": ctypes.c_uint32,
    "kvc_resource_reason_t": ctypes.c_uint32,
}


def ctype_of(ctype, result=False):
    """The ctypes type of a C type: pointers are c_void_p, except a
    `const char *` result (bytes)."""
    ctype = ctype.strip()
    if "*" in ctype:
        if result and re.sub(r"\s+", "", ctype) == "constchar*":
            return ctypes.c_char_p
        return ctypes.c_void_p
    return _SCALARS[ctype.replace("const ", "").strip()]


def _split_decl(decl):
    """'const int32_t *tokens' -> ('const int32_t *', 'tokens')."""
    m = re.match(r"^\s*(.*?[\s\*])(\w+)\s*$", decl)
    return m.group(1).strip(), m.group(2)


def parse_prototypes(text=PROTOTYPES):
    """[(name, result type, [(param type, param name)])] of PROTOTYPES."""
    out = []
    for line in text.strip().splitlines():
        line = line.strip()
        if not line:
            continue
        m = re.match(r"^(.*?[\s\*])(kvc_\w+)\((.*)\);$", line)
        params = [] if m.group(3).strip() == "void" else [_split_decl(p) for p in m.group(3).split(",")]
        out.append((m.group(2), m.group(1).strip(), params))
    return out


def _make_struct(name, members):
    fields = []
    for decl in members.split(";"):
        if decl.strip():
            ctype, member = _split_decl(decl)
            fields.append((member, ctype_of(ctype)))
    return type(name, (ctypes.Structure,), {"_fields_": fields})


_STRUCT_TYPES = {name: _make_struct(name, members) for name, members in STRUCTS.items()}


def struct(name):
    """The ctypes.Structure class of C struct `name` ('kvc_store_args_t')."""
    return _STRUCT_TYPES[name]


# --------------------------------------------------------------------------
# Loading the library
# --------------------------------------------------------------------------

def _candidates():
    """Where libkvcache may be, in the order tried."""
    env = os.environ.get("KVCACHE_LIBRARY")
    if env:
        return [os.path.abspath(env) if os.sep in env else env]
    found = []
    # A build tree of the checkout this package sits in (bindings/python/).
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    for sub in ("build", os.path.join("build", "release"), os.path.join("build", "debug")):
        path = os.path.join(root, sub, "libkvcache.so.0")
        if os.path.exists(path):
            found.append(path)
    system = ctypes.util.find_library("kvcache")
    if system:
        found.append(system)
    found.append("libkvcache.so.0")  # LD_LIBRARY_PATH, the loader's paths
    return found


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("kvcache: cannot load libkvcache; set KVCACHE_LIBRARY to its path "
                      "(e.g. build/libkvcache.so.0). Tried:\n  " + "\n  ".join(errors))


class _Library:
    """The C functions as attributes (lib.kvc_version()), with their ctypes
    argument and result types set. A function the loaded library lacks (an
    older libkvcache) raises KvCacheError(KVC_ERR_UNSUPPORTED) when called."""

    def __init__(self, cdll, path):
        self._cdll = cdll
        self.path = path
        for name, result, params in parse_prototypes():
            try:
                fn = getattr(cdll, name)
            except AttributeError:
                setattr(self, name, _missing(name))
                continue
            fn.restype = ctype_of(result, result=True)
            fn.argtypes = [ctype_of(t) for t, _ in params]
            setattr(self, name, fn)


def _missing(name):
    def call(*args):
        from .errors import KvCacheError
        raise KvCacheError(-6, "%s is not exported by the loaded libkvcache (%s); it needs a "
                           "newer kvcache" % (name, library_path), name)
    call.__name__ = name
    return call


lib = _Library(*_load())
library_path = lib.path

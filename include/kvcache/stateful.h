/**
 * @file stateful.h
 * @brief The stateful contiguous mode (OpenVINO's stateful KV cache): per
 *        layer one contiguous K/V buffer for a fixed batch of rows, in-place
 *        append, staggered growth, and beam search through a beam table.
 *
 * A `kvc_stateful_t` is its own handle, beside the paged cache (kvc_cache_t):
 * no blocks, no prefix reuse, no eviction. It suits one request or a fixed
 * batch: on-device chat, beam search, embedded use.
 *
 * **Geometry.** It is created from a kvc_config_t, of which it reads only
 * the model spec and the device: num_layers, kv_heads (per layer),
 * head_dim, dtype (f32, f16, bf16, fp8-e4m3), kv_factor and the device.
 * The paged settings (layout, tokens_per_block, memory bounds, host cache,
 * reuse, events) do not apply and are not read; a config with an attention
 * window fails (KVC_ERR_UNSUPPORTED: the mode keeps the whole history). The
 * rest comes from kvc_stateful_options_t: the batch B, the layout, the
 * growth step and policy, a maximum length.
 *
 * Layer l holds K and V of B rows in one buffer of `capacity` tokens per
 * row: `[kv][B][heads][capacity][head_dim]` (HND, the default, as OpenVINO)
 * or `[kv][B][capacity][heads][head_dim]` (NHD). kvc_stateful_layer_view()
 * gives the pointers and byte strides for the caller's own kernels. Each
 * (layer, row) has its own length; rows may differ (a batch of requests),
 * layers differ only inside a step (layer l appended, l + 1 not yet).
 *
 * **Append.** kvc_stateful_append() writes the new tokens' K/V of one layer
 * in place at each row's length (one copy of the new tokens; the past stays
 * where it is). When a row would pass the layer's capacity, the layer grows
 * first: a new buffer, the past copied once, the old one freed.
 *
 * **Growth policy (staggered preallocation).** With growth step S (default
 * 128 tokens) and L layers, layer l's capacity is always one of
 * `o_l + k * S` (k >= 1), with offset `o_l = floor(l * S / L)` under
 * KVC_GROWTH_STAGGERED (the default) and 0 under KVC_GROWTH_UNIFORM; a
 * maximum length caps it. A growth takes the smallest such capacity that
 * holds the append. So in a decode loop (one token per row and step) layer
 * l grows exactly when its length passes `o_l + k * S`: the layers' offsets
 * are distinct when L <= S, so no two layers grow on the same step. A
 * growth frees the old buffer in the same call, so the live bytes peak at
 * the steady size plus one layer's new buffer. On CUDA the free is
 * stream-ordered (the copy of the past is still in flight): every buffer
 * is a mapping of its own (the driver's virtual memory API, 2 MiB
 * granularity on H100), unmapped once the work enqueued before its free
 * has completed (checked at every append), so the device memory in use is
 * the live buffers, each rounded up to the granularity, plus the buffers
 * replaced by work still in flight: about one under the staggered policy,
 * up to one per layer under the uniform one. The last replaced buffer is
 * kept for the next growth of its rounded size (under the staggered
 * policy most growths take it without calling the driver). A driver
 * without that API gets a stream-ordered pool, which may hold more (a
 * chunk shared by several buffers stays reserved until all are free). A
 * step also pays one past-copy instead of L. The steady size exceeds the
 * live tokens by at most S tokens per layer (S / 2 on average). With
 * L > S, at most ceil(L / S) layers share an offset. A multi-token append
 * (a prompt) may grow every layer in that step.
 *
 * **Beam search.** Rows are beams. kvc_stateful_reorder(beam_idx) makes
 * row b continue the history of row beam_idx[b] without moving any K/V: a
 * beam table `[B][table_capacity]` of int32 says, for each row and
 * position, which row's buffer holds that position's K/V. The table is
 * created at the first reorder that is not the identity (until then every
 * row reads its own history and there is no table). A reorder copies only
 * the table entries that change: the library tracks, for every pair of
 * rows, the length of the prefix their table rows share, and row b copies
 * from row beam_idx[b] only past that prefix, so the device work is
 * O(B x positions since the beams diverged) int32 moves (O(B x length) at
 * worst), plus O(B^2) host bookkeeping. kvc_stateful_decode() reads K/V
 * through the table (indirect attention). On CUDA, rows whose table rows
 * agree over a stretch of positions (beams that share their history, up
 * to 16 rows) have that stretch's K/V read once for all of them; a row's
 * result does not depend on which rows it was read with (decoding after
 * kvc_stateful_compact() gives the same bits). kvc_stateful_compact()
 * gathers the K/V by the table into plain per-row histories and drops the
 * table.
 *
 * Writing a row never corrupts another row's history: an append, or an
 * import, into row x at a position that another row still reads through
 * the table fails with KVC_ERR_INVALID_STATE (compact first). In beam
 * search all rows append at the same length and this never happens.
 *
 * **Devices and streams.** On a CUDA device the buffers, lengths and table
 * are device memory, K/V inputs and decode queries/outputs are device
 * pointers, and work is enqueued on the caller's stream (growth allocates
 * and frees stream-ordered on it). Host arrays (row_tokens, beam_idx) are
 * read in the call. On a CPU device everything is host memory and runs in
 * the call. A view (pointers, strides) stays valid until the next call
 * that may reallocate that layer: append, import, compact, reset.
 *
 * **Failure.** Every call checks its arguments first and, when it fails,
 * changes nothing: lengths, tables, buffers and statistics are as before,
 * also when a growth allocation fails (KVC_ERR_OUT_OF_MEMORY).
 *
 * Threading: as a kvc_cache_t, calls on one handle are serialized inside.
 */
#ifndef KVCACHE_STATEFUL_H
#define KVCACHE_STATEFUL_H

#include "kvcache/common.h"
#include "kvcache/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A stateful contiguous KV cache. Opaque. */
typedef struct kvc_stateful kvc_stateful_t;

/** Growth policy of kvc_stateful_options_t (values of enum kvc_growth_policy). */
typedef uint32_t kvc_growth_policy_t;
/** Growth policies; see the file comment. */
enum kvc_growth_policy {
  /** Per-layer offsets: no two layers grow on the same decode step (default). */
  KVC_GROWTH_STAGGERED = 1,
  /** Every layer on the same grid: they all grow on the same step. */
  KVC_GROWTH_UNIFORM = 2
};

/** Upper bound of kvc_stateful_options_t::batch. */
#define KVC_STATEFUL_MAX_BATCH 1024u
/** Upper bound of any row length (and of max_length). */
#define KVC_STATEFUL_MAX_LENGTH (1u << 30)
/** `row` value of kvc_stateful_trim() meaning every row. */
#define KVC_STATEFUL_ALL_ROWS 0xffffffffu

/* ===================================================================== */
/* Lifetime                                                              */
/* ===================================================================== */

/**
 * @brief Settings of a stateful cache beside the config's model spec.
 *        Transparent; begins with struct_size. A zero field takes its
 *        default.
 * @since 0.3.0
 */
typedef struct kvc_stateful_options {
  uint32_t struct_size;       /**< sizeof(kvc_stateful_options_t) of the caller. */
  uint32_t batch;             /**< Rows B, 1..KVC_STATEFUL_MAX_BATCH (no default). */
  kvc_layout_t layout;        /**< KVC_LAYOUT_HND (0 = default) or KVC_LAYOUT_NHD. */
  uint32_t growth_step;       /**< S in tokens, 1..65536; 0 = 128. */
  kvc_growth_policy_t growth_policy; /**< 0 = KVC_GROWTH_STAGGERED. */
  uint32_t max_length;        /**< Longest row allowed; 0 = KVC_STATEFUL_MAX_LENGTH. */
  uint32_t initial_length;    /**< Tokens per row preallocated at creation (on the
                                   policy's grid); 0 = nothing until the first append. */
} kvc_stateful_options_t;

/** Static initializer for kvc_stateful_options_t (every default, batch 0). */
#define KVC_STATEFUL_OPTIONS_INIT {sizeof(kvc_stateful_options_t), 0, 0, 0, 0, 0, 0}

/** @brief Sets `options` to KVC_STATEFUL_OPTIONS_INIT. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_stateful_options_init(kvc_stateful_options_t *options);

/**
 * @brief Creates a stateful cache for the model of `config` on its device.
 * @param config Borrowed for the call; later changes do not affect the cache.
 * @param options Borrowed for the call.
 * @param[out] out Receives the handle, owned by the caller (free with
 *        kvc_stateful_destroy()); untouched on failure.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL, config not valid, batch
 *         0 or too large, layout, growth step or policy out of range,
 *         max_length too large, initial_length above max_length);
 *         KVC_ERR_UNSUPPORTED (attention windows); KVC_ERR_DEVICE (no such
 *         device, or a GPU this build has no code for, as kvc_cache_create);
 *         KVC_ERR_OUT_OF_MEMORY (initial_length does not fit).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_create(const kvc_config_t *config,
                                         const kvc_stateful_options_t *options,
                                         kvc_stateful_t **out);

/** @brief Frees the cache and its device memory. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_stateful_destroy(kvc_stateful_t *cache);

/* ===================================================================== */
/* Views                                                                 */
/* ===================================================================== */

/**
 * @brief Where one layer's K/V are, for the caller's kernels. Transparent.
 *
 * Element (row r, head h, position t, dim d) of K is at
 * `key + r*row_stride + h*head_stride + t*token_stride + d*elem_size`
 * bytes, V the same from `value`. Positions [0, lengths[r]) of a row are
 * its tokens; with a beam table, position t of row r is read from row
 * `beam_table[r * beam_table_stride + t]` instead of r.
 * @since 0.3.0
 */
typedef struct kvc_stateful_view {
  uint32_t struct_size;       /**< sizeof(kvc_stateful_view_t) of the caller. */
  uint32_t layer;             /**< The layer described. */
  void *key;                  /**< K of row 0 (device memory on CUDA). */
  void *value;                /**< V of row 0; equals key when kv_factor is 1. */
  uint64_t row_stride;        /**< Bytes between rows. */
  uint64_t head_stride;       /**< Bytes between heads. */
  uint64_t token_stride;      /**< Bytes between positions. */
  uint32_t batch;             /**< Rows B. */
  uint32_t capacity;          /**< Positions allocated per row (0: none yet). */
  uint32_t kv_heads;          /**< Heads of this layer. */
  uint32_t head_dim;          /**< Elements per head. */
  kvc_dtype_t dtype;          /**< Element type. */
  kvc_layout_t layout;        /**< KVC_LAYOUT_HND or KVC_LAYOUT_NHD. */
  uint32_t max_length;        /**< Longest row of this layer now. */
  uint32_t beam_table_stride; /**< Entries per beam table row; 0 without a table. */
  const int32_t *lengths;     /**< [batch] int32 lengths (device memory on CUDA). */
  const int32_t *beam_table;  /**< [batch][beam_table_stride] source rows, or NULL
                                   when every row reads its own history. */
} kvc_stateful_view_t;

/** @brief Zeroes `view` and sets its struct_size. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_stateful_view_init(kvc_stateful_view_t *view);

/**
 * @brief Describes layer `layer`. Reads only.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL, layer >= num_layers,
 *         struct_size unset).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_layer_view(const kvc_stateful_t *cache, uint32_t layer,
                                             kvc_stateful_view_t *view);

/**
 * @brief Copies the lengths of layer `layer`'s rows into `lengths` (host).
 * @param lengths Caller array of `count` >= batch entries.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL, layer out of range);
 *         KVC_ERR_BUFFER_TOO_SMALL (count < batch). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_get_lengths(const kvc_stateful_t *cache, uint32_t layer,
                                              uint32_t *lengths, uint32_t count);

/* ===================================================================== */
/* Append                                                                */
/* ===================================================================== */

/**
 * @brief What kvc_stateful_append() writes. Transparent; begins with
 *        struct_size.
 *
 * `key` and `value` hold `num_tokens` positions for every row, in the
 * cache's layout: `[batch][num_tokens][heads][head_dim]` (NHD) or
 * `[batch][heads][num_tokens][head_dim]` (HND), contiguous, of `src_dtype`.
 * Row r appends its first `row_tokens[r]` positions (all num_tokens when
 * row_tokens is NULL; 0 appends nothing to that row). `src_dtype` must equal
 * the cache dtype, except that an fp8-e4m3 cache also takes f32, f16 or
 * bf16, stored as `x / k_scale` and `x / v_scale` (as kvc_store_kv()).
 * @since 0.3.0
 */
typedef struct kvc_stateful_append_args {
  uint32_t struct_size;      /**< sizeof(kvc_stateful_append_args_t) of the caller. */
  uint32_t layer;            /**< Layer, < num_layers. */
  uint32_t num_tokens;       /**< Positions per row in key/value; 0 is a no-op. */
  kvc_dtype_t src_dtype;     /**< Element type of key and value. */
  const void *key;           /**< See above; borrowed (device memory on CUDA). */
  const void *value;         /**< Same shape; NULL iff kv_factor is 1. */
  const uint32_t *row_tokens; /**< Host [batch] tokens per row (<= num_tokens), or NULL. */
  float k_scale;             /**< fp8 quantization scale of K (> 0); default 1. */
  float v_scale;             /**< fp8 quantization scale of V (> 0); default 1. */
} kvc_stateful_append_args_t;

/** Static initializer for kvc_stateful_append_args_t (scales 1). */
#define KVC_STATEFUL_APPEND_ARGS_INIT \
  {sizeof(kvc_stateful_append_args_t), 0, 0, 0, NULL, NULL, NULL, 1.0f, 1.0f}

/** @brief Sets `args` to KVC_STATEFUL_APPEND_ARGS_INIT. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_stateful_append_args_init(kvc_stateful_append_args_t *args);

/**
 * @brief Appends the K/V of new tokens of one layer in place, growing the
 *        layer first when a row would pass its capacity.
 * @param stream cudaStream_t on a CUDA cache; ignored on a CPU cache.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL, layer out of range,
 *         src_dtype, value given or missing against kv_factor, a scale not
 *         finite and > 0, num_tokens above max_length (even when no row
 *         takes that many), row_tokens[r] > num_tokens, a row passing
 *         max_length); KVC_ERR_INVALID_STATE (a row would overwrite
 *         positions another row reads through the beam table);
 *         KVC_ERR_OUT_OF_MEMORY (the growth allocation failed: nothing
 *         changed); KVC_ERR_DEVICE.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_append(kvc_stateful_t *cache,
                                         const kvc_stateful_append_args_t *args,
                                         void *stream);

/* ===================================================================== */
/* Beam search                                                           */
/* ===================================================================== */

/**
 * @brief Row b continues the history of row `beam_idx[b]` (OpenVINO's
 *        beam_idx), without moving K/V: only beam table entries change.
 *
 * Every layer must hold the same length per row (call it between steps).
 * The identity permutation does nothing. Several rows may take the same
 * source; a row that no one takes is dropped.
 * @param beam_idx Host array of `count` entries, borrowed for the call.
 * @param count Must equal batch.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL, count != batch, an
 *         entry outside [0, batch)); KVC_ERR_INVALID_STATE (layers of
 *         different lengths); KVC_ERR_OUT_OF_MEMORY (creating the table).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_reorder(kvc_stateful_t *cache, const int32_t *beam_idx,
                                          uint32_t count, void *stream);

/**
 * @brief Gathers every layer's K/V by the beam table so that each row's
 *        buffer holds its own history, then drops the table.
 *
 * Uses a scratch buffer of the largest layer's size, freed before return
 * (stream-ordered on CUDA). Without a table it does nothing.
 * @return KVC_OK; KVC_ERR_INVALID_STATE (layers of different lengths);
 *         KVC_ERR_OUT_OF_MEMORY (the scratch buffer; nothing changed);
 *         KVC_ERR_DEVICE.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_compact(kvc_stateful_t *cache, void *stream);

/* ===================================================================== */
/* Trim, reset, export, import                                           */
/* ===================================================================== */

/**
 * @brief Drops the last `num_tokens` tokens of row `row` (or of every row
 *        with KVC_STATEFUL_ALL_ROWS) in every layer (speculative decoding,
 *        chat edits). Capacity is kept.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (row out of range, num_tokens
 *         above a row's length); KVC_ERR_INVALID_STATE (layers of
 *         different lengths).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_trim(kvc_stateful_t *cache, uint32_t row,
                                       uint32_t num_tokens, void *stream);

/**
 * @brief Empties every row of every layer and drops the beam table. With
 *        `release_memory` the layers' buffers are freed too (capacity 0),
 *        else they are kept for the next conversation.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL); KVC_ERR_DEVICE.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_reset(kvc_stateful_t *cache, bool release_memory,
                                        void *stream);

/**
 * @brief Saves row `row`'s state (every layer's K/V of its length, read
 *        through the beam table) into a caller host buffer.
 *
 * The bytes are a header (magic, version, geometry, length) followed by
 * each layer's K then V in the cache's layout with capacity = length; only
 * kvc_stateful_import_row() of a cache of the same geometry reads them.
 * The call waits for the copy: the buffer is filled on return.
 * @param buffer Host memory of `capacity` bytes; may be NULL when capacity
 *        is 0 (to learn the size).
 * @param[out] size Receives the bytes the state takes (also on
 *        KVC_ERR_BUFFER_TOO_SMALL).
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL size, row out of range);
 *         KVC_ERR_BUFFER_TOO_SMALL; KVC_ERR_INVALID_STATE (layers of
 *         different lengths); KVC_ERR_OUT_OF_MEMORY (CUDA staging);
 *         KVC_ERR_DEVICE.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_export_row(kvc_stateful_t *cache, uint32_t row,
                                             void *buffer, uint64_t capacity, uint64_t *size,
                                             void *stream);

/**
 * @brief Restores a state saved by kvc_stateful_export_row() into row
 *        `row`, replacing its history in every layer (growing layers as
 *        needed). The row then reads its own buffer.
 * @param buffer Host memory of `size` bytes, borrowed for the call.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL, row out of range, not a
 *         state, a size or geometry (layers, heads, head_dim, dtype,
 *         layout, kv_factor) that differs from this cache's, a length past
 *         max_length); KVC_ERR_INVALID_STATE (another row reads this row's
 *         buffer through the beam table; compact first);
 *         KVC_ERR_OUT_OF_MEMORY (a growth; nothing changed); KVC_ERR_DEVICE.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_import_row(kvc_stateful_t *cache, uint32_t row,
                                             const void *buffer, uint64_t size, void *stream);

/* ===================================================================== */
/* Indirect decode attention                                             */
/* ===================================================================== */

/**
 * @brief What kvc_stateful_decode() computes. Transparent; begins with
 *        struct_size.
 *
 * For every row b and query head h (kv head h / (q_heads / kv_heads)):
 * `out[b][h] = sum_t softmax_t(softmax_scale * q[b][h] . K[t]) V[t]` over
 * the row's positions t < length, K/V of position t read from the row the
 * beam table names. Query and out of q_dtype (the cache dtype; f16 or bf16
 * for fp8-e4m3, whose K/V are read as x * k_scale, x * v_scale), head dims
 * 64/128/256, GQA/MQA, f32 on the CPU only; on CUDA the query is 16-byte
 * aligned. The CPU computes as kvc_decode_attention() does; CUDA runs a
 * tensor-core kernel of its own (the softmax weights rounded to q_dtype
 * before they multiply V, as in kvc_prefill_attention()), within the
 * decode tests' tolerance of the CPU.
 * @since 0.3.0
 */
typedef struct kvc_stateful_decode_args {
  uint32_t struct_size;   /**< sizeof(kvc_stateful_decode_args_t) of the caller. */
  uint32_t layer;         /**< Layer, < num_layers. */
  uint32_t q_heads;       /**< Query heads, a multiple of the layer's kv_heads. */
  kvc_dtype_t q_dtype;    /**< Element type of query and out. */
  const void *query;      /**< [batch][q_heads][head_dim]; borrowed. */
  void *out;              /**< [batch][q_heads][head_dim]; written. */
  uint32_t max_seq_len;   /**< Workspace sizing only: the longest length to plan
                               for; 0 = the layer's longest row now. */
  float softmax_scale;    /**< 0 = 1 / sqrt(head_dim). */
  float k_scale;          /**< fp8 dequantization scale of K; default 1. */
  float v_scale;          /**< fp8 dequantization scale of V; default 1. */
  void *workspace;        /**< Scratch (device memory on CUDA); see
                               kvc_stateful_decode_workspace_size(). */
  uint64_t workspace_bytes; /**< Bytes at workspace. */
} kvc_stateful_decode_args_t;

/** Static initializer for kvc_stateful_decode_args_t (scales 1). */
#define KVC_STATEFUL_DECODE_ARGS_INIT \
  {sizeof(kvc_stateful_decode_args_t), 0, 0, 0, NULL, NULL, 0, 0.0f, 1.0f, 1.0f, NULL, 0}

/** @brief Sets `args` to KVC_STATEFUL_DECODE_ARGS_INIT. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_stateful_decode_args_init(kvc_stateful_decode_args_t *args);

/**
 * @brief Workspace bytes kvc_stateful_decode() needs for `args` (its layer,
 *        q_heads, q_dtype and max_seq_len); never decreases as max_seq_len
 *        grows. 0 on a CPU cache. Reads only.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT; KVC_ERR_UNSUPPORTED (as decode).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_decode_workspace_size(const kvc_stateful_t *cache,
                                                        const kvc_stateful_decode_args_t *args,
                                                        uint64_t *bytes);

/**
 * @brief Decode attention of one layer for every row, through the beam
 *        table (indirect SDPA): one query token per row.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL, layer, q_heads, q_dtype,
 *         scales); KVC_ERR_UNSUPPORTED (head_dim, f32 on CUDA);
 *         KVC_ERR_BUFFER_TOO_SMALL (workspace); KVC_ERR_DEVICE.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_decode(kvc_stateful_t *cache,
                                         const kvc_stateful_decode_args_t *args, void *stream);

/**
 * @brief Reports the first error of work enqueued by this cache (as
 *        kvc_cache_get_async_error()); waits for `stream`.
 * @return KVC_OK if the check ran; KVC_ERR_INVALID_ARGUMENT (NULL).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_get_async_error(kvc_stateful_t *cache, void *stream,
                                                  kvc_status_t *async_error);

/* ===================================================================== */
/* Statistics                                                            */
/* ===================================================================== */

/** @brief Whole-cache statistics. Transparent; begins with struct_size. @since 0.3.0 */
typedef struct kvc_stateful_stats {
  uint32_t struct_size;        /**< sizeof(kvc_stateful_stats_t) of the caller. */
  uint32_t num_layers;         /**< Layers. */
  uint64_t bytes_allocated;    /**< Device bytes held now (K/V, table, lengths). */
  uint64_t peak_bytes;         /**< Most bytes held at once since creation,
                                    growth and compaction scratch included. */
  uint64_t kv_bytes;           /**< Of bytes_allocated: the layers' buffers. */
  uint64_t table_bytes;        /**< Of bytes_allocated: the beam table. */
  uint64_t reallocations;      /**< Layer growths since creation (all layers;
                                    a first allocation is not one). */
  uint64_t reorders;           /**< kvc_stateful_reorder() calls that changed rows. */
  uint64_t table_entries_copied; /**< Beam table entries those reorders moved. */
  uint64_t compactions;        /**< kvc_stateful_compact() calls that gathered. */
} kvc_stateful_stats_t;

/** @brief Zeroes `stats` and sets its struct_size. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_stateful_stats_init(kvc_stateful_stats_t *stats);

/** @brief Fills `stats`. Reads only. @return KVC_OK or KVC_ERR_INVALID_ARGUMENT. @since 0.3.0 */
KVC_API kvc_status_t kvc_stateful_get_stats(const kvc_stateful_t *cache,
                                            kvc_stateful_stats_t *stats);

/** @brief One layer's statistics. Transparent; begins with struct_size. @since 0.3.0 */
typedef struct kvc_stateful_layer_stats {
  uint32_t struct_size;      /**< sizeof(kvc_stateful_layer_stats_t) of the caller. */
  uint32_t layer;            /**< The layer described. */
  uint32_t capacity;         /**< Positions allocated per row. */
  uint32_t growth_offset;    /**< o_l of the growth policy. */
  uint64_t bytes;            /**< Bytes of the layer's buffer. */
  uint64_t reallocations;    /**< Growths of this layer's allocated buffer (the
                                  first allocation is not one). */
  uint32_t last_growth_length; /**< Longest row when the layer last grew. */
  uint32_t max_length;       /**< Longest row now. */
} kvc_stateful_layer_stats_t;

/** @brief Zeroes `stats` and sets its struct_size. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_stateful_layer_stats_init(kvc_stateful_layer_stats_t *stats);

/**
 * @brief Fills `stats` for layer `layer`. Reads only.
 * @return KVC_OK or KVC_ERR_INVALID_ARGUMENT (NULL, layer out of range).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_stateful_get_layer_stats(const kvc_stateful_t *cache, uint32_t layer,
                                                  kvc_stateful_layer_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_STATEFUL_H */

/**
 * @file kernels.h
 * @brief Kernels on a cache's memory: store K/V through a slot mapping,
 *        paged decode and prefill attention, and batched block copies.
 *
 * Every kernel runs on the cache's device. On a CPU cache the pointers are
 * host pointers and the work runs synchronously in the call. On a CUDA cache
 * the data pointers (key, value, slot mapping, queries, outputs, block
 * tables, sequence lengths, workspace) are device pointers and the work is
 * enqueued on `stream` (a `cudaStream_t` cast to `void *`; NULL is the
 * default stream); the call returns once it is enqueued. Small host-side
 * lists (the block ids of kvc_copy_blocks()) are host pointers on both.
 *
 * Every call checks its arguments on the host first and, on failure, enqueues
 * nothing and says which argument is wrong. Values that live in device memory
 * (slots, block ids, sequence lengths) cannot be read on the host without a
 * synchronization; the kernels check them as they run, skip what is out of
 * range, and record the first such error for kvc_cache_get_async_error(),
 * as NCCL's ncclCommGetAsyncError() does. On a CPU cache those values are
 * checked before anything is written, so a failed call changes nothing.
 *
 * Block ids are those of the layer's group, i.e. indices of blocks in the
 * group's pool; a slot is `block_id * tokens_per_block + offset`.
 */
#ifndef KVCACHE_KERNELS_H
#define KVCACHE_KERNELS_H

#include "kvcache/cache.h"
#include "kvcache/common.h"
#include "kvcache/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* Store K/V                                                             */
/* ===================================================================== */

/**
 * @brief What kvc_store_kv() writes. Transparent; begins with struct_size.
 *
 * `key` and `value` are contiguous `[num_tokens][kv_heads][head_dim]` arrays
 * of `src_dtype`, with the layer's kv_heads and head_dim. Token i goes to
 * slot `slot_mapping[i]` (slot = block_id * tokens_per_block + offset);
 * slot -1 skips the token (a prefix-cache hit, or padding).
 *
 * `src_dtype` must equal the cache's dtype (the bytes are copied), except
 * that an fp8-e4m3 cache also takes f32, f16 or bf16 input, stored as
 * `x / k_scale` (keys) and `x / v_scale` (values), rounded to nearest even
 * and saturated to +-448.
 * @since 0.1.0
 */
typedef struct kvc_store_args {
  uint32_t struct_size;  /**< sizeof(kvc_store_args_t) of the caller. */
  uint32_t layer;        /**< Model layer, 0 <= layer < num_layers. */
  uint32_t num_tokens;   /**< Tokens in key/value/slot_mapping; 0 is a no-op. */
  kvc_dtype_t src_dtype; /**< Element type of key and value (KVC_DTYPE_*). */
  const void *key;       /**< [num_tokens][kv_heads][head_dim]; borrowed. */
  const void *value;     /**< Same shape as key; NULL iff kv_factor == 1. */
  const int64_t *slot_mapping; /**< [num_tokens] slots or -1; borrowed. */
  float k_scale;         /**< fp8 quantization scale of K (> 0); default 1. */
  float v_scale;         /**< fp8 quantization scale of V (> 0); default 1. */
  uint32_t rank;         /**< Tensor parallelism: the rank whose pool is written
                              (key and value hold that rank's heads,
                              kvc_cache_layer_view_rank); 0 < num_ranks. A
                              caller's struct without it means rank 0.
                              @since 0.3.0 */
} kvc_store_args_t;

/** Static initializer for kvc_store_args_t (scales 1). */
#define KVC_STORE_ARGS_INIT {sizeof(kvc_store_args_t), 0, 0, 0, NULL, NULL, NULL, 1.0f, 1.0f, 0}

/** @brief Sets `args` to KVC_STORE_ARGS_INIT. NULL is ignored. @since 0.1.0 */
KVC_API void kvc_store_args_init(kvc_store_args_t *args);

/**
 * @brief Writes the K (and V) of `num_tokens` tokens of one layer into their
 *        slots (miniVLLM's store_kvcache).
 *
 * Kernels only read the cache's shape: they may run concurrently with any
 * other call on the cache, and need no lock.
 * @param cache The cache.
 * @param args Borrowed for the call; the arrays it points to must stay
 *        valid until the work completes (CUDA: until `stream` reaches it).
 * @param stream cudaStream_t on a CUDA cache (NULL = default stream);
 *        ignored on a CPU cache.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL pointer, layer out of
 *         range, src_dtype not accepted for the cache dtype, value given
 *         or missing against kv_factor, scale not finite and > 0, and on a
 *         CPU cache a slot outside [-1, num_blocks * tokens_per_block));
 *         KVC_ERR_DEVICE (the launch failed). On a CUDA cache, slots out of
 *         range are skipped and reported by kvc_cache_get_async_error().
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_store_kv(kvc_cache_t *cache,
                                  const kvc_store_args_t *args, void *stream);

/**
 * @brief Where kvc_store_kv_strided() reads each token's K and V: element
 *        strides of the source tensors. Transparent; begins with struct_size.
 *
 * Token i of the call is token `t = i % seq_len` of source sequence
 * `b = i / seq_len`; element d of its head h is read at element
 * `b * key_seq_stride + t * key_token_stride + h * key_head_stride + d`
 * of `key` (and likewise of `value`): the head dimension is contiguous,
 * the other strides are free (any sign, 0 included). Strides count
 * elements of src_dtype, as `torch.Tensor.stride()` and NumPy's strides
 * divided by the item size do.
 *
 * A model's `[batch][kv_heads][n][head_dim]` K (transformers' layout,
 * or any view of it with a contiguous last dimension) with strides
 * `(s0, s1, s2, 1)` is `seq_len = n`, `key_seq_stride = s0`,
 * `key_head_stride = s1`, `key_token_stride = s2`, with
 * `num_tokens = batch * n` and `slot_mapping` in (b, t) order. The
 * contiguous input of kvc_store_kv() is `seq_len = num_tokens`,
 * `token_stride = kv_heads * head_dim`, `head_stride = head_dim`.
 * @since 0.3.0
 */
typedef struct kvc_store_strides {
  uint32_t struct_size;       /**< sizeof(kvc_store_strides_t) of the caller. */
  uint32_t seq_len;           /**< Tokens per source sequence; num_tokens must
                                   be a multiple of it; 0 = num_tokens (one
                                   sequence). */
  int64_t key_seq_stride;     /**< Elements between sequences b and b + 1 of key. */
  int64_t key_token_stride;   /**< Elements between tokens t and t + 1 of key. */
  int64_t key_head_stride;    /**< Elements between heads h and h + 1 of key. */
  int64_t value_seq_stride;   /**< As key_seq_stride, of value (unread if kv_factor 1). */
  int64_t value_token_stride; /**< As key_token_stride, of value. */
  int64_t value_head_stride;  /**< As key_head_stride, of value. */
} kvc_store_strides_t;

/** Static initializer for kvc_store_strides_t (one sequence; the strides
 *  are 0 and must be set). */
#define KVC_STORE_STRIDES_INIT {sizeof(kvc_store_strides_t), 0, 0, 0, 0, 0, 0, 0}

/** @brief Sets `strides` to KVC_STORE_STRIDES_INIT. NULL is ignored.
 *  @since 0.3.0 */
KVC_API void kvc_store_strides_init(kvc_store_strides_t *strides);

/**
 * @brief kvc_store_kv() reading K and V through strides, so a model's
 *        K/V views (`[batch][kv_heads][n][head_dim]`, or a transposed
 *        projection) are stored without a copy into the contiguous layout.
 *
 * Writes the same bytes as kvc_store_kv() would for the contiguous copy
 * of the strided tensors (same conversions, same slot -1 skips), with the
 * same stream, ordering and error rules.
 * @param args What to store; `key` and `value` point at element 0 of
 *        their tensors (sequence 0, token 0, head 0). Borrowed, as for
 *        kvc_store_kv().
 * @param strides How to address them; borrowed for the call.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (as kvc_store_kv(), and NULL
 *         strides, an unset struct_size, num_tokens not a multiple of
 *         seq_len); KVC_ERR_DEVICE (the launch failed).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_store_kv_strided(kvc_cache_t *cache, const kvc_store_args_t *args,
                                          const kvc_store_strides_t *strides, void *stream);

/* ===================================================================== */
/* Block copies                                                          */
/* ===================================================================== */

/**
 * @brief Copies blocks of layer group `group` inside its pool, every layer
 *        of the group at once, in one batched launch.
 *
 * Copy i copies block `src[i]` to block `dst[i]`: the whole block when
 * `num_tokens` is NULL or `num_tokens[i] >= tokens_per_block`, else only the
 * first `num_tokens[i]` token rows of every (layer, K/V) slab (as copy on
 * partial reuse and fork need). A destination may not be the source or the
 * destination of another copy in the same call; a source may be read by
 * several copies.
 * @param src,dst,num_tokens Host arrays of `count` entries, borrowed for the
 *        call; num_tokens may be NULL.
 * @param stream cudaStream_t on a CUDA cache; ignored on a CPU cache.
 * @return KVC_OK (count == 0 is a no-op); KVC_ERR_INVALID_ARGUMENT (NULL
 *         array, group out of range, block id out of range, a destination
 *         used twice or also a source); KVC_ERR_DEVICE.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_copy_blocks(kvc_cache_t *cache, uint32_t group,
                                     const int32_t *src, const int32_t *dst,
                                     const uint32_t *num_tokens, uint32_t count,
                                     void *stream);

/* ===================================================================== */
/* Paged decode attention                                                */
/* ===================================================================== */

/** Block table format of kvc_decode_args_t (values of enum kvc_table_format). */
typedef uint32_t kvc_table_format_t;
/** Block table formats. */
enum kvc_table_format {
  /** `block_table[b * table_stride + j]`: block j of sequence b. */
  KVC_TABLE_PADDED = 1,
  /** FlashInfer's CSR: blocks of sequence b are
   *  `block_table[indptr[b] .. indptr[b + 1])`. */
  KVC_TABLE_CSR = 2
};

/**
 * @brief What kvc_decode_attention() computes. Transparent; begins with
 *        struct_size.
 *
 * For every sequence b and query head h, with kv head `h / (q_heads /
 * kv_heads)`, L = seq_lens[b] and the attended tokens t in
 * [max(0, L - window), L):
 * `out[b][h] = sum_t softmax_t(softmax_scale * q[b][h] . K[t]) V[t]`,
 * computed in f32 and rounded once to q_dtype. A sequence of length 0
 * gives zeros. Entries of blocks wholly before the window are not read (they
 * may be -1).
 *
 * Element types: query and out are `q_dtype`, which must equal the cache
 * dtype for f16 and bf16 caches (and f32 caches), and be f16 or bf16 for an
 * fp8-e4m3 cache, whose K and V are read as `x * k_scale` and `x * v_scale`.
 * Head dims 64, 128 and 256 are supported. q_heads must be a multiple of the
 * layer's kv_heads (GQA; MQA when kv_heads is 1). f32 K/V is computed by the
 * CPU backend only; on a CUDA cache the query must be 16-byte aligned and a
 * call takes at most 65535 sequences.
 * @since 0.1.0
 */
typedef struct kvc_decode_args {
  uint32_t struct_size;    /**< sizeof(kvc_decode_args_t) of the caller. */
  uint32_t layer;          /**< Model layer, 0 <= layer < num_layers. */
  uint32_t batch;          /**< Sequences; 0 is a no-op. */
  uint32_t q_heads;        /**< Query heads, a multiple of kv_heads. */
  kvc_dtype_t q_dtype;     /**< Element type of query and out. */
  kvc_table_format_t table_format; /**< KVC_TABLE_PADDED or KVC_TABLE_CSR. */
  const void *query;       /**< [batch][q_heads][head_dim]; borrowed. */
  void *out;               /**< [batch][q_heads][head_dim]; written. */
  const int32_t *seq_lens; /**< [batch] tokens per sequence; borrowed. */
  const int32_t *block_table; /**< Padded [batch][table_stride], or CSR
                                   indices; borrowed. */
  const int32_t *indptr;   /**< CSR: [batch + 1] offsets; NULL if padded. */
  uint32_t table_stride;   /**< Padded: entries per row; 0 for CSR. */
  uint32_t max_seq_len;    /**< Upper bound of every seq_lens[b] (> 0 when
                                batch > 0); sizes the KV split. */
  uint32_t window;         /**< Attend to the last `window` tokens; 0 = the
                                layer's configured window (full if none). */
  float softmax_scale;     /**< Score scale; 0 = 1 / sqrt(head_dim). */
  float k_scale;           /**< fp8 dequantization scale of K; default 1. */
  float v_scale;           /**< fp8 dequantization scale of V; default 1. */
  void *workspace;         /**< Scratch of workspace_bytes (device memory on
                                CUDA), see kvc_decode_workspace_size(). */
  uint64_t workspace_bytes; /**< Bytes at workspace. */
  uint32_t rank;           /**< Tensor parallelism: the rank whose pool is read
                                (q_heads are that rank's query heads; workspace
                                on that rank's device); 0 < num_ranks. A
                                caller's struct without it means rank 0.
                                @since 0.3.0 */
} kvc_decode_args_t;

/** Static initializer for kvc_decode_args_t (padded tables, scales 1). */
#define KVC_DECODE_ARGS_INIT                                                  \
  {sizeof(kvc_decode_args_t), 0, 0, 0, 0, KVC_TABLE_PADDED, NULL, NULL, NULL, \
   NULL, NULL, 0, 0, 0, 0.0f, 1.0f, 1.0f, NULL, 0, 0}

/** @brief Sets `args` to KVC_DECODE_ARGS_INIT. NULL is ignored. @since 0.1.0 */
KVC_API void kvc_decode_args_init(kvc_decode_args_t *args);

/**
 * @brief Bytes of workspace kvc_decode_attention() needs for `args`.
 *
 * Depends only on the layer, batch, q_heads and max_seq_len of `args` (not
 * on its pointers) and never decreases when batch or max_seq_len grows, so
 * a caller sizes one workspace at start for its largest batch and longest
 * sequence and reuses it for every call. A CPU cache needs none (0).
 * @param[out] bytes Receives the size.
 * @return KVC_OK or KVC_ERR_INVALID_ARGUMENT (as kvc_decode_attention()
 *         for those fields). Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_decode_workspace_size(const kvc_cache_t *cache,
                                               const kvc_decode_args_t *args,
                                               uint64_t *bytes);

/**
 * @brief Paged decode attention of one layer: one query token per sequence
 *        against its cached K/V through a block table.
 *
 * Long sequences are split over several thread blocks (split-KV) so that a
 * small batch still fills the GPU; the partial results go to the caller's
 * workspace, so nothing is allocated.
 * @param args Borrowed for the call; its arrays must stay valid until the
 *        work completes.
 * @param stream cudaStream_t on a CUDA cache; ignored on a CPU cache.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL pointer, layer out of
 *         range, q_heads not a multiple of kv_heads, q_dtype not accepted,
 *         table format or stride wrong for max_seq_len, and on a CPU cache
 *         a sequence length above max_seq_len, a negative one or a block id
 *         out of range); KVC_ERR_UNSUPPORTED (head dim other than 64, 128,
 *         256; f32 K/V or more than 65535 sequences on a CUDA cache);
 *         KVC_ERR_BUFFER_TOO_SMALL (workspace smaller than
 *         kvc_decode_workspace_size(); the message gives the size);
 *         KVC_ERR_DEVICE. On a CUDA cache, values found wrong while running
 *         are reported by kvc_cache_get_async_error(): a sequence whose
 *         length or CSR row is out of range gets zeros; a block id out of
 *         range is not read and its tokens are left out.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_decode_attention(kvc_cache_t *cache,
                                          const kvc_decode_args_t *args,
                                          void *stream);

/* ===================================================================== */
/* Paged prefill attention                                               */
/* ===================================================================== */

/**
 * @brief What kvc_prefill_attention() computes. Transparent; begins with
 *        struct_size.
 *
 * A ragged batch: sequence b has `q_len = qo_indptr[b + 1] - qo_indptr[b]`
 * new query tokens, rows `qo_indptr[b] .. qo_indptr[b + 1]` of `query` and
 * `out` (FlashInfer's qo_indptr), and `L = kv_lens[b]` tokens in the cache,
 * new ones included (their K/V were stored first, e.g. by kvc_store_kv()).
 * Query token i of the sequence sits at position `p = L - q_len + i` and
 * attends causally to the tokens t in [max(0, p + 1 - window), p + 1):
 * for query head h (kv head `h / (q_heads / kv_heads)`),
 * `s_t = softmax_scale * q[h] . K[t]`, with a soft cap `s_t = cap *
 * tanh(s_t / cap)` when `logits_soft_cap` (cap) is > 0 (Gemma 2), and
 * `out[h] = sum_t softmax_t(s_t) V[t]`, computed in f32 and rounded once to
 * q_dtype. The tokens before the reused prefix (p < L - q_len) are read
 * from the blocks where they lie; nothing is copied. When `lse` is not
 * NULL, `lse[row * q_heads + h] = log(sum_t exp(s_t))` (natural log), so
 * that a caller can merge partial results.
 *
 * Decode rows (q_len 1) and prefill rows may be mixed in one call: every
 * sequence is computed by the same launch (no per-sequence dispatch); a
 * kv head's query heads share the rows of a tile, so a decode row of a
 * group of G query heads fills G rows. A step of only decode rows is
 * faster through kvc_decode_attention().
 *
 * `qo_indptr` and `kv_lens` are small host arrays on every device (as
 * FlashInfer's plan() reads them): the call checks them and sizes the
 * launch from them. The block table (and its CSR indptr), queries, outputs
 * and workspace are device memory on a CUDA cache. Entries of blocks wholly
 * before every query's window are not read (they may be -1).
 *
 * Element types, head dims (64, 128, 256) and GQA/MQA are as for
 * kvc_decode_args_t. On a CUDA cache query and out must be 16-byte aligned
 * and lse 4-byte aligned.
 * @since 0.3.0
 */
typedef struct kvc_prefill_args {
  uint32_t struct_size;    /**< sizeof(kvc_prefill_args_t) of the caller. */
  uint32_t layer;          /**< Model layer, 0 <= layer < num_layers. */
  uint32_t batch;          /**< Sequences; 0 is a no-op. */
  uint32_t total_q;        /**< Query rows: must equal qo_indptr[batch]. */
  uint32_t q_heads;        /**< Query heads, a multiple of kv_heads. */
  kvc_dtype_t q_dtype;     /**< Element type of query and out. */
  kvc_table_format_t table_format; /**< KVC_TABLE_PADDED or KVC_TABLE_CSR. */
  const void *query;       /**< [total_q][q_heads][head_dim]; borrowed. */
  void *out;               /**< [total_q][q_heads][head_dim]; written. */
  float *lse;              /**< [total_q][q_heads] log-sum-exp, or NULL. */
  const int32_t *qo_indptr; /**< HOST [batch + 1] query row offsets,
                                 qo_indptr[0] == 0, non-decreasing. */
  const int32_t *kv_lens;  /**< HOST [batch] tokens per sequence, each
                                >= its q_len and <= max_kv_len. */
  const int32_t *block_table; /**< Padded [batch][table_stride], or CSR
                                   indices; borrowed. */
  const int32_t *indptr;   /**< CSR: [batch + 1] offsets; NULL if padded. */
  uint32_t table_stride;   /**< Padded: entries per row; 0 for CSR. */
  uint32_t max_kv_len;     /**< Upper bound of every kv_lens[b] (> 0 when
                                batch > 0); sizes the workspace. */
  uint32_t window;         /**< Attend to the last `window` tokens of each
                                query; 0 = the layer's window (full if none). */
  float softmax_scale;     /**< Score scale; 0 = 1 / sqrt(head_dim). */
  float logits_soft_cap;   /**< Soft cap of the scores; 0 = none. */
  float k_scale;           /**< fp8 dequantization scale of K; default 1. */
  float v_scale;           /**< fp8 dequantization scale of V; default 1. */
  void *workspace;         /**< Scratch of workspace_bytes (device memory on
                                CUDA), see kvc_prefill_workspace_size(). */
  uint64_t workspace_bytes; /**< Bytes at workspace. */
  uint32_t rank;           /**< Tensor parallelism: the rank whose pool is read
                                (as kvc_decode_args_t's); 0 < num_ranks. A
                                caller's struct without it means rank 0.
                                @since 0.3.0 */
} kvc_prefill_args_t;

/** Static initializer for kvc_prefill_args_t (padded tables, scales 1). */
#define KVC_PREFILL_ARGS_INIT                                                  \
  {sizeof(kvc_prefill_args_t), 0, 0, 0, 0, 0, KVC_TABLE_PADDED, NULL, NULL,    \
   NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0.0f, 0.0f, 1.0f, 1.0f, NULL, 0, 0}

/** @brief Sets `args` to KVC_PREFILL_ARGS_INIT. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_prefill_args_init(kvc_prefill_args_t *args);

/**
 * @brief Bytes of workspace kvc_prefill_attention() needs for `args`.
 *
 * Depends only on the layer, batch, total_q, q_heads and max_kv_len of
 * `args` (not on its pointers) and never decreases when one of them grows,
 * so a caller sizes one workspace at start for its largest step and reuses
 * it for every call. A CPU cache needs none (0).
 * @param[out] bytes Receives the size.
 * @return KVC_OK or KVC_ERR_INVALID_ARGUMENT / KVC_ERR_UNSUPPORTED (as
 *         kvc_prefill_attention() for those fields). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_prefill_workspace_size(const kvc_cache_t *cache,
                                                const kvc_prefill_args_t *args,
                                                uint64_t *bytes);

/**
 * @brief Paged prefill attention of one layer: each sequence's new query
 *        tokens, causal among themselves, against all its cached K/V
 *        through a block table (chunked prefill, prefix reuse, mixed
 *        prefill and decode steps).
 *
 * On CUDA a flash-attention style tiled kernel on the tensor cores; when
 * the batch is too small to fill the GPU, long contexts are split over
 * several thread blocks and merged through the caller's workspace, so
 * nothing is allocated.
 * @param args Borrowed for the call; its device arrays must stay valid
 *        until the work completes; the host arrays only for the call.
 * @param stream cudaStream_t on a CUDA cache; ignored on a CPU cache.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL pointer, layer out of
 *         range, q_heads not a multiple of kv_heads, q_dtype not accepted,
 *         qo_indptr not starting at 0 or decreasing, qo_indptr[batch] not
 *         total_q, a q_len above its kv_len, a kv_len above max_kv_len,
 *         table format or stride wrong for max_kv_len, a pointer not aligned
 *         on a CUDA cache, and on a CPU cache a block id out of range or a
 *         CSR row shorter than its kv_len needs); KVC_ERR_UNSUPPORTED (head
 *         dim other than 64, 128, 256; f32 K/V on a CUDA cache);
 *         KVC_ERR_BUFFER_TOO_SMALL (workspace smaller than
 *         kvc_prefill_workspace_size(); the message gives the size);
 *         KVC_ERR_DEVICE. Nothing is launched when a check fails. On a CUDA
 *         cache, values found wrong while running are reported by
 *         kvc_cache_get_async_error(): a sequence whose CSR row is too short
 *         gets zeros; a block id out of range is not read (its tokens count
 *         as zero keys and values).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_prefill_attention(kvc_cache_t *cache,
                                           const kvc_prefill_args_t *args,
                                           void *stream);

/* ===================================================================== */
/* Errors of enqueued work                                               */
/* ===================================================================== */

/**
 * @brief Reports the first error of kernel work enqueued on this cache.
 *
 * Waits for the work enqueued on `stream` (NULL = default stream; ignored
 * on a CPU cache), then sets `*async_error` to KVC_OK, or to the status of
 * the first error that this cache's kernels recorded since the previous
 * report (KVC_ERR_INVALID_ARGUMENT for a slot, block id or sequence length
 * out of range), or to KVC_ERR_DEVICE when the CUDA context failed (an
 * illegal address: that error is sticky and every later report repeats it).
 * When `*async_error` is not KVC_OK, kvc_last_error_message() describes it
 * ("store_kv: slot_mapping[17] = 70000 is outside [-1, 65536)"). A recorded
 * argument error is cleared by being reported.
 * @param[out] async_error Receives the status of the enqueued work.
 * @return KVC_OK if the check itself ran; KVC_ERR_INVALID_ARGUMENT (NULL);
 *         KVC_ERR_DEVICE (synchronizing failed for another reason).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_get_async_error(kvc_cache_t *cache,
                                               void *stream,
                                               kvc_status_t *async_error);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_KERNELS_H */

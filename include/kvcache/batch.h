/**
 * @file batch.h
 * @brief One scheduling step over a batch of sequences: a decode step that
 *        appends one token to each, and the tables attention kernels take
 *        (block tables padded or CSR as FlashInfer takes them, sequence
 *        lengths, slot mappings), written into caller buffers.
 *
 * Buffers are host memory. Tables are per layer group (`group`): block ids
 * index that group's pool. A failing call writes nothing.
 */
#ifndef KVCACHE_BATCH_H
#define KVCACHE_BATCH_H

#include "kvcache/cache.h"
#include "kvcache/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief One decode step: appends tokens[i] to sequence ids[i] for every i,
 *        all or nothing (blocks for the whole batch are checked first).
 * @param ids `count` distinct sequence ids, borrowed.
 * @param tokens `count` token ids, borrowed.
 * @param stream Stream for copies of shared tails and host-tier offloads
 *        (NULL: default).
 * @return KVC_OK, KVC_ERR_NOT_FOUND (the message names the index),
 *         KVC_ERR_OUT_OF_BLOCKS, KVC_ERR_INVALID_ARGUMENT (NULL arrays with
 *         count > 0, a repeated id), KVC_ERR_DEVICE (a host-tier copy, as
 *         for kvc_sequence_extend).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_batch_extend(kvc_cache_t *cache, const uint64_t *ids,
                                      const int32_t *tokens, size_t count, void *stream);

/**
 * @brief Padded block tables: row i of `table` ([count][max_blocks], int32)
 *        holds the block ids of sequence ids[i] in group `group`, then
 *        `pad` up to max_blocks. In a windowed group, the entries of blocks
 *        wholly before the window (released) hold `pad` too; windowed
 *        attention kernels do not read them.
 * @param[out] blocks_needed Receives the longest row over the batch (the
 *        max_blocks that suffices); may be NULL.
 * @return KVC_OK; KVC_ERR_BUFFER_TOO_SMALL (a sequence has more than
 *         max_blocks blocks; *blocks_needed says how many);
 *         KVC_ERR_NOT_FOUND; KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_batch_block_table(const kvc_cache_t *cache, uint32_t group,
                                           const uint64_t *ids, size_t count, int32_t *table,
                                           size_t max_blocks, int32_t pad,
                                           size_t *blocks_needed);

/**
 * @brief Block tables in CSR form (FlashInfer's paged_kv_indptr,
 *        paged_kv_indices, paged_kv_last_page_len). In a windowed group,
 *        the indices of blocks wholly before the window (released) are 0,
 *        a valid id that windowed kernels do not read.
 * @param[out] indptr `count + 1` entries: sequence i's blocks are
 *        indices[indptr[i] .. indptr[i+1]).
 * @param[out] indices Capacity `indices_capacity`.
 * @param[out] last_page_len `count` entries: tokens in the last block
 *        (1..tokens_per_block; 0 for an empty sequence).
 * @param[out] num_indices Receives the total blocks, also when
 *        indices_capacity is too small; may be NULL.
 * @return KVC_OK, KVC_ERR_BUFFER_TOO_SMALL, KVC_ERR_NOT_FOUND,
 *         KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_batch_block_table_csr(const kvc_cache_t *cache, uint32_t group,
                                               const uint64_t *ids, size_t count,
                                               int32_t *indptr, int32_t *indices,
                                               size_t indices_capacity, int32_t *last_page_len,
                                               size_t *num_indices);

/**
 * @brief Current lengths (tokens) of the sequences, as int32.
 * @param[out] lengths `count` entries.
 * @return KVC_OK, KVC_ERR_NOT_FOUND, KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_batch_sequence_lengths(const kvc_cache_t *cache, const uint64_t *ids,
                                                size_t count, int32_t *lengths);

/**
 * @brief Slot mapping of the tokens added to each sequence since the last
 *        call for this group (for a new sequence: its whole prompt).
 *
 * For sequence ids[i], in order, one int64 per token: `block_id *
 * tokens_per_block + offset` where the store kernel must write its K/V,
 * or -1 for a token whose KV is already cached (reused at add). The
 * sequences' tokens follow each other in `slots`. Advances each
 * sequence's cursor for `group` (other groups keep their own).
 * @param[out] slots Capacity `capacity`.
 * @param[out] num_slots Receives the slots written, or needed when the
 *        buffer is too small (then nothing advances); may be NULL.
 * @param[out] new_tokens `count` entries: slots per sequence; may be NULL.
 * @return KVC_OK, KVC_ERR_BUFFER_TOO_SMALL, KVC_ERR_NOT_FOUND,
 *         KVC_ERR_INVALID_ARGUMENT (NULL buffers, a repeated id).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_batch_slot_mapping(kvc_cache_t *cache, uint32_t group,
                                            const uint64_t *ids, size_t count, int64_t *slots,
                                            size_t capacity, size_t *num_slots,
                                            int32_t *new_tokens);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_BATCH_H */

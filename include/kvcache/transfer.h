/**
 * @file transfer.h
 * @brief Moving blocks between caches (disaggregated prefill/decode):
 *        export a sequence's committed blocks from one cache, import them
 *        into another, verified against the receiver's own prompt.
 *
 * The caller owns the transport (NIXL, UCX, NCCL, CUDA IPC, host memory):
 * the cache names the blocks and takes them back in. For CUDA IPC between
 * processes, kvc_cache_describe_pool_share() and kvc_cache_export_pool_chunk()
 * (below) export a rank's pool memory as POSIX file descriptors another
 * process maps; examples/cuda_ipc_transfer is a whole transport built on
 * them.
 *
 * Sender (prefill):
 *   1. kvc_cache_export_sequence() holds the sequence's committed full
 *      blocks (a reference on their tree nodes: eviction,
 *      kvc_cache_reset_reuse, kvc_cache_resize and a later
 *      kvc_sequence_remove cannot take them) until kvc_export_release().
 *   2. kvc_export_keys() gives the key blob to send; kvc_export_block_ids()
 *      the block ids per layer group. A block's bytes are addressed with
 *      kvc_cache_layer_view(): layer l's part of block id b starts at
 *      `view.base + b * view.block_stride` (see kvc_layer_view_t); the whole
 *      block of a layer group (all its layers) is kvc_group_desc_t
 *      block_bytes contiguous bytes starting at the first layer of the
 *      group's view (kvc_pool_desc_t base + b * block_bytes).
 *      Tensor parallelism (kvc_config_set_ranks): the block ids are the
 *      same on every rank; rank r's bytes of block b are addressed the same
 *      way through kvc_cache_layer_view_rank(cache, r, layer) (block_bytes
 *      of kvc_group_desc_t is one rank's), so per rank and layer group the
 *      export gives the ids, and the rank's view their addresses and bytes.
 *      Both caches need the same number of ranks: the geometry fingerprint
 *      includes it (with more than one rank), so an import from a cache
 *      sharded otherwise is refused.
 *
 * Receiver (decode):
 *   3. kvc_cache_import_begin() with the receiver's OWN tokens and options
 *      and the peer's key blob. The cache computes the blob's scope check
 *      from those options and refuses the blob unless its format version,
 *      tokens per block, geometry fingerprint, scope check and tokens all
 *      match (nothing changed then; the message names the field, or the
 *      first block and token that differ): a peer can never put KV under
 *      another prompt, and scopes with another salt, LoRA id or extra keys
 *      (overlapping the exported blocks) stay apart because those are in
 *      the scope check. It then adds sequence `seq_id` with the tokens, as
 *      kvc_sequence_add() does: leading blocks
 *      this cache already holds are reused, fresh blocks are reserved for
 *      the others, all or nothing (KVC_ERR_OUT_OF_BLOCKS, nothing changed).
 *   4. kvc_import_block_ids() names the blocks to write: positions
 *      [first_block, num_blocks) of kvc_transfer_desc_t. Copy export block
 *      `first_block + i` of group g into import block i of group g.
 *   5. kvc_import_complete(import, blocks_written) commits the imported
 *      tokens of sequence `seq_id`: the blocks are published into the
 *      radix tree under the prompt's keys exactly as kvc_sequence_commit()
 *      publishes them (STORED events when events are on; reusable by any
 *      add of the same prompt and scope; ordinary cached blocks once the
 *      sequence is removed: evictable, offloadable). The sequence stays:
 *      extend it with the rest of the prompt or the first generated token
 *      and decode, then remove it as any other. kvc_import_abort() removes
 *      the sequence instead, giving every block back.
 *
 * An import creates sequence `seq_id` at kvc_cache_import_begin(). Until
 * kvc_import_complete() or kvc_import_abort() the import owns it: do not
 * extend, commit, rewind, fork or remove it. (Removing it anyway makes
 * complete fail with KVC_ERR_NOT_FOUND and abort do nothing.) An aborted
 * import leaves the cache as it was: every block count, sequence, tree node
 * and statistic (an import is not a lookup: it never counts in
 * kvc_cache_stats_t reused_blocks, missed_blocks or hit_rate), except that
 * cached blocks evicted to make room for the import stay evicted.
 *
 * Lifetime. Release exports (kvc_export_release()) and end imports
 * (kvc_import_destroy()) before kvc_cache_destroy(). A cache destroyed
 * with exports or imports still open releases them itself: their handles
 * then stay valid only for describe, block ids, keys and the calls that
 * free them (kvc_export_release(), kvc_import_destroy()); complete and
 * abort return KVC_ERR_INVALID_STATE, and the block ids name memory that
 * is gone.
 *
 * Key blob format, version 2 (every integer little endian; N blocks of T
 * tokens):
 *
 *     offset        size   field
 *     0             8      magic "KVCXFERK"
 *     8             4      u32 format version (2)
 *     12            4      u32 tokens_per_block (T)
 *     16            8      u64 geometry fingerprint: the one block stores
 *                          check (model layers, kv heads and windows per
 *                          layer, head dim, kv factor, dtype, layout, T,
 *                          layer groups and their block bytes)
 *     24            8      u64 num_blocks (N)
 *     32            32     u8[32] scope check (below)
 *     64            4*N*T  i32 token ids of the N blocks
 *     64+4NT        8*N    per block: u64 portable hash (events.h, under
 *                          the sender's kvc_config_set_event_hash_seed)
 *     64+4NT+8N     8      u64 XXH3-64 (seed 0) of every byte before it
 *
 * The scope check is SHA-256("kvc.xfer.scope.v2" || u64 byte count ||
 * scope || u64 byte count || extras), where scope is 'S', u8 has_salt
 * [, u64 salt size, the salt's bytes], 'L', u8 has_lora [, u64 LoRA id],
 * and extras is, for each extra key overlapping tokens [0, N*T) in
 * (offset, length, bytes) order: 'X', u64 offset, u64 length, u64 size,
 * the key's bytes.
 * The receiver computes it from its own options and compares it, and
 * compares the tokens one for one: together they decide exactly what a
 * SHA-256 chain digest per block (the key block stores keep blocks under,
 * a function of T, the tokens up to the block, the scope and the extra
 * keys overlapping the block) would, for one hash per blob instead of one
 * per block. Extra keys only past the exported tokens do not matter; a key
 * that reaches into them counts whole (offset, length and bytes). The
 * portable hash is carried for routers and logs; the receiver does not
 * check it (caches may use different seeds). The checksum catches
 * accidents in transit, not forgery: the tokens and the scope check are
 * what keep a peer's KV under its own prompt. Version 1 (a 32-byte chain
 * digest and the portable hash per block, no scope check) is refused,
 * with a message naming both versions.
 *
 * Threading: as every call on a cache handle. An export or import handle
 * is used by one thread at a time.
 */
#ifndef KVCACHE_TRANSFER_H
#define KVCACHE_TRANSFER_H

#include "kvcache/cache.h"
#include "kvcache/common.h"
#include "kvcache/sequence.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief An export: blocks held for a transfer. @since 0.3.0 */
typedef struct kvc_export kvc_export_t;
/** @brief An import: blocks reserved for a transfer. @since 0.3.0 */
typedef struct kvc_import kvc_import_t;

/**
 * @brief What an export or an import covers. Transparent; begins with
 *        struct_size. @since 0.3.0
 */
typedef struct kvc_transfer_desc {
  uint32_t struct_size;      /**< sizeof(kvc_transfer_desc_t) of the caller. */
  uint32_t num_groups;       /**< Layer groups (kvc_cache_desc_t num_groups). */
  uint32_t tokens_per_block; /**< Tokens per block. */
  uint32_t reserved;         /**< 0. */
  uint64_t seq_id;           /**< The sequence exported, or the import's. */
  uint64_t num_blocks;       /**< Full blocks the key blob names (positions
                                  0..num_blocks-1 of the prompt). */
  uint64_t first_block;      /**< Export: 0. Import: the first position the
                                  caller writes; the ones before it this
                                  cache already held. */
  uint64_t num_tokens;       /**< num_blocks * tokens_per_block. */
  uint64_t keys_bytes;       /**< Size of the key blob (export: what
                                  kvc_export_keys() writes; import: 0). */
} kvc_transfer_desc_t;

/** Static initializer for kvc_transfer_desc_t. */
#define KVC_TRANSFER_DESC_INIT {sizeof(kvc_transfer_desc_t), 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `desc` and sets its struct_size. @since 0.3.0 */
KVC_API void kvc_transfer_desc_init(kvc_transfer_desc_t *desc);

/* ===================================================================== */
/* Export (the prefill side)                                             */
/* ===================================================================== */

/**
 * @brief Holds the committed full blocks of sequence `seq_id` for a
 *        transfer and describes them.
 * @param num_tokens 0: every committed full block; else a multiple of
 *        tokens_per_block no larger than the committed full blocks' tokens.
 * @param[out] out Receives a new export, owned by the caller, freed with
 *        kvc_export_release(); untouched on failure.
 * @return KVC_OK; KVC_ERR_NOT_FOUND (no such sequence);
 *         KVC_ERR_INVALID_ARGUMENT (num_tokens not block aligned or past
 *         what is committed, nothing committed, NULL); KVC_ERR_INVALID_STATE
 *         (a committed block not yet published: shared with a fork sibling,
 *         or the tree full); KVC_ERR_UNSUPPORTED (block reuse off, or a
 *         windowed group that no longer holds an exported position).
 *         Nothing changed on failure.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_export_sequence(kvc_cache_t *cache, uint64_t seq_id,
                                               uint64_t num_tokens, kvc_export_t **out);

/**
 * @brief Releases the blocks an export holds and frees it. NULL is fine.
 *        After the cache was destroyed, only frees the handle.
 * @since 0.3.0
 */
KVC_API void kvc_export_release(kvc_export_t *exp);

/**
 * @brief Describes an export (keys_bytes is the key blob's size).
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_export_describe(const kvc_export_t *exp, kvc_transfer_desc_t *out);

/**
 * @brief The exported block ids of layer group `group`, position 0 first
 *        (num_blocks of them). Ids index the group's pool, as
 *        kvc_sequence_block_ids() ids do.
 * @param[out] ids Caller buffer of `capacity` entries; may be NULL if
 *        capacity is 0.
 * @param[out] count Receives num_blocks, also when the buffer is too small
 *        (then nothing is written to ids).
 * @return KVC_OK, KVC_ERR_BUFFER_TOO_SMALL, KVC_ERR_INVALID_ARGUMENT.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_export_block_ids(const kvc_export_t *exp, uint32_t group, int32_t *ids,
                                          size_t capacity, size_t *count);

/**
 * @brief The key blob (format in this header) into buf[capacity].
 * @param[out] buf Caller buffer; may be NULL if capacity is 0.
 * @param[out] size Receives the blob's size, also when buf is too small
 *        (then nothing is written to buf).
 * @return KVC_OK, KVC_ERR_BUFFER_TOO_SMALL, KVC_ERR_INVALID_ARGUMENT.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_export_keys(const kvc_export_t *exp, void *buf, size_t capacity,
                                     size_t *size);

/* ===================================================================== */
/* Import (the decode side)                                              */
/* ===================================================================== */

/**
 * @brief Verifies a peer's key blob against this cache and the receiver's
 *        own prompt, then adds sequence `seq_id` with the prompt, reserving
 *        blocks for the positions this cache does not hold.
 * @param tokens The receiver's prompt, num_tokens of them, borrowed for the
 *        call: at least the blob's num_blocks * tokens_per_block; the
 *        sequence gets all of them (tokens past the blob's blocks are the
 *        caller's to compute, as after kvc_sequence_add()).
 * @param options As kvc_sequence_add()'s (salt, LoRA id, extra keys,
 *        retention); NULL: the defaults. They must be those the sender's
 *        sequence had (extra keys: those overlapping the blob's blocks),
 *        or the scope check differs.
 * @param keys,keys_size The key blob, borrowed for the call.
 * Device work the add enqueues (the copy of a partially matched block,
 * blocks onboarded from the host tier) goes to the default stream (NULL):
 * on CUDA, synchronize it before the transport writes the blocks. The CPU
 * backend does it before returning.
 * @param[out] out Receives a new import, owned by the caller, freed with
 *        kvc_import_destroy(); untouched on failure.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (a blob of another format
 *         version, tokens_per_block or geometry, truncated or corrupted, or
 *         one whose scope check or tokens differ from those of options
 *         and tokens: the message says which, and names the first block
 *         and token that differ; bad
 *         options; NULL); KVC_ERR_ALREADY_EXISTS (seq_id exists);
 *         KVC_ERR_OUT_OF_BLOCKS; KVC_ERR_UNSUPPORTED (block reuse off).
 *         Nothing changed on failure.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_import_begin(kvc_cache_t *cache, uint64_t seq_id,
                                            const int32_t *tokens, size_t num_tokens,
                                            const kvc_sequence_options_t *options,
                                            const void *keys, size_t keys_size,
                                            kvc_import_t **out);

/**
 * @brief Describes an import: the blocks to write are positions
 *        [first_block, num_blocks); keys_bytes is 0.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_import_describe(const kvc_import_t *imp, kvc_transfer_desc_t *out);

/**
 * @brief The block ids to write in layer group `group`: entry i is
 *        position first_block + i (num_blocks - first_block entries; 0 when
 *        this cache held every block). -1: nothing to write there (a
 *        windowed group that does not need that position).
 * @param[out] ids Caller buffer of `capacity` entries; may be NULL if
 *        capacity is 0.
 * @param[out] count Receives the count, also when the buffer is too small
 *        (then nothing is written to ids).
 * @return KVC_OK, KVC_ERR_BUFFER_TOO_SMALL, KVC_ERR_INVALID_ARGUMENT.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_import_block_ids(const kvc_import_t *imp, uint32_t group, int32_t *ids,
                                          size_t capacity, size_t *count);

/**
 * @brief The caller wrote the imported blocks: commits the blob's tokens of
 *        the import's sequence, publishing the blocks into the radix tree.
 *        The device work that wrote them must be finished.
 * @param blocks_written Block positions written: num_blocks - first_block.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (another count: the import stays
 *         open); KVC_ERR_INVALID_STATE (already completed or aborted, or
 *         the cache was destroyed); KVC_ERR_NOT_FOUND (the sequence was
 *         removed; the import is then over).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_import_complete(kvc_import_t *imp, uint64_t blocks_written);

/**
 * @brief Gives every block of an open import back: removes its sequence.
 * @return KVC_OK; KVC_ERR_INVALID_STATE (already completed or aborted, or
 *         the cache was destroyed); KVC_ERR_INVALID_ARGUMENT (NULL).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_import_abort(kvc_import_t *imp);

/**
 * @brief Frees an import, aborting it first if it is still open. NULL is
 *        fine.
 * @since 0.3.0
 */
KVC_API void kvc_import_destroy(kvc_import_t *imp);

/* ===================================================================== */
/* Sharing pool memory with another process (CUDA IPC)                   */
/* ===================================================================== */

/*
 * On the CUDA backend a growable pool (every pool, where the driver has the
 * virtual memory API) is a range of reserved addresses backed from its start
 * by physical allocations ("chunks": one at creation, one more per
 * kvc_cache_resize that grows it). The chunks are created exportable as POSIX
 * file descriptors (cuMemCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
 * where the device supports it; where it does not, or the driver refuses the
 * handle type, they are created without it and kvc_cache_describe_pool_share()
 * fails with KVC_ERR_UNSUPPORTED and the reason.
 *
 * To read (or write) a peer's blocks straight from its pool:
 *   1. Sender: kvc_cache_describe_pool_share() for the rank and pool, then
 *      kvc_cache_export_pool_chunk() for each chunk 0..num_chunks-1: a new
 *      file descriptor per call. Send the descriptors to the peer over a
 *      Unix-domain socket (SCM_RIGHTS) with each chunk's offset and size,
 *      and close them.
 *   2. Peer (a process on the same GPU, or one that can reach it):
 *      cuMemImportFromShareableHandle on each descriptor (then close it),
 *      cuMemAddressReserve of reserved_bytes aligned to granularity,
 *      cuMemMap of each chunk at its offset, cuMemSetAccess for its device.
 *      The pool's byte at offset x (x < mapped_bytes) is then at the
 *      reserved address + x: block b of a layer lies at
 *      (layer view base - pool base) + b * block_stride from there
 *      (kvc_cache_layer_view_rank, kvc_pool_desc_t base).
 *   3. Peer, when done: cuMemUnmap, cuMemRelease, cuMemAddressFree.
 *
 * What an export covers is the pool as backed at the call. A resize that
 * grows the pool adds a chunk the peer has not mapped: blocks of the new ids
 * lie past mapped_bytes; describe and export again (the chunks already sent
 * keep their offsets). A resize that shrinks the pool returns its last
 * chunks to the driver here, but a peer that imported them keeps the
 * physical memory alive until it unmaps and releases it: reading or writing
 * there is harmless to this cache and no longer reaches its pool. The
 * cache does not track what was exported; the export of blocks
 * (kvc_cache_export_sequence) is what keeps their ids and bytes in place.
 * Pools that share pages (one arena) view the same memory: their
 * descriptions are equal; map it once.
 */

/** @brief Handle types of kvc_pool_share_t. @since 0.3.0 */
enum {
  KVC_SHARE_HANDLE_POSIX_FD = 1 /**< A POSIX file descriptor (cuMemExportToShareableHandle
                                     with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR). */
};
/** @brief One of KVC_SHARE_HANDLE_*. @since 0.3.0 */
typedef uint32_t kvc_share_handle_t;

/**
 * @brief The memory backing one rank's pool, for another process to map.
 *        Transparent; begins with struct_size. @since 0.3.0
 */
typedef struct kvc_pool_share {
  uint32_t struct_size;           /**< sizeof(kvc_pool_share_t) of the caller. */
  int32_t device_ordinal;         /**< The CUDA device holding the pool, in this process's
                                       numbering (CUDA_VISIBLE_DEVICES may differ in the
                                       peer's). */
  uint32_t rank;                  /**< The rank described. */
  uint32_t pool;                  /**< The pool described. */
  kvc_share_handle_t handle_type; /**< KVC_SHARE_HANDLE_POSIX_FD. */
  uint32_t reserved;              /**< 0. */
  uint64_t num_chunks;            /**< Physical allocations backing the pool now. */
  uint64_t granularity;           /**< Allocation granularity: every offset and size below
                                       is a multiple of it; align the peer's reservation
                                       to it. */
  uint64_t reserved_bytes;        /**< Address space of the pool's reservation (its
                                       largest size, kvc_config_set_max_primary_bytes). */
  uint64_t mapped_bytes;          /**< Bytes backed from the pool's base: the chunks' sizes
                                       summed (>= kvc_pool_desc_t bytes). */
} kvc_pool_share_t;

/** Static initializer for kvc_pool_share_t. */
#define KVC_POOL_SHARE_INIT {sizeof(kvc_pool_share_t), 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `share` and sets its struct_size. @since 0.3.0 */
KVC_API void kvc_pool_share_init(kvc_pool_share_t *share);

/**
 * @brief One chunk of a pool, exported. Transparent; begins with
 *        struct_size. @since 0.3.0
 */
typedef struct kvc_share_chunk {
  uint32_t struct_size; /**< sizeof(kvc_share_chunk_t) of the caller. */
  int32_t fd;           /**< A new POSIX file descriptor for the chunk, owned by the caller
                             (close() it once sent or imported). */
  uint64_t index;       /**< The chunk (0..num_chunks-1). */
  uint64_t offset;      /**< Its place from the pool's base. */
  uint64_t size;        /**< Its bytes. */
} kvc_share_chunk_t;

/** Static initializer for kvc_share_chunk_t. */
#define KVC_SHARE_CHUNK_INIT {sizeof(kvc_share_chunk_t), -1, 0, 0, 0}

/** @brief Zeroes `chunk`, sets fd to -1 and its struct_size. @since 0.3.0 */
KVC_API void kvc_share_chunk_init(kvc_share_chunk_t *chunk);

/**
 * @brief Describes the memory backing pool `pool` of rank `rank` for
 *        another process (see above). Creates nothing.
 * @param rank 0 <= rank < num_ranks (kvc_config_set_ranks).
 * @param pool 0 <= pool < num_pools (kvc_cache_desc_t).
 * @param[out] out Caller's struct (struct_size set).
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (rank or pool out of range,
 *         NULL); KVC_ERR_UNSUPPORTED (the CPU backend; a CUDA pool
 *         allocated with cudaMalloc, without the virtual memory API; or
 *         chunks created without a shareable handle type: the message says
 *         why the driver refused it).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_describe_pool_share(const kvc_cache_t *cache, uint32_t rank,
                                                   uint32_t pool, kvc_pool_share_t *out);

/**
 * @brief Exports chunk `chunk` of pool `pool` of rank `rank`: a new POSIX
 *        file descriptor (cuMemExportToShareableHandle) with its offset and
 *        size. Each call makes a new descriptor, which the caller owns and
 *        closes; the cache keeps no record of it.
 * @param chunk 0 <= chunk < num_chunks of kvc_cache_describe_pool_share().
 * @param[out] out Caller's struct (struct_size set); untouched on failure.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (rank, pool or chunk out of
 *         range, NULL); KVC_ERR_UNSUPPORTED (as
 *         kvc_cache_describe_pool_share()); KVC_ERR_DEVICE (the driver
 *         failed to export: the message names its error).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_export_pool_chunk(const kvc_cache_t *cache, uint32_t rank,
                                                 uint32_t pool, uint64_t chunk,
                                                 kvc_share_chunk_t *out);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_TRANSFER_H */

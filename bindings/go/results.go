package kvcache

// Calls that return a struct (descriptions, views, statistics), each made
// in one cgo call: a C helper below initializes the struct, makes the call,
// copies the error message if it failed (on the thread that failed, as
// kvcgo_capture does for the SWIG layer) and returns all of it by value,
// so Go reads the members as plain memory. Through the SWIG layer the same
// call took one cgo call per member, plus three for the struct's life
// (bench/results/2026-11-25-go-overhead.md).
//
// The table calls (kvc_batch_*) go through helpers here too: their sizes
// come back by value, so nothing escapes to the heap, and the SWIG layer's
// status string is not built. Handles are passed as addresses (uintptr);
// the only Go pointers reaching C are the caller's slices, borrowed for the
// call as cgo allows.

/*
#cgo pkg-config: kvcache
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <kvcache/kvcache.h>

// The message of a failed call, copied now (NULL for KVC_OK, or when out of
// memory); the Go side frees it.
static char *kvcgo_message(kvc_status_t status) {
  return status == KVC_OK ? NULL : strdup(kvc_last_error_message());
}

// KVCGO_RESULT(T): a struct T with the status and message of the call.
#define KVCGO_RESULT(T) typedef struct { T v; kvc_status_t status; char *msg; } T##_result

KVCGO_RESULT(kvc_cache_desc_t);
static kvc_cache_desc_t_result kvcgo_cache_describe(uintptr_t cache) {
  kvc_cache_desc_t_result r;
  kvc_cache_desc_init(&r.v);
  r.status = kvc_cache_describe((const kvc_cache_t *)cache, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_resize_plan_t);
static kvc_resize_plan_t_result kvcgo_cache_plan_resize(uintptr_t cache, uintptr_t inputs,
                                                         uint64_t *pools, size_t capacity) {
  kvc_resize_plan_t_result r;
  kvc_resize_plan_init(&r.v);
  r.status = kvc_cache_plan_resize((const kvc_cache_t *)cache, (const kvc_resize_inputs_t *)inputs,
                                   &r.v, pools, capacity);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_group_desc_t);
static kvc_group_desc_t_result kvcgo_cache_describe_group(uintptr_t cache, uint32_t group) {
  kvc_group_desc_t_result r;
  kvc_group_desc_init(&r.v);
  r.status = kvc_cache_describe_group((const kvc_cache_t *)cache, group, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_pool_desc_t);
static kvc_pool_desc_t_result kvcgo_cache_describe_pool(uintptr_t cache, uint32_t pool) {
  kvc_pool_desc_t_result r;
  kvc_pool_desc_init(&r.v);
  r.status = kvc_cache_describe_pool((const kvc_cache_t *)cache, pool, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_layer_view_t);
static kvc_layer_view_t_result kvcgo_cache_layer_view(uintptr_t cache, uint32_t layer) {
  kvc_layer_view_t_result r;
  kvc_layer_view_init(&r.v);
  r.status = kvc_cache_layer_view((const kvc_cache_t *)cache, layer, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}
static kvc_layer_view_t_result kvcgo_cache_layer_view_rank(uintptr_t cache, uint32_t rank,
                                                           uint32_t layer) {
  kvc_layer_view_t_result r;
  kvc_layer_view_init(&r.v);
  r.status = kvc_cache_layer_view_rank((const kvc_cache_t *)cache, rank, layer, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_cache_stats_t);
static kvc_cache_stats_t_result kvcgo_cache_get_stats(uintptr_t cache) {
  kvc_cache_stats_t_result r;
  kvc_cache_stats_init(&r.v);
  r.status = kvc_cache_get_stats((const kvc_cache_t *)cache, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_group_stats_t);
static kvc_group_stats_t_result kvcgo_cache_get_group_stats(uintptr_t cache, uint32_t group) {
  kvc_group_stats_t_result r;
  kvc_group_stats_init(&r.v);
  r.status = kvc_cache_get_group_stats((const kvc_cache_t *)cache, group, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_sequence_desc_t);
static kvc_sequence_desc_t_result kvcgo_sequence_describe(uintptr_t cache, uint64_t id) {
  kvc_sequence_desc_t_result r;
  kvc_sequence_desc_init(&r.v);
  r.status = kvc_sequence_describe((const kvc_cache_t *)cache, id, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_stateful_view_t);
static kvc_stateful_view_t_result kvcgo_stateful_layer_view(uintptr_t cache, uint32_t layer) {
  kvc_stateful_view_t_result r;
  kvc_stateful_view_init(&r.v);
  r.status = kvc_stateful_layer_view((const kvc_stateful_t *)cache, layer, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_stateful_stats_t);
static kvc_stateful_stats_t_result kvcgo_stateful_get_stats(uintptr_t cache) {
  kvc_stateful_stats_t_result r;
  kvc_stateful_stats_init(&r.v);
  r.status = kvc_stateful_get_stats((const kvc_stateful_t *)cache, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

KVCGO_RESULT(kvc_stateful_layer_stats_t);
static kvc_stateful_layer_stats_t_result kvcgo_stateful_get_layer_stats(uintptr_t cache,
                                                                       uint32_t layer) {
  kvc_stateful_layer_stats_t_result r;
  kvc_stateful_layer_stats_init(&r.v);
  r.status = kvc_stateful_get_layer_stats((const kvc_stateful_t *)cache, layer, &r.v);
  r.msg = kvcgo_message(r.status);
  return r;
}

// The tables (kvc_batch_*): the caller's Go slices are borrowed for the call
// (cgo's rule); the sizes come back by value, so nothing escapes to the heap.
typedef struct { size_t needed; kvc_status_t status; char *msg; } kvcgo_table_result;

static kvcgo_table_result kvcgo_batch_block_table(uintptr_t cache, uint32_t group,
                                                  const uint64_t *ids, size_t count,
                                                  int32_t *table, size_t max_blocks, int32_t pad) {
  kvcgo_table_result r;
  r.needed = 0;
  r.status = kvc_batch_block_table((const kvc_cache_t *)cache, group, ids, count, table,
                                   max_blocks, pad, &r.needed);
  r.msg = kvcgo_message(r.status);
  return r;
}

static kvcgo_table_result kvcgo_batch_block_table_csr(uintptr_t cache, uint32_t group,
                                                      const uint64_t *ids, size_t count,
                                                      int32_t *indptr, int32_t *indices,
                                                      size_t indices_capacity,
                                                      int32_t *last_page_len) {
  kvcgo_table_result r;
  r.needed = 0;
  r.status = kvc_batch_block_table_csr((const kvc_cache_t *)cache, group, ids, count, indptr,
                                       indices, indices_capacity, last_page_len, &r.needed);
  r.msg = kvcgo_message(r.status);
  return r;
}

static kvcgo_table_result kvcgo_batch_slot_mapping(uintptr_t cache, uint32_t group,
                                                   const uint64_t *ids, size_t count,
                                                   int64_t *slots, size_t capacity,
                                                   int32_t *new_tokens) {
  kvcgo_table_result r;
  r.needed = 0;
  r.status = kvc_batch_slot_mapping((kvc_cache_t *)cache, group, ids, count, slots, capacity,
                                    &r.needed, new_tokens);
  r.msg = kvcgo_message(r.status);
  return r;
}

static kvcgo_table_result kvcgo_batch_sequence_lengths(uintptr_t cache, const uint64_t *ids,
                                                       size_t count, int32_t *lengths) {
  kvcgo_table_result r;
  r.needed = 0;
  r.status = kvc_batch_sequence_lengths((const kvc_cache_t *)cache, ids, count, lengths);
  r.msg = kvcgo_message(r.status);
  return r;
}
*/
import "C"

import (
	"unsafe"

	"kvcache/kvc"
)

// resultError is the *Error of a helper's status and message (nil for
// KVC_OK); it frees the message.
func resultError(op string, status C.kvc_status_t, msg *C.char) error {
	if status == C.KVC_OK {
		return nil
	}
	m := "(out of memory copying the error message)"
	if msg != nil {
		m = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return &Error{Status: Status(status), Message: m, Op: op}
}

func describeCache(h kvc.Cache, op string) (CacheDesc, error) {
	r := C.kvcgo_cache_describe(C.uintptr_t(h))
	if err := resultError(op, r.status, r.msg); err != nil {
		return CacheDesc{}, err
	}
	return CacheDesc{
		DeviceKind:         DeviceKind(r.v.device_kind),
		DeviceOrdinal:      int32(r.v.device_ordinal),
		DType:              DType(r.v.dtype),
		Layout:             Layout(r.v.layout),
		NumLayers:          uint32(r.v.num_layers),
		NumGroups:          uint32(r.v.num_groups),
		NumPools:           uint32(r.v.num_pools),
		TokensPerBlock:     uint32(r.v.tokens_per_block),
		KVFactor:           uint32(r.v.kv_factor),
		NumBlocks:          uint64(r.v.num_blocks),
		TokenCapacity:      uint64(r.v.token_capacity),
		PrimaryBytes:       uint64(r.v.primary_bytes),
		HostCacheBytes:     uint64(r.v.host_cache_bytes),
		DeviceFreeBytes:    uint64(r.v.device_free_bytes),
		DeviceTotalBytes:   uint64(r.v.device_total_bytes),
		NumResources:       uint32(r.v.num_resources),
		NumStateSlots:      uint32(r.v.num_state_slots),
		StateBytes:         uint64(r.v.state_bytes),
		NumRanks:           uint32(r.v.num_ranks),
		MaxHeadReplication: uint32(r.v.max_head_replication),
		NumKVResources:     uint32(r.v.num_kv_resources),
	}, nil
}

// planResize: kvc_cache_plan_resize with the SWIG inputs struct at inputs
// and room for numPools pool counts.
func planResize(h kvc.Cache, op string, inputs uintptr, numPools uint32) (ResizePlan, error) {
	pools := make([]uint64, numPools+1)
	r := C.kvcgo_cache_plan_resize(C.uintptr_t(h), C.uintptr_t(inputs),
		(*C.uint64_t)(unsafe.Pointer(&pools[0])), C.size_t(numPools))
	if err := resultError(op, r.status, r.msg); err != nil {
		return ResizePlan{}, err
	}
	return ResizePlan{
		FreeBytes:       uint64(r.v.free_bytes),
		MemForPaged:     uint64(r.v.mem_for_paged),
		PrimaryBytes:    uint64(r.v.primary_bytes),
		MaxPrimaryBytes: uint64(r.v.max_primary_bytes),
		BlocksPerGroup:  uint64(r.v.blocks_per_group),
		TokenCapacity:   uint64(r.v.token_capacity),
		NumBlocks:       uint64(r.v.num_blocks),
		TotalBytes:      uint64(r.v.total_bytes),
		PoolBlocks:      pools[:uint32(r.v.num_pools)],
	}, nil
}

func describeGroup(h kvc.Cache, op string, group uint32) (GroupDesc, error) {
	r := C.kvcgo_cache_describe_group(C.uintptr_t(h), C.uint32_t(group))
	if err := resultError(op, r.status, r.msg); err != nil {
		return GroupDesc{}, err
	}
	return GroupDesc{
		Window:          uint32(r.v.window),
		KVHeads:         uint32(r.v.kv_heads),
		HeadDim:         uint32(r.v.head_dim),
		NumLayers:       uint32(r.v.num_layers),
		Pool:            uint32(r.v.pool),
		BlockBytes:      uint64(r.v.block_bytes),
		BytesPerToken:   uint64(r.v.bytes_per_token),
		KVHeadsPerRank:  uint32(r.v.kv_heads_per_rank),
		HeadReplication: uint32(r.v.head_replication),
		DType:           DType(r.v.dtype),
		KVFactor:        uint32(r.v.kv_factor),
		Layout:          Layout(r.v.layout),
	}, nil
}

func describePool(h kvc.Cache, op string, pool uint32) (PoolDesc, error) {
	r := C.kvcgo_cache_describe_pool(C.uintptr_t(h), C.uint32_t(pool))
	if err := resultError(op, r.status, r.msg); err != nil {
		return PoolDesc{}, err
	}
	return PoolDesc{
		NumGroups:  uint32(r.v.num_groups),
		BlockBytes: uint64(r.v.block_bytes),
		NumBlocks:  uint64(r.v.num_blocks),
		Bytes:      uint64(r.v.bytes),
		Base:       uintptr(r.v.base),
	}, nil
}

func layerView(h kvc.Cache, op string, layer uint32) (LayerView, error) {
	r := C.kvcgo_cache_layer_view(C.uintptr_t(h), C.uint32_t(layer))
	if err := resultError(op, r.status, r.msg); err != nil {
		return LayerView{}, err
	}
	return layerViewOf(&r), nil
}

func layerViewRank(h kvc.Cache, op string, rank, layer uint32) (LayerView, error) {
	r := C.kvcgo_cache_layer_view_rank(C.uintptr_t(h), C.uint32_t(rank), C.uint32_t(layer))
	if err := resultError(op, r.status, r.msg); err != nil {
		return LayerView{}, err
	}
	return layerViewOf(&r), nil
}

func layerViewOf(r *C.kvc_layer_view_t_result) LayerView {
	return LayerView{
		Group:          uint32(r.v.group),
		Pool:           uint32(r.v.pool),
		DType:          DType(r.v.dtype),
		Layout:         Layout(r.v.layout),
		KVHeads:        uint32(r.v.kv_heads),
		HeadDim:        uint32(r.v.head_dim),
		TokensPerBlock: uint32(r.v.tokens_per_block),
		KVFactor:       uint32(r.v.kv_factor),
		ElemSize:       uint32(r.v.elem_size),
		Base:           uintptr(r.v.base),
		NumBlocks:      uint64(r.v.num_blocks),
		BlockStride:    uint64(r.v.block_stride),
		KVStride:       uint64(r.v.kv_stride),
		TokenStride:    uint64(r.v.token_stride),
		HeadStride:     uint64(r.v.head_stride),
		Rank:           uint32(r.v.rank),
		FirstKVHead:    uint32(r.v.first_kv_head),
		TotalKVHeads:   uint32(r.v.total_kv_heads),
	}
}

func cacheStats(h kvc.Cache, op string) (Stats, error) {
	r := C.kvcgo_cache_get_stats(C.uintptr_t(h))
	if err := resultError(op, r.status, r.msg); err != nil {
		return Stats{}, err
	}
	return Stats{
		NumBlocks:     uint64(r.v.num_blocks),
		FreeBlocks:    uint64(r.v.free_blocks),
		CachedBlocks:  uint64(r.v.cached_blocks),
		InUseBlocks:   uint64(r.v.in_use_blocks),
		ReusedBlocks:  uint64(r.v.reused_blocks),
		MissedBlocks:  uint64(r.v.missed_blocks),
		HitRate:       float64(r.v.hit_rate),
		EvictedBlocks: uint64(r.v.evicted_blocks),
		NumSequences:  uint64(r.v.num_sequences),
		NumPinned:     uint64(r.v.num_pinned),
		TreeNodes:     uint64(r.v.tree_nodes),

		OffloadedBlocks:  uint64(r.v.offloaded_blocks),
		OnboardedBlocks:  uint64(r.v.onboarded_blocks),
		OffloadedBytes:   uint64(r.v.offloaded_bytes),
		OnboardedBytes:   uint64(r.v.onboarded_bytes),
		HostBlocks:       uint64(r.v.host_blocks),
		HostFreeBlocks:   uint64(r.v.host_free_blocks),
		HostCachedBlocks: uint64(r.v.host_cached_blocks),
	}, nil
}

func groupStats(h kvc.Cache, op string, group uint32) (GroupStats, error) {
	r := C.kvcgo_cache_get_group_stats(C.uintptr_t(h), C.uint32_t(group))
	if err := resultError(op, r.status, r.msg); err != nil {
		return GroupStats{}, err
	}
	return GroupStats{
		Pool:           uint32(r.v.pool),
		InUseBlocks:    uint64(r.v.in_use_blocks),
		CachedBlocks:   uint64(r.v.cached_blocks),
		PoolFreeBlocks: uint64(r.v.pool_free_blocks),
		ReusedBlocks:   uint64(r.v.reused_blocks),
		MissedBlocks:   uint64(r.v.missed_blocks),
		EvictedBlocks:  uint64(r.v.evicted_blocks),
		ReleasedBlocks: uint64(r.v.released_blocks),
	}, nil
}

func describeSequence(h kvc.Cache, op string, id uint64) (SequenceDesc, error) {
	r := C.kvcgo_sequence_describe(C.uintptr_t(h), C.uint64_t(id))
	if err := resultError(op, r.status, r.msg); err != nil {
		return SequenceDesc{}, err
	}
	return SequenceDesc{
		PromptPriority:  uint32(r.v.prompt_priority),
		DecodePriority:  uint32(r.v.decode_priority),
		NumTokens:       uint64(r.v.num_tokens),
		PromptTokens:    uint64(r.v.prompt_tokens),
		CachedTokens:    uint64(r.v.cached_tokens),
		CommittedTokens: uint64(r.v.committed_tokens),
		NumBlocks:       uint64(r.v.num_blocks),
	}, nil
}

func statefulView(h kvc.Stateful, op string, layer uint32) (StatefulView, error) {
	r := C.kvcgo_stateful_layer_view(C.uintptr_t(h), C.uint32_t(layer))
	if err := resultError(op, r.status, r.msg); err != nil {
		return StatefulView{}, err
	}
	return StatefulView{
		Layer:           uint32(r.v.layer),
		Key:             uintptr(r.v.key),
		Value:           uintptr(r.v.value),
		RowStride:       uint64(r.v.row_stride),
		HeadStride:      uint64(r.v.head_stride),
		TokenStride:     uint64(r.v.token_stride),
		Batch:           uint32(r.v.batch),
		Capacity:        uint32(r.v.capacity),
		KVHeads:         uint32(r.v.kv_heads),
		HeadDim:         uint32(r.v.head_dim),
		DType:           DType(r.v.dtype),
		Layout:          Layout(r.v.layout),
		MaxLength:       uint32(r.v.max_length),
		Lengths:         uintptr(unsafe.Pointer(r.v.lengths)),
		BeamTable:       uintptr(unsafe.Pointer(r.v.beam_table)),
		BeamTableStride: uint32(r.v.beam_table_stride),
	}, nil
}

func statefulStats(h kvc.Stateful, op string) (StatefulStats, error) {
	r := C.kvcgo_stateful_get_stats(C.uintptr_t(h))
	if err := resultError(op, r.status, r.msg); err != nil {
		return StatefulStats{}, err
	}
	return StatefulStats{
		NumLayers:          uint32(r.v.num_layers),
		BytesAllocated:     uint64(r.v.bytes_allocated),
		PeakBytes:          uint64(r.v.peak_bytes),
		KVBytes:            uint64(r.v.kv_bytes),
		TableBytes:         uint64(r.v.table_bytes),
		Reallocations:      uint64(r.v.reallocations),
		Reorders:           uint64(r.v.reorders),
		TableEntriesCopied: uint64(r.v.table_entries_copied),
		Compactions:        uint64(r.v.compactions),
	}, nil
}

func statefulLayerStats(h kvc.Stateful, op string, layer uint32) (StatefulLayerStats, error) {
	r := C.kvcgo_stateful_get_layer_stats(C.uintptr_t(h), C.uint32_t(layer))
	if err := resultError(op, r.status, r.msg); err != nil {
		return StatefulLayerStats{}, err
	}
	return StatefulLayerStats{
		Layer:            uint32(r.v.layer),
		Capacity:         uint32(r.v.capacity),
		GrowthOffset:     uint32(r.v.growth_offset),
		Bytes:            uint64(r.v.bytes),
		Reallocations:    uint64(r.v.reallocations),
		LastGrowthLength: uint32(r.v.last_growth_length),
		MaxLength:        uint32(r.v.max_length),
	}, nil
}

// The table calls: ids is not empty; a slice argument may be empty (nil
// reaches C). needed is what the call reports (the size a retry needs on
// ErrBufferTooSmall).

func blockTable(h kvc.Cache, op string, group uint32, ids []uint64, table []int32, maxBlocks int, pad int32) (needed uint64, err error) {
	r := C.kvcgo_batch_block_table(C.uintptr_t(h), C.uint32_t(group), cUint64s(ids), C.size_t(len(ids)),
		cInt32s(table), C.size_t(maxBlocks), C.int32_t(pad))
	return uint64(r.needed), resultError(op, r.status, r.msg)
}

func blockTableCSR(h kvc.Cache, op string, group uint32, ids []uint64, indptr, indices, lastPageLen []int32) (total uint64, err error) {
	r := C.kvcgo_batch_block_table_csr(C.uintptr_t(h), C.uint32_t(group), cUint64s(ids), C.size_t(len(ids)),
		cInt32s(indptr), cInt32s(indices), C.size_t(len(indices)), cInt32s(lastPageLen))
	return uint64(r.needed), resultError(op, r.status, r.msg)
}

func slotMapping(h kvc.Cache, op string, group uint32, ids []uint64, slots []int64, newTokens []int32) (n uint64, err error) {
	var s *C.int64_t
	if len(slots) > 0 {
		s = (*C.int64_t)(unsafe.Pointer(&slots[0]))
	}
	r := C.kvcgo_batch_slot_mapping(C.uintptr_t(h), C.uint32_t(group), cUint64s(ids), C.size_t(len(ids)),
		s, C.size_t(len(slots)), cInt32s(newTokens))
	return uint64(r.needed), resultError(op, r.status, r.msg)
}

func sequenceLengths(h kvc.Cache, op string, ids []uint64, lengths []int32) error {
	r := C.kvcgo_batch_sequence_lengths(C.uintptr_t(h), cUint64s(ids), C.size_t(len(ids)), cInt32s(lengths))
	return resultError(op, r.status, r.msg)
}

func cUint64s(s []uint64) *C.uint64_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.uint64_t)(unsafe.Pointer(&s[0]))
}

func cInt32s(s []int32) *C.int32_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&s[0]))
}

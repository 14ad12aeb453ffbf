package kvcache

import (
	"sync"

	"kvcache/kvc"
)

// Stream is a CUDA stream (a cudaStream_t as an address); 0 is the default
// stream. On a CPU cache streams are ignored and the work is done before
// the call returns.
type Stream uintptr

// Cache is a KV cache (kvc_cache_t). It owns its block pool, allocated once
// at NewCache: Close it when done; nothing frees it otherwise (there is no
// finalizer). All methods may be called from any number of goroutines;
// Close waits for the calls in flight, and every method called after Close
// returns ErrClosed.
type Cache struct {
	mu sync.RWMutex // read-held by calls, write-held by Close
	h  kvc.Cache
}

// NewCache validates cfg, sizes and allocates the primary pool and creates
// a cache. The cache keeps its own copy of cfg.
func NewCache(cfg *Config) (*Cache, error) {
	if cfg == nil {
		return nil, invalidArgument("kvc_cache_create", "cfg is a nil *kvcache.Config")
	}
	var h kvc.Cache
	err := cfg.with("kvc_cache_create", func(ch kvc.Config) error { return kvc.Kvc_cache_create(ch, &h) })
	if err != nil {
		return nil, err
	}
	return &Cache{h: h}, nil
}

// Close frees the cache and its pools, after the calls in flight on other
// goroutines return. It is idempotent and returns nil (an ErrInvalidArgument
// error on a nil *Cache). Device work the caller enqueued on a stream must
// be finished first.
func (c *Cache) Close() error {
	if c == nil {
		return nilReceiver("kvcache.Cache.Close", "Cache")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h != 0 {
		kvc.Kvc_cache_destroy(c.h)
		c.h = 0
	}
	return nil
}

// with runs f with the handle under the read lock, so that Close waits for
// it; on a closed cache it returns closedError(op) and f does not run. Every
// method reaches the handle through with or withCache: locking and
// unlocking live here only.
func (c *Cache) with(op string, f func(h kvc.Cache) error) error {
	_, err := withCache(c, op, func(h kvc.Cache) (struct{}, error) { return struct{}{}, f(h) })
	return err
}

// argError is the error of op for a bad argument, unless c is nil or
// closed: those errors come first, as for every other call.
func (c *Cache) argError(op, message string) error {
	return c.with(op, func(kvc.Cache) error { return invalidArgument(op, message) })
}

// withCache is with for a call that returns a value: the zero T with
// closedError(op) on a closed cache (an ErrInvalidArgument error on a nil
// one), else what f returns.
func withCache[T any](c *Cache, op string, f func(h kvc.Cache) (T, error)) (T, error) {
	if c == nil {
		var zero T
		return zero, nilReceiver(op, "Cache")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.h == 0 {
		var zero T
		return zero, closedError(op)
	}
	return f(c.h)
}

// CacheDesc summarizes a cache (kvc_cache_desc_t).
type CacheDesc struct {
	DeviceKind       DeviceKind
	DeviceOrdinal    int32
	DType            DType
	Layout           Layout
	NumLayers        uint32
	NumGroups        uint32 // layer groups (window, kv heads, head dim)
	NumPools         uint32
	TokensPerBlock   uint32
	KVFactor         uint32
	NumBlocks        uint64 // primary blocks over all pools
	TokenCapacity    uint64 // tokens every layer can hold at once
	PrimaryBytes     uint64
	HostCacheBytes   uint64
	DeviceFreeBytes  uint64 // free device memory seen at sizing (CUDA)
	DeviceTotalBytes uint64 // total device memory (CUDA)
	NumResources     uint32 // state resources (state.h)
	NumStateSlots    uint32 // slots of every state resource
	StateBytes       uint64 // bytes of all state slots (out of the budget)
	// Tensor parallelism (Config.SetRanks): the ranks, 1 without; the block
	// counts and bytes above are one rank's.
	NumRanks           uint32
	MaxHeadReplication uint32 // the most ranks holding one kv head; 1: none replicated
	NumKVResources     uint32 // paged KV resources (kv_resource.h); 0 with the global shape setters
}

// Describe returns the summary of the cache.
func (c *Cache) Describe() (CacheDesc, error) {
	const op = "kvc_cache_describe"
	return withCache(c, op, func(h kvc.Cache) (CacheDesc, error) { return describeCache(h, op) })
}

// GroupDesc describes a layer group (kvc_group_desc_t).
type GroupDesc struct {
	Window          uint32 // attention window in tokens; 0 = full
	KVHeads         uint32
	HeadDim         uint32
	NumLayers       uint32
	Pool            uint32 // pool its blocks come from
	BlockBytes      uint64 // one block, all layers of the group
	BytesPerToken   uint64
	KVHeadsPerRank  uint32 // kv heads each rank holds (KVHeads with one rank)
	HeadReplication uint32 // ranks holding each of those heads (1: split)
	DType           DType  // element type of the group's layers (KV resources may differ)
	KVFactor        uint32 // 2 (K and V) or 1
	Layout          Layout // block layout of the group
}

// DescribeGroup describes layer group group (0 <= group < NumGroups).
func (c *Cache) DescribeGroup(group uint32) (GroupDesc, error) {
	const op = "kvc_cache_describe_group"
	return withCache(c, op, func(h kvc.Cache) (GroupDesc, error) { return describeGroup(h, op, group) })
}

// PoolDesc describes a block pool (kvc_pool_desc_t).
type PoolDesc struct {
	NumGroups  uint32 // layer groups drawing from the pool
	BlockBytes uint64
	NumBlocks  uint64
	Bytes      uint64
	Base       uintptr // first byte (a device address on CUDA); owned by the cache
}

// DescribePool describes pool pool (0 <= pool < NumPools).
func (c *Cache) DescribePool(pool uint32) (PoolDesc, error) {
	const op = "kvc_cache_describe_pool"
	return withCache(c, op, func(h kvc.Cache) (PoolDesc, error) { return describePool(h, op, pool) })
}

// LayerView says where one layer's K and V live, as a strided tensor that
// external kernels address (kvc_layer_view_t): element (block b, kv k,
// token t, head h, dim d) is at Base + b*BlockStride + k*KVStride +
// t*TokenStride + h*HeadStride + d*ElemSize bytes.
type LayerView struct {
	Group          uint32
	Pool           uint32
	DType          DType
	Layout         Layout
	KVHeads        uint32
	HeadDim        uint32
	TokensPerBlock uint32
	KVFactor       uint32
	ElemSize       uint32
	Base           uintptr // byte 0 of block 0 of this layer (device address on CUDA)
	NumBlocks      uint64
	BlockStride    uint64
	KVStride       uint64
	TokenStride    uint64
	HeadStride     uint64
	Rank           uint32 // the rank whose pool this is (0 with one rank)
	FirstKVHead    uint32 // the model's kv head at head 0 of the view
	TotalKVHeads   uint32 // the layer's kv heads in the model
}

// LayerView returns the tensor view of layer layer (0 <= layer < NumLayers).
// The addresses stay valid until Close.
func (c *Cache) LayerView(layer uint32) (LayerView, error) {
	const op = "kvc_cache_layer_view"
	return withCache(c, op, func(h kvc.Cache) (LayerView, error) { return layerView(h, op, layer) })
}

// LayerViewRank returns the tensor view of layer layer on rank rank
// (kvc_cache_layer_view_rank; tensor parallelism, Config.SetRanks): the
// rank's pool and its share of the heads.
func (c *Cache) LayerViewRank(rank, layer uint32) (LayerView, error) {
	const op = "kvc_cache_layer_view_rank"
	return withCache(c, op, func(h kvc.Cache) (LayerView, error) { return layerViewRank(h, op, rank, layer) })
}

// Stats are the counts of a cache's blocks and of its reuse
// (kvc_cache_stats_t). FreeBlocks + CachedBlocks + InUseBlocks == NumBlocks
// (primary pools); HostFreeBlocks + HostCachedBlocks == HostBlocks (the host
// tier, whose blocks are never in use).
type Stats struct {
	NumBlocks     uint64
	FreeBlocks    uint64  // on a free list
	CachedBlocks  uint64  // unused but reusable (evictable)
	InUseBlocks   uint64  // held by sequences or pins
	ReusedBlocks  uint64  // prompt block positions found cached by adds
	MissedBlocks  uint64  // prompt block positions adds had to compute
	HitRate       float64 // Reused / (Reused + Missed); 0 before any add
	EvictedBlocks uint64  // left the tree to make room (offloads apart)
	NumSequences  uint64
	NumPinned     uint64
	TreeNodes     uint64 // both tiers

	OffloadedBlocks  uint64 // copied to the host tier on eviction
	OnboardedBlocks  uint64 // copied back from the host tier on a hit
	OffloadedBytes   uint64
	OnboardedBytes   uint64
	HostBlocks       uint64 // host-tier blocks over all pools; 0 without a host tier
	HostFreeBlocks   uint64 // host-tier blocks holding nothing
	HostCachedBlocks uint64 // host-tier blocks holding offloaded, reusable KV
}

// Stats returns the current statistics.
func (c *Cache) Stats() (Stats, error) {
	const op = "kvc_cache_get_stats"
	return withCache(c, op, func(h kvc.Cache) (Stats, error) { return cacheStats(h, op) })
}

// GroupStats are the counts of one layer group's blocks and of its reuse
// (kvc_group_stats_t).
//
// A full-attention group holds a block for every block position of every
// sequence. A windowed group (window W, see Config.SetAttentionWindows)
// holds only the blocks covering the W tokens its next token attends to and
// lets the others go as commits move a sequence forward (ReleasedBlocks;
// committed ones stay cached until evicted). Its reuse counts only the
// positions it needs: when an add reuses a prefix, the positions before the
// window that ends at the reuse point count neither as reused nor as
// missed, so ReusedBlocks + MissedBlocks may differ between the groups of
// one cache.
//
// Groups whose blocks have the same size share a pool, so free blocks
// belong to the pool: PoolFreeBlocks is the same for every group of a pool.
type GroupStats struct {
	Pool           uint32 // index of the pool the group draws from (DescribePool)
	InUseBlocks    uint64 // blocks of this group held by sequences or pins
	CachedBlocks   uint64 // blocks of this group cached in the tree (evictable)
	PoolFreeBlocks uint64 // free blocks of that pool, shared with the pool's other groups
	ReusedBlocks   uint64 // prompt block positions reused from the tree
	MissedBlocks   uint64 // prompt block positions computed
	EvictedBlocks  uint64 // blocks of this group evicted
	ReleasedBlocks uint64 // blocks a windowed group let go because they left the window
}

// GroupStats returns the current statistics of layer group group
// (0 <= group < NumGroups). A group out of range is an ErrInvalidArgument
// error.
func (c *Cache) GroupStats(group uint32) (GroupStats, error) {
	const op = "kvc_cache_get_group_stats"
	return withCache(c, op, func(h kvc.Cache) (GroupStats, error) { return groupStats(h, op, group) })
}

// AdvanceClock moves the manual retention clock forward by milliseconds;
// expired retention priorities revert to the default at once. It fails with
// ErrInvalidState on a cache reading the monotonic clock (see
// Config.SetManualClock).
func (c *Cache) AdvanceClock(milliseconds uint64) error {
	const op = "kvc_cache_advance_clock"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_cache_advance_clock(h, milliseconds))
	})
}

// MakeRoom evicts cached blocks ahead of need until blockSets block sets
// are free, as the next adds and extends would (the same victims; a host
// tier takes those at or above its offload priority, its copies on
// stream); call it while the device runs a step. Blocks in use never go:
// asking for more than the cached blocks can free is no error. It returns
// the block sets free afterwards (kvc_cache_make_room).
func (c *Cache) MakeRoom(blockSets uint64, stream Stream) (free uint64, err error) {
	const op = "kvc_cache_make_room"
	return withCache(c, op, func(h kvc.Cache) (uint64, error) {
		err = kvc.Kvc_cache_make_room(h, blockSets, uintptr(stream), &free)
		return free, wrap(op, err)
	})
}

// ResetReuse evicts every cached block; it fails with StatusInvalidState
// while any block is in use.
func (c *Cache) ResetReuse() error {
	const op = "kvc_cache_reset_reuse"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_cache_reset_reuse(h))
	})
}

// Check runs the library's invariant checker; a broken invariant is a
// StatusInternal error naming it.
func (c *Cache) Check() error {
	const op = "kvc_cache_check"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_cache_check(h))
	})
}

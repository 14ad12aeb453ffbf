package kvcache

import (
	"sync"

	"kvcache/kvc"
)

// DType is the element type of the stored K/V (kvc_dtype_t).
type DType uint32

// Element types (enum kvc_dtype).
const (
	DTypeF32     DType = 1
	DTypeF16     DType = 2
	DTypeBF16    DType = 3
	DTypeFP8E4M3 DType = 4
)

// Layout is the order of tokens and heads inside a block (kvc_layout_t).
type Layout uint32

// Block layouts (enum kvc_layout).
const (
	LayoutNHD Layout = 1
	LayoutHND Layout = 2
)

// DeviceKind says where the primary pool lives (kvc_device_kind_t).
type DeviceKind uint32

// Device kinds (enum kvc_device_kind).
const (
	DeviceCPU  DeviceKind = 1
	DeviceCUDA DeviceKind = 2
)

// Config is a cache configuration (kvc_config_t): typed setters and
// getters, validated as a whole by Validate and NewCache. It owns C memory:
// Close it when done (a cache keeps its own copy, so the config may be
// closed right after NewCache). Methods after Close return ErrClosed.
type Config struct {
	mu sync.Mutex
	h  kvc.Config
}

// NewConfig creates a config holding the defaults (see config.h): bf16, NHD,
// 16 tokens per block, full attention, CPU device, reuse on. The number of
// layers, KV heads and head dim must be set, and on the CPU backend a
// memory bound (SetPrimaryBytes or SetMaxTokens).
func NewConfig() (*Config, error) {
	var h kvc.Config
	if err := kvc.Kvc_config_create(&h); err != nil {
		return nil, wrap("kvc_config_create", err)
	}
	return &Config{h: h}, nil
}

// Close frees the config. It is idempotent and returns nil (an
// ErrInvalidArgument error on a nil *Config).
func (c *Config) Close() error {
	if c == nil {
		return nilReceiver("kvcache.Config.Close", "Config")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h != 0 {
		kvc.Kvc_config_destroy(c.h)
		c.h = 0
	}
	return nil
}

// with runs f on the live handle under the config's lock; ErrClosed after
// Close, an ErrInvalidArgument error on a nil *Config.
func (c *Config) with(op string, f func(h kvc.Config) error) error {
	if c == nil {
		return nilReceiver(op, "Config")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == 0 {
		return closedError(op)
	}
	return wrap(op, f(c.h))
}

// Clone copies the config; the copy must be closed too.
func (c *Config) Clone() (*Config, error) {
	var out kvc.Config
	err := c.with("kvc_config_clone", func(h kvc.Config) error { return kvc.Kvc_config_clone(h, &out) })
	if err != nil {
		return nil, err
	}
	return &Config{h: out}, nil
}

// Validate checks the config as a whole, as NewCache will.
func (c *Config) Validate() error {
	return c.with("kvc_config_validate", func(h kvc.Config) error { return kvc.Kvc_config_validate(h) })
}

// SetNumLayers sets the number of attention layers (> 0).
func (c *Config) SetNumLayers(n uint32) error {
	return c.with("kvc_config_set_num_layers", func(h kvc.Config) error { return kvc.Kvc_config_set_num_layers(h, n) })
}

// NumLayers is the number of attention layers; 0 if unset.
func (c *Config) NumLayers() (n uint32, err error) {
	err = c.with("kvc_config_get_num_layers", func(h kvc.Config) error { return kvc.Kvc_config_get_num_layers(h, &n) })
	return n, err
}

// SetKVHeads sets the same number of KV heads (> 0) for every layer.
func (c *Config) SetKVHeads(n uint32) error {
	return c.with("kvc_config_set_kv_heads", func(h kvc.Config) error { return kvc.Kvc_config_set_kv_heads(h, n) })
}

// SetKVHeadsPerLayer sets the KV heads of each layer; len(heads) must equal
// the number of layers (checked by Validate).
func (c *Config) SetKVHeadsPerLayer(heads []uint32) error {
	return c.with("kvc_config_set_kv_heads_per_layer", func(h kvc.Config) error {
		return kvc.Kvc_config_set_kv_heads_per_layer(h, firstUint32(heads), uint64(len(heads)))
	})
}

// KVHeads is the number of KV heads of one layer.
func (c *Config) KVHeads(layer uint32) (n uint32, err error) {
	err = c.with("kvc_config_get_kv_heads", func(h kvc.Config) error { return kvc.Kvc_config_get_kv_heads(h, layer, &n) })
	return n, err
}

// SetHeadDim sets the head dimension (> 0).
func (c *Config) SetHeadDim(n uint32) error {
	return c.with("kvc_config_set_head_dim", func(h kvc.Config) error { return kvc.Kvc_config_set_head_dim(h, n) })
}

// HeadDim is the head dimension; 0 if unset.
func (c *Config) HeadDim() (n uint32, err error) {
	err = c.with("kvc_config_get_head_dim", func(h kvc.Config) error { return kvc.Kvc_config_get_head_dim(h, &n) })
	return n, err
}

// SetDType sets the element type of the stored K/V.
func (c *Config) SetDType(t DType) error {
	return c.with("kvc_config_set_dtype", func(h kvc.Config) error { return kvc.Kvc_config_set_dtype(h, uint32(t)) })
}

// DType is the element type of the stored K/V.
func (c *Config) DType() (t DType, err error) {
	var v uint32
	err = c.with("kvc_config_get_dtype", func(h kvc.Config) error { return kvc.Kvc_config_get_dtype(h, &v) })
	return DType(v), err
}

// SetKVFactor sets 2 to store K and V, 1 when K and V are one tensor (MLA).
func (c *Config) SetKVFactor(n uint32) error {
	return c.with("kvc_config_set_kv_factor", func(h kvc.Config) error { return kvc.Kvc_config_set_kv_factor(h, n) })
}

// KVFactor is 1 or 2.
func (c *Config) KVFactor() (n uint32, err error) {
	err = c.with("kvc_config_get_kv_factor", func(h kvc.Config) error { return kvc.Kvc_config_get_kv_factor(h, &n) })
	return n, err
}

// SetLayout sets the block layout.
func (c *Config) SetLayout(l Layout) error {
	return c.with("kvc_config_set_layout", func(h kvc.Config) error { return kvc.Kvc_config_set_layout(h, uint32(l)) })
}

// Layout is the block layout.
func (c *Config) Layout() (l Layout, err error) {
	var v uint32
	err = c.with("kvc_config_get_layout", func(h kvc.Config) error { return kvc.Kvc_config_get_layout(h, &v) })
	return Layout(v), err
}

// SetTokensPerBlock sets the tokens per block: a power of two > 1, at most
// 1024.
func (c *Config) SetTokensPerBlock(n uint32) error {
	return c.with("kvc_config_set_tokens_per_block", func(h kvc.Config) error { return kvc.Kvc_config_set_tokens_per_block(h, n) })
}

// TokensPerBlock is the tokens per block.
func (c *Config) TokensPerBlock() (n uint32, err error) {
	err = c.with("kvc_config_get_tokens_per_block", func(h kvc.Config) error { return kvc.Kvc_config_get_tokens_per_block(h, &n) })
	return n, err
}

// SetAttentionWindows sets the attention window per layer in tokens (0 =
// full attention). The list repeats over the layers; an empty list resets
// every layer to full attention.
func (c *Config) SetAttentionWindows(windows []uint32) error {
	return c.with("kvc_config_set_attention_windows", func(h kvc.Config) error {
		return kvc.Kvc_config_set_attention_windows(h, firstUint32(windows), uint64(len(windows)))
	})
}

// AttentionWindow is the window of one layer after repetition (0 = full).
func (c *Config) AttentionWindow(layer uint32) (n uint32, err error) {
	err = c.with("kvc_config_get_attention_window", func(h kvc.Config) error { return kvc.Kvc_config_get_attention_window(h, layer, &n) })
	return n, err
}

// SetDevice sets the device of the primary pool: DeviceCPU (ordinal 0) or
// DeviceCUDA with a device ordinal.
func (c *Config) SetDevice(kind DeviceKind, ordinal int32) error {
	return c.with("kvc_config_set_device", func(h kvc.Config) error { return kvc.Kvc_config_set_device(h, uint32(kind), ordinal) })
}

// SetRanks makes one cache over len(ordinals) tensor-parallel ranks
// (kvc_config_set_ranks): rank r on device ordinals[r] of kind (CUDA
// device ordinals; on DeviceCPU distinct names of host pools). KV heads are
// split across the ranks, or replicated when fewer than the ranks; one set
// of block ids valid on every rank; every byte budget is per rank.
// SetDevice goes back to one rank.
func (c *Config) SetRanks(kind DeviceKind, ordinals []int32) error {
	return c.with("kvc_config_set_ranks", func(h kvc.Config) error {
		return kvc.Kvc_config_set_ranks(h, uint32(kind), firstInt32(ordinals), uint32(len(ordinals)))
	})
}

// Ranks are the ranks' ordinals (one rank: the device ordinal).
func (c *Config) Ranks() ([]int32, error) {
	out := make([]int32, 64)
	var n uint32
	err := c.with("kvc_config_get_ranks", func(h kvc.Config) error {
		return kvc.Kvc_config_get_ranks(h, &out[0], uint32(len(out)), &n)
	})
	if err != nil {
		return nil, err
	}
	return out[:n], nil
}

// Device is the device of the primary pool.
func (c *Config) Device() (kind DeviceKind, ordinal int32, err error) {
	var k uint32
	err = c.with("kvc_config_get_device", func(h kvc.Config) error { return kvc.Kvc_config_get_device(h, &k, &ordinal) })
	return DeviceKind(k), ordinal, err
}

// SetPrimaryBytes bounds the primary pool in bytes (0 = no byte bound).
func (c *Config) SetPrimaryBytes(n uint64) error {
	return c.with("kvc_config_set_primary_bytes", func(h kvc.Config) error { return kvc.Kvc_config_set_primary_bytes(h, n) })
}

// PrimaryBytes is the byte bound of the primary pool (0 = none).
func (c *Config) PrimaryBytes() (n uint64, err error) {
	err = c.with("kvc_config_get_primary_bytes", func(h kvc.Config) error { return kvc.Kvc_config_get_primary_bytes(h, &n) })
	return n, err
}

// SetMaxPrimaryBytes sets the most primary bytes Cache.Resize may grow the
// pools to (0 = the budget at creation); the pools reserve that much
// address space at creation.
func (c *Config) SetMaxPrimaryBytes(n uint64) error {
	return c.with("kvc_config_set_max_primary_bytes", func(h kvc.Config) error { return kvc.Kvc_config_set_max_primary_bytes(h, n) })
}

// MaxPrimaryBytes is the ceiling of Cache.Resize (0 = the budget at creation).
func (c *Config) MaxPrimaryBytes() (n uint64, err error) {
	err = c.with("kvc_config_get_max_primary_bytes", func(h kvc.Config) error { return kvc.Kvc_config_get_max_primary_bytes(h, &n) })
	return n, err
}

// SetMaxTokens bounds the primary pool in tokens per layer (0 = none).
func (c *Config) SetMaxTokens(n uint64) error {
	return c.with("kvc_config_set_max_tokens", func(h kvc.Config) error { return kvc.Kvc_config_set_max_tokens(h, n) })
}

// MaxTokens is the token bound of the primary pool (0 = none).
func (c *Config) MaxTokens() (n uint64, err error) {
	err = c.with("kvc_config_get_max_tokens", func(h kvc.Config) error { return kvc.Kvc_config_get_max_tokens(h, &n) })
	return n, err
}

// SetFreeGPUMemoryFraction sets the share of free GPU memory the pool may
// take, in (0, 1] (default 0.9; ignored on the CPU backend).
func (c *Config) SetFreeGPUMemoryFraction(f float64) error {
	return c.with("kvc_config_set_free_gpu_memory_fraction", func(h kvc.Config) error { return kvc.Kvc_config_set_free_gpu_memory_fraction(h, f) })
}

// FreeGPUMemoryFraction is the share of free GPU memory.
func (c *Config) FreeGPUMemoryFraction() (f float64, err error) {
	err = c.with("kvc_config_get_free_gpu_memory_fraction", func(h kvc.Config) error { return kvc.Kvc_config_get_free_gpu_memory_fraction(h, &f) })
	return f, err
}

// SetHostCacheBytes sets the bytes of the secondary (host) tier; 0 = none.
func (c *Config) SetHostCacheBytes(n uint64) error {
	return c.with("kvc_config_set_host_cache_bytes", func(h kvc.Config) error { return kvc.Kvc_config_set_host_cache_bytes(h, n) })
}

// HostCacheBytes is the bytes of the secondary tier.
func (c *Config) HostCacheBytes() (n uint64, err error) {
	err = c.with("kvc_config_get_host_cache_bytes", func(h kvc.Config) error { return kvc.Kvc_config_get_host_cache_bytes(h, &n) })
	return n, err
}

// SetSecondaryOffloadMinPriority sets the priority (0..100, default 35)
// below which evicted blocks are dropped instead of offloaded.
func (c *Config) SetSecondaryOffloadMinPriority(p uint32) error {
	return c.with("kvc_config_set_secondary_offload_min_priority", func(h kvc.Config) error { return kvc.Kvc_config_set_secondary_offload_min_priority(h, p) })
}

// SecondaryOffloadMinPriority is the offload priority threshold.
func (c *Config) SecondaryOffloadMinPriority() (p uint32, err error) {
	err = c.with("kvc_config_get_secondary_offload_min_priority", func(h kvc.Config) error { return kvc.Kvc_config_get_secondary_offload_min_priority(h, &p) })
	return p, err
}

// SetManualClock makes retention durations run on a manual clock that only
// Cache.AdvanceClock moves, instead of the monotonic clock (off; for tests
// and simulators).
func (c *Config) SetManualClock(on bool) error {
	return c.with("kvc_config_set_manual_clock", func(h kvc.Config) error { return kvc.Kvc_config_set_manual_clock(h, on) })
}

// ManualClock reports whether the cache will use a manual retention clock.
func (c *Config) ManualClock() (on bool, err error) {
	err = c.with("kvc_config_get_manual_clock", func(h kvc.Config) error { return kvc.Kvc_config_get_manual_clock(h, &on) })
	return
}

// SetBlockReuse turns reuse of blocks across sequences on or off (on).
func (c *Config) SetBlockReuse(on bool) error {
	return c.with("kvc_config_set_block_reuse", func(h kvc.Config) error { return kvc.Kvc_config_set_block_reuse(h, on) })
}

// BlockReuse reports whether blocks are reused across sequences.
func (c *Config) BlockReuse() (on bool, err error) {
	err = c.with("kvc_config_get_block_reuse", func(h kvc.Config) error { return kvc.Kvc_config_get_block_reuse(h, &on) })
	return on, err
}

// SetPartialReuse turns token-by-token reuse of a partly matching block on
// or off (on).
func (c *Config) SetPartialReuse(on bool) error {
	return c.with("kvc_config_set_partial_reuse", func(h kvc.Config) error { return kvc.Kvc_config_set_partial_reuse(h, on) })
}

// PartialReuse reports whether partial reuse is on.
func (c *Config) PartialReuse() (on bool, err error) {
	err = c.with("kvc_config_get_partial_reuse", func(h kvc.Config) error { return kvc.Kvc_config_get_partial_reuse(h, &on) })
	return on, err
}

// SetCopyOnPartialReuse makes a partly matched block be copied instead of
// used in place (on).
func (c *Config) SetCopyOnPartialReuse(on bool) error {
	return c.with("kvc_config_set_copy_on_partial_reuse", func(h kvc.Config) error { return kvc.Kvc_config_set_copy_on_partial_reuse(h, on) })
}

// CopyOnPartialReuse reports whether copy on partial reuse is on.
func (c *Config) CopyOnPartialReuse() (on bool, err error) {
	err = c.with("kvc_config_get_copy_on_partial_reuse", func(h kvc.Config) error { return kvc.Kvc_config_get_copy_on_partial_reuse(h, &on) })
	return on, err
}

// SetEventBufferSize sets the capacity of the event ring in events; 0
// (default) turns events off.
func (c *Config) SetEventBufferSize(n uint32) error {
	return c.with("kvc_config_set_event_buffer_size", func(h kvc.Config) error { return kvc.Kvc_config_set_event_buffer_size(h, n) })
}

// EventBufferSize is the capacity of the event ring.
func (c *Config) EventBufferSize() (n uint32, err error) {
	err = c.with("kvc_config_get_event_buffer_size", func(h kvc.Config) error { return kvc.Kvc_config_get_event_buffer_size(h, &n) })
	return n, err
}

// SetEventHashSeed sets the seed of the portable block hashes of events
// and of BlockHashes (default 0). Engines and routers sharing an index use
// equal seeds.
func (c *Config) SetEventHashSeed(seed uint64) error {
	return c.with("kvc_config_set_event_hash_seed", func(h kvc.Config) error { return kvc.Kvc_config_set_event_hash_seed(h, seed) })
}

// EventHashSeed is the seed of the portable block hashes.
func (c *Config) EventHashSeed() (seed uint64, err error) {
	err = c.with("kvc_config_get_event_hash_seed", func(h kvc.Config) error { return kvc.Kvc_config_get_event_hash_seed(h, &seed) })
	return seed, err
}

// Pointers to the first element of a slice, or nil for an empty one: how
// the low-level layer takes C arrays.
func firstUint32(s []uint32) *uint32 {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

func firstInt32(s []int32) *int32 {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

func firstUint64(s []uint64) *uint64 {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

func firstByte(s []byte) *byte {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

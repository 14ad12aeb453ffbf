//! The cache handle: creation, description, per-layer tensor views,
//! statistics, and the stream a call's device work goes to.

use std::ffi::c_void;
use std::ptr::{self, NonNull};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use kvcache_sys as sys;

use crate::config::Config;
use crate::error::{check, Error, Result, Status};
use crate::types::{Device, Dtype, Layout, Stream};

/// A zeroed transparent C struct with its `struct_size` set, as its
/// `kvc_x_init()` leaves it (tests compare the two).
macro_rules! sized {
    ($t:ty) => {{
        // SAFETY: the transparent kvcache structs are plain integers,
        // floats, bools and raw pointers: all-zero bytes are a valid value.
        let mut value: $t = unsafe { ::std::mem::zeroed() };
        value.struct_size = ::std::mem::size_of::<$t>() as u32;
        value
    }};
}
pub(crate) use sized;

/// Summary of a cache (`kvc_cache_desc_t`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheDesc {
    /// Device of the primary pool.
    pub device: Device,
    /// Stored element type.
    pub dtype: Dtype,
    /// Block layout.
    pub layout: Layout,
    /// Attention layers.
    pub num_layers: u32,
    /// Layer groups (layers sharing window, kv heads and head dim).
    pub num_groups: u32,
    /// Block pools.
    pub num_pools: u32,
    /// Tokens per block.
    pub tokens_per_block: u32,
    /// 2 (K and V) or 1.
    pub kv_factor: u32,
    /// Primary blocks over all pools.
    pub num_blocks: u64,
    /// Tokens every layer can hold at once.
    pub token_capacity: u64,
    /// Bytes of the primary pools.
    pub primary_bytes: u64,
    /// Bytes of the secondary (host) tier's pools: `host_cache_bytes`
    /// rounded down to whole block sets; 0 without a host tier.
    pub host_cache_bytes: u64,
    /// Free device memory seen at sizing (CUDA); 0 on CPU.
    pub device_free_bytes: u64,
    /// Total device memory (CUDA); 0 on CPU.
    pub device_total_bytes: u64,
    /// State resources (`state.h`); 0 without.
    pub num_resources: u32,
    /// Slots of every state resource.
    pub num_state_slots: u32,
    /// Bytes of all state slots (out of the budget).
    pub state_bytes: u64,
    /// Tensor-parallel ranks (`Config::set_ranks`); 1 without. The block
    /// counts and bytes above are one rank's.
    pub num_ranks: u32,
    /// The most ranks holding one kv head over the groups (1: none
    /// replicated).
    pub max_head_replication: u32,
    /// Paged KV resources (`kv_resource.h`); 0 with the global shape setters.
    pub num_kv_resources: u32,
}

impl CacheDesc {
    fn from_raw(d: &sys::kvc_cache_desc_t) -> CacheDesc {
        CacheDesc {
            device: Device::from_raw(d.device_kind, d.device_ordinal),
            dtype: Dtype::from_raw(d.dtype),
            layout: Layout::from_raw(d.layout),
            num_layers: d.num_layers,
            num_groups: d.num_groups,
            num_pools: d.num_pools,
            tokens_per_block: d.tokens_per_block,
            kv_factor: d.kv_factor,
            num_blocks: d.num_blocks,
            token_capacity: d.token_capacity,
            primary_bytes: d.primary_bytes,
            host_cache_bytes: d.host_cache_bytes,
            device_free_bytes: d.device_free_bytes,
            device_total_bytes: d.device_total_bytes,
            num_resources: d.num_resources,
            num_state_slots: d.num_state_slots,
            state_bytes: d.state_bytes,
            num_ranks: d.num_ranks,
            max_head_replication: d.max_head_replication,
            num_kv_resources: d.num_kv_resources,
        }
    }
}

/// One layer group: the layers sharing (window, kv heads, head dim)
/// (`kvc_group_desc_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupDesc {
    /// Attention window in tokens; 0 means full attention.
    pub window: u32,
    /// KV heads of each layer of the group.
    pub kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Layers in the group.
    pub num_layers: u32,
    /// Index of the pool its blocks come from.
    pub pool: u32,
    /// Bytes of one block (all layers of the group).
    pub block_bytes: u64,
    /// `block_bytes / tokens_per_block`.
    pub bytes_per_token: u64,
    /// KV heads each rank holds of each layer (`kv_heads` with one rank).
    pub kv_heads_per_rank: u32,
    /// Ranks holding each of those heads (1: split, not replicated).
    pub head_replication: u32,
    /// Element type of the group's layers (KV resources may differ).
    pub dtype: Dtype,
    /// 2 (K and V) or 1.
    pub kv_factor: u32,
    /// Block layout of the group.
    pub layout: Layout,
}

/// One block pool (`kvc_pool_desc_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolDesc {
    /// Layer groups drawing from this pool.
    pub num_groups: u32,
    /// Bytes of one block.
    pub block_bytes: u64,
    /// Blocks in the pool.
    pub num_blocks: u64,
    /// `block_bytes * num_blocks`.
    pub bytes: u64,
    /// First byte of the pool (a device pointer on CUDA), owned by the
    /// cache and valid while it lives.
    pub base: *mut c_void,
}

// SAFETY: the base pointer is an address for external kernels; reading
// through it takes unsafe code, which must uphold the cache's lifetime.
unsafe impl Send for PoolDesc {}
// SAFETY: as above.
unsafe impl Sync for PoolDesc {}

/// Where one layer's K and V live, as a strided tensor external kernels can
/// address (`kvc_layer_view_t`). All strides are in bytes: element (block
/// b, kv k, token t, head h, dim d) is at `base + b * block_stride +
/// k * kv_stride + t * token_stride + h * head_stride + d * elem_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerView {
    /// Layer group of the layer.
    pub group: u32,
    /// Pool the blocks come from.
    pub pool: u32,
    /// Element type.
    pub dtype: Dtype,
    /// NHD or HND.
    pub layout: Layout,
    /// KV heads.
    pub kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Tokens per block.
    pub tokens_per_block: u32,
    /// 2 (K at kv 0, V at kv 1) or 1.
    pub kv_factor: u32,
    /// Bytes per element.
    pub elem_size: u32,
    /// Byte 0 of block 0 for this layer (a device pointer on CUDA), owned by
    /// the cache and valid while it lives.
    pub base: *mut c_void,
    /// Blocks addressable through the view.
    pub num_blocks: u64,
    /// Bytes between consecutive blocks.
    pub block_stride: u64,
    /// Bytes between K and V.
    pub kv_stride: u64,
    /// Bytes between consecutive tokens.
    pub token_stride: u64,
    /// Bytes between consecutive heads.
    pub head_stride: u64,
    /// The rank whose pool this is (0 with one rank).
    pub rank: u32,
    /// The model's kv head at head 0 of the view.
    pub first_kv_head: u32,
    /// The layer's kv heads in the model.
    pub total_kv_heads: u32,
}

// SAFETY: as for PoolDesc.
unsafe impl Send for LayerView {}
// SAFETY: as for PoolDesc.
unsafe impl Sync for LayerView {}

/// Counts of a cache's blocks and of its reuse (`kvc_cache_stats_t`).
/// `free_blocks + cached_blocks + in_use_blocks == num_blocks` (primary
/// pools); `host_free_blocks + host_cached_blocks == host_blocks` (the host
/// tier, whose blocks are never in use).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// Primary blocks over all pools.
    pub num_blocks: u64,
    /// Blocks on a free list.
    pub free_blocks: u64,
    /// Unused but reusable (evictable) blocks.
    pub cached_blocks: u64,
    /// Blocks held by sequences or pins.
    pub in_use_blocks: u64,
    /// Prompt block positions found cached by adds.
    pub reused_blocks: u64,
    /// Prompt block positions adds had to compute.
    pub missed_blocks: u64,
    /// `reused / (reused + missed)`; 0 before any add.
    pub hit_rate: f64,
    /// Block positions that left the radix tree to make room (dropped from
    /// the primary pools or evicted from the host tier; offloads apart).
    pub evicted_blocks: u64,
    /// Live sequences.
    pub num_sequences: u64,
    /// Pins not yet released.
    pub num_pinned: u64,
    /// Block positions in the radix tree (both tiers).
    pub tree_nodes: u64,
    /// Block positions copied to the host tier on eviction.
    pub offloaded_blocks: u64,
    /// Block positions copied back from the host tier on a hit.
    pub onboarded_blocks: u64,
    /// Bytes copied to the host tier.
    pub offloaded_bytes: u64,
    /// Bytes copied back from it.
    pub onboarded_bytes: u64,
    /// Host-tier blocks over all pools (0 without a host tier).
    pub host_blocks: u64,
    /// Host-tier blocks holding nothing.
    pub host_free_blocks: u64,
    /// Host-tier blocks holding offloaded, reusable KV.
    pub host_cached_blocks: u64,
}

/// Counts of one layer group's blocks and of its reuse
/// (`kvc_group_stats_t`), from [`Cache::group_stats`].
///
/// A full-attention group holds a block for every block position of every
/// sequence. A windowed group (window `W`, see
/// [`Config::set_attention_windows`]) holds only the blocks covering the
/// `W` tokens its next token attends to and lets the others go as commits
/// move a sequence forward (`released_blocks`; committed ones stay cached
/// until evicted). Its reuse counts only the positions it needs: when an
/// add reuses a prefix, the positions before the window that ends at the
/// reuse point count neither as reused nor as missed, so `reused_blocks +
/// missed_blocks` may differ between the groups of one cache.
///
/// Groups whose blocks have the same size share a pool, so free blocks
/// belong to the pool: `pool_free_blocks` is the same for every group of a
/// pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupStats {
    /// Index of the pool the group draws from (see [`Cache::pool`]).
    pub pool: u32,
    /// Blocks of this group held by sequences or pins.
    pub in_use_blocks: u64,
    /// Blocks of this group cached in the tree (evictable).
    pub cached_blocks: u64,
    /// Free blocks of that pool, shared with the pool's other groups.
    pub pool_free_blocks: u64,
    /// Prompt block positions reused from the tree.
    pub reused_blocks: u64,
    /// Prompt block positions computed.
    pub missed_blocks: u64,
    /// Blocks of this group evicted.
    pub evicted_blocks: u64,
    /// Blocks a windowed group let go because they left the window.
    pub released_blocks: u64,
}

/// A KV cache (`kvc_cache_t`): its pools, sequences, prefix tree and
/// kernels. Dropping it destroys it (`kvc_cache_destroy`).
///
/// Every C call on a cache is thread safe (serialized inside the library),
/// so `Cache` is `Send` and `Sync` and its methods take `&self`; only the
/// destruction needs exclusive ownership, which `Drop` has.
///
/// On a CPU cache the safe kernels write host memory that calls which copy
/// blocks (adding or extending a sequence) also write; the C library does
/// not order kernels against other calls, so this type does: kernels and
/// copying calls on one CPU cache take an internal read/write lock.
#[derive(Debug)]
pub struct Cache {
    raw: NonNull<sys::kvc_cache_t>,
    desc: CacheDesc,
    layers: Vec<LayerView>,
    memory: RwLock<()>,
}

// SAFETY: the C threading contract: every function taking a cache handle
// may be called from any thread, calls on one handle are serialized inside
// the library. kvc_cache_destroy needs exclusive use, which Drop has.
unsafe impl Send for Cache {}
// SAFETY: as above; every method takes &self and only calls thread-safe C
// functions (host memory written by kernels is ordered by `memory`).
unsafe impl Sync for Cache {}

impl Drop for Cache {
    fn drop(&mut self) {
        // SAFETY: raw came from kvc_cache_create and is destroyed once, here,
        // with no other user left (we own it).
        unsafe { sys::kvc_cache_destroy(self.raw.as_ptr()) }
    }
}

impl Cache {
    /// Validates `config`, sizes and allocates the primary pool, and
    /// creates a cache (`kvc_cache_create`). The config can be changed or
    /// dropped afterwards.
    pub fn new(config: &Config) -> Result<Cache> {
        let mut raw = ptr::null_mut();
        // SAFETY: config is a live config; raw is a valid out pointer.
        check(unsafe { sys::kvc_cache_create(config.as_ptr(), &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "kvcache returned a NULL cache"))?;
        // From here on Drop destroys it, also if describing fails.
        let mut cache = Cache {
            raw,
            desc: CacheDesc::from_raw(&sized!(sys::kvc_cache_desc_t)),
            layers: Vec::new(),
            memory: RwLock::new(()),
        };
        cache.desc = cache.describe()?;
        cache.layers = (0..cache.desc.num_layers)
            .map(|layer| cache.layer_view(layer))
            .collect::<Result<Vec<_>>>()?;
        Ok(cache)
    }

    /// Reads the summary and the layer views again (after a resize).
    pub(crate) fn refresh_shape(&mut self) -> Result<()> {
        self.desc = self.describe()?;
        self.layers = (0..self.desc.num_layers)
            .map(|layer| self.layer_view(layer))
            .collect::<Result<Vec<_>>>()?;
        Ok(())
    }

    /// The C handle, for calls through `kvcache_sys`. It stays owned by
    /// `self`.
    pub fn as_ptr(&self) -> *mut sys::kvc_cache_t {
        self.raw.as_ptr()
    }

    /// The device of the primary pool.
    pub fn device(&self) -> Device {
        self.desc.device
    }

    /// Summary of the cache, read now (`kvc_cache_describe`).
    pub fn describe(&self) -> Result<CacheDesc> {
        let mut d = sized!(sys::kvc_cache_desc_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_cache_describe(self.raw.as_ptr(), &mut d) })?;
        Ok(CacheDesc::from_raw(&d))
    }

    /// Layer group `group` (`kvc_cache_describe_group`).
    pub fn group(&self, group: u32) -> Result<GroupDesc> {
        let mut d = sized!(sys::kvc_group_desc_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_cache_describe_group(self.raw.as_ptr(), group, &mut d) })?;
        Ok(GroupDesc {
            window: d.window,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
            num_layers: d.num_layers,
            pool: d.pool,
            block_bytes: d.block_bytes,
            bytes_per_token: d.bytes_per_token,
            kv_heads_per_rank: d.kv_heads_per_rank,
            head_replication: d.head_replication,
            dtype: Dtype::from_raw(d.dtype),
            kv_factor: d.kv_factor,
            layout: Layout::from_raw(d.layout),
        })
    }

    /// Pool `pool` (`kvc_cache_describe_pool`).
    pub fn pool(&self, pool: u32) -> Result<PoolDesc> {
        let mut d = sized!(sys::kvc_pool_desc_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_cache_describe_pool(self.raw.as_ptr(), pool, &mut d) })?;
        Ok(PoolDesc {
            num_groups: d.num_groups,
            block_bytes: d.block_bytes,
            num_blocks: d.num_blocks,
            bytes: d.bytes,
            base: d.base,
        })
    }

    /// The tensor view of layer `layer` (`kvc_cache_layer_view`).
    pub fn layer_view(&self, layer: u32) -> Result<LayerView> {
        let mut v = sized!(sys::kvc_layer_view_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_cache_layer_view(self.raw.as_ptr(), layer, &mut v) })?;
        Ok(LayerView::from_raw(&v))
    }

    /// The tensor view of layer `layer` on rank `rank`
    /// (`kvc_cache_layer_view_rank`, tensor parallelism).
    pub fn layer_view_rank(&self, rank: u32, layer: u32) -> Result<LayerView> {
        let mut v = sized!(sys::kvc_layer_view_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_cache_layer_view_rank(self.raw.as_ptr(), rank, layer, &mut v) })?;
        Ok(LayerView::from_raw(&v))
    }
}

impl LayerView {
    fn from_raw(v: &sys::kvc_layer_view_t) -> LayerView {
        LayerView {
            group: v.group,
            pool: v.pool,
            dtype: Dtype::from_raw(v.dtype),
            layout: Layout::from_raw(v.layout),
            kv_heads: v.kv_heads,
            head_dim: v.head_dim,
            tokens_per_block: v.tokens_per_block,
            kv_factor: v.kv_factor,
            elem_size: v.elem_size,
            base: v.base,
            num_blocks: v.num_blocks,
            block_stride: v.block_stride,
            kv_stride: v.kv_stride,
            token_stride: v.token_stride,
            head_stride: v.head_stride,
            rank: v.rank,
            first_kv_head: v.first_kv_head,
            total_kv_heads: v.total_kv_heads,
        }
    }
}

impl Cache {
    /// Current statistics (`kvc_cache_get_stats`).
    pub fn stats(&self) -> Result<Stats> {
        let mut s = sized!(sys::kvc_cache_stats_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_cache_get_stats(self.raw.as_ptr(), &mut s) })?;
        Ok(Stats {
            num_blocks: s.num_blocks,
            free_blocks: s.free_blocks,
            cached_blocks: s.cached_blocks,
            in_use_blocks: s.in_use_blocks,
            reused_blocks: s.reused_blocks,
            missed_blocks: s.missed_blocks,
            hit_rate: s.hit_rate,
            evicted_blocks: s.evicted_blocks,
            num_sequences: s.num_sequences,
            num_pinned: s.num_pinned,
            tree_nodes: s.tree_nodes,
            offloaded_blocks: s.offloaded_blocks,
            onboarded_blocks: s.onboarded_blocks,
            offloaded_bytes: s.offloaded_bytes,
            onboarded_bytes: s.onboarded_bytes,
            host_blocks: s.host_blocks,
            host_free_blocks: s.host_free_blocks,
            host_cached_blocks: s.host_cached_blocks,
        })
    }

    /// Current statistics of layer group `group` (`0 <= group <
    /// num_groups`; `kvc_cache_get_group_stats`). A group out of range is
    /// `Status::InvalidArgument`.
    pub fn group_stats(&self, group: u32) -> Result<GroupStats> {
        let mut s = sized!(sys::kvc_group_stats_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_cache_get_group_stats(self.raw.as_ptr(), group, &mut s) })?;
        Ok(GroupStats {
            pool: s.pool,
            in_use_blocks: s.in_use_blocks,
            cached_blocks: s.cached_blocks,
            pool_free_blocks: s.pool_free_blocks,
            reused_blocks: s.reused_blocks,
            missed_blocks: s.missed_blocks,
            evicted_blocks: s.evicted_blocks,
            released_blocks: s.released_blocks,
        })
    }

    /// Evicts every cached block; refused with `Status::InvalidState` while
    /// any block is in use (`kvc_cache_reset_reuse`).
    pub fn reset_reuse(&self) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_cache_reset_reuse(self.raw.as_ptr()) })
    }

    /// Moves the manual retention clock forward by `milliseconds`; expired
    /// retention priorities revert to the default at once. Refused with
    /// `Status::InvalidState` on a cache reading the monotonic clock
    /// (`kvc_cache_advance_clock`).
    pub fn advance_clock(&self, milliseconds: u64) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_cache_advance_clock(self.raw.as_ptr(), milliseconds) })
    }

    /// Runs the library's invariant checker; `Status::Internal` names the
    /// first broken invariant (`kvc_cache_check`).
    pub fn check(&self) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_cache_check(self.raw.as_ptr()) })
    }

    /// The calls whose device work (block copies, kernels) goes to
    /// `stream` instead of the default stream.
    pub fn on(&self, stream: Stream) -> OnStream<'_> {
        OnStream {
            cache: self,
            stream,
        }
    }

    /// The cached view of a layer, for the kernels' shape checks.
    pub(crate) fn layer_shape(&self, layer: u32, what: &str) -> Result<&LayerView> {
        self.layers.get(layer as usize).ok_or_else(|| {
            Error::invalid(format!(
                "{what}: layer must be < num_layers ({}), got {layer}",
                self.layers.len()
            ))
        })
    }

    /// Shared use of host pool memory (kernels that only read it).
    pub(crate) fn memory_read(&self) -> Option<RwLockReadGuard<'_, ()>> {
        match self.desc.device {
            Device::Cpu => Some(self.memory.read().unwrap_or_else(|e| e.into_inner())),
            _ => None,
        }
    }

    /// Exclusive use of host pool memory (calls that may write it).
    pub(crate) fn memory_write(&self) -> Option<RwLockWriteGuard<'_, ()>> {
        match self.desc.device {
            Device::Cpu => Some(self.memory.write().unwrap_or_else(|e| e.into_inner())),
            _ => None,
        }
    }
}

/// The calls of a cache whose device work goes to one stream; made by
/// [`Cache::on`]. On a CPU cache the stream is ignored and the work is done
/// before each call returns.
#[derive(Clone, Copy, Debug)]
pub struct OnStream<'a> {
    pub(crate) cache: &'a Cache,
    pub(crate) stream: Stream,
}

impl OnStream<'_> {
    /// The cache.
    pub fn cache(&self) -> &Cache {
        self.cache
    }

    /// The stream.
    pub fn stream(&self) -> Stream {
        self.stream
    }

    /// Waits for the kernel work enqueued on this stream and reports the
    /// first error this cache's kernels recorded since the previous report
    /// (`kvc_cache_get_async_error`): `Ok(None)` when there was none,
    /// `Ok(Some(error))` with its status and message, `Err` when the check
    /// itself failed.
    pub fn async_error(&self) -> Result<Option<Error>> {
        let mut status: sys::kvc_status_t = sys::KVC_OK;
        // SAFETY: live cache; the stream was vouched for by Stream::from_raw
        // (or is the default one); status is a valid out pointer.
        check(unsafe {
            sys::kvc_cache_get_async_error(
                self.cache.raw.as_ptr(),
                self.stream.as_raw(),
                &mut status,
            )
        })?;
        if status == sys::KVC_OK {
            Ok(None)
        } else {
            Ok(Some(Error::last(status)))
        }
    }

    /// Evicts cached blocks ahead of need until `block_sets` block sets are
    /// free, as the next adds and extends would (the same victims; a host
    /// tier takes those at or above its offload priority, its copies on this
    /// stream); call it while the device runs a step. Blocks in use never
    /// go: asking for more than the cached blocks can free is no error.
    /// Returns the block sets free afterwards (`kvc_cache_make_room`).
    pub fn make_room(&self, block_sets: u64) -> Result<u64> {
        let mut free: u64 = 0;
        // SAFETY: live cache; the stream was vouched for by Stream::from_raw
        // (or is the default one); free is a valid out pointer.
        check(unsafe {
            sys::kvc_cache_make_room(
                self.cache.raw.as_ptr(),
                block_sets,
                self.stream.as_raw(),
                &mut free,
            )
        })?;
        Ok(free)
    }
}

impl Cache {
    /// [`OnStream::async_error`] on the default stream.
    pub fn async_error(&self) -> Result<Option<Error>> {
        self.on(Stream::DEFAULT).async_error()
    }

    /// [`OnStream::make_room`] on the default stream.
    pub fn make_room(&self, block_sets: u64) -> Result<u64> {
        self.on(Stream::DEFAULT).make_room(block_sets)
    }
}

//! The cache configuration: an owned `kvc_config_t` with typed setters and
//! getters, and a builder that chains them.

use std::ptr::{self, NonNull};

use kvcache_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::types::{Device, Dtype, Layout};

/// A cache configuration (`kvc_config_t`), created holding the library's
/// defaults (see `kvc_config_create`).
///
/// Setters check what they can check alone and leave the config unchanged
/// on failure; [`Config::validate`] (also run by [`Cache::new`]) checks the
/// settings together. A cache copies what it needs, so the config may be
/// changed or dropped after creating one.
///
/// A config is not synchronized in C: `Config` is `Send` but not `Sync`
/// (setters take `&mut self`).
///
/// [`Cache::new`]: crate::Cache::new
#[derive(Debug)]
pub struct Config {
    raw: NonNull<sys::kvc_config_t>,
}

// SAFETY: a config is a plain heap value with no thread affinity; moving it
// to another thread is fine. It is not Sync: the C config is not
// synchronized.
unsafe impl Send for Config {}

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: raw came from kvc_config_create/clone and is destroyed
        // once, here.
        unsafe { sys::kvc_config_destroy(self.raw.as_ptr()) }
    }
}

impl Config {
    /// A config holding the defaults (`kvc_config_create`).
    pub fn new() -> Result<Config> {
        let mut raw = ptr::null_mut();
        // SAFETY: raw is a valid out pointer.
        check(unsafe { sys::kvc_config_create(&mut raw) })?;
        Config::from_created(raw)
    }

    /// A builder starting from the defaults.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder {
            config: Config::new(),
        }
    }

    /// A copy of this config (`kvc_config_clone`).
    pub fn try_clone(&self) -> Result<Config> {
        let mut raw = ptr::null_mut();
        // SAFETY: self.raw is a live config; raw is a valid out pointer.
        check(unsafe { sys::kvc_config_clone(self.raw.as_ptr(), &mut raw) })?;
        Config::from_created(raw)
    }

    fn from_created(raw: *mut sys::kvc_config_t) -> Result<Config> {
        NonNull::new(raw)
            .map(|raw| Config { raw })
            .ok_or_else(|| Error::new(Status::Internal, "kvcache returned a NULL config"))
    }

    /// Checks the settings as a whole, as creating a cache will
    /// (`kvc_config_validate`).
    pub fn validate(&self) -> Result<()> {
        // SAFETY: self.raw is a live config.
        check(unsafe { sys::kvc_config_validate(self.raw.as_ptr()) })
    }

    /// The C handle, for calls through `kvcache_sys`. It stays owned by
    /// `self`.
    pub fn as_ptr(&self) -> *const sys::kvc_config_t {
        self.raw.as_ptr()
    }

    /// The mutable C handle, for calls through `kvcache_sys`. It stays
    /// owned by `self`.
    pub fn as_mut_ptr(&mut self) -> *mut sys::kvc_config_t {
        self.raw.as_ptr()
    }

    /// The same number of KV heads (> 0) for every layer; replaces a
    /// per-layer list (`kvc_config_set_kv_heads`).
    pub fn set_kv_heads(&mut self, kv_heads: u32) -> Result<()> {
        // SAFETY: self.raw is a live config, exclusively borrowed.
        check(unsafe { sys::kvc_config_set_kv_heads(self.raw.as_ptr(), kv_heads) })
    }

    /// KV heads per layer, one entry (> 0) per layer
    /// (`kvc_config_set_kv_heads_per_layer`).
    pub fn set_kv_heads_per_layer(&mut self, kv_heads: &[u32]) -> Result<()> {
        // SAFETY: the slice is valid for the call; C copies it.
        check(unsafe {
            sys::kvc_config_set_kv_heads_per_layer(
                self.raw.as_ptr(),
                kv_heads.as_ptr(),
                kv_heads.len(),
            )
        })
    }

    /// KV heads of layer `layer` as the cache will use them
    /// (`kvc_config_get_kv_heads`).
    pub fn kv_heads(&self, layer: u32) -> Result<u32> {
        let mut out = 0;
        // SAFETY: live config, valid out pointer.
        check(unsafe { sys::kvc_config_get_kv_heads(self.raw.as_ptr(), layer, &mut out) })?;
        Ok(out)
    }

    /// Attention window per layer in tokens, 0 for full attention; the list
    /// repeats over the layers, an empty list means full attention
    /// everywhere (`kvc_config_set_attention_windows`).
    pub fn set_attention_windows(&mut self, windows: &[u32]) -> Result<()> {
        // SAFETY: the slice is valid for the call; C copies it.
        check(unsafe {
            sys::kvc_config_set_attention_windows(
                self.raw.as_ptr(),
                windows.as_ptr(),
                windows.len(),
            )
        })
    }

    /// Attention window of layer `layer` after repetition, 0 for full
    /// (`kvc_config_get_attention_window`).
    pub fn attention_window(&self, layer: u32) -> Result<u32> {
        let mut out = 0;
        // SAFETY: live config, valid out pointer.
        check(unsafe { sys::kvc_config_get_attention_window(self.raw.as_ptr(), layer, &mut out) })?;
        Ok(out)
    }

    /// Element type of the stored K/V (`kvc_config_set_dtype`).
    pub fn set_dtype(&mut self, dtype: Dtype) -> Result<()> {
        // SAFETY: live config, exclusively borrowed.
        check(unsafe { sys::kvc_config_set_dtype(self.raw.as_ptr(), dtype.raw()) })
    }

    /// Element type of the stored K/V (`kvc_config_get_dtype`).
    pub fn dtype(&self) -> Result<Dtype> {
        let mut out = 0;
        // SAFETY: live config, valid out pointer.
        check(unsafe { sys::kvc_config_get_dtype(self.raw.as_ptr(), &mut out) })?;
        Ok(Dtype::from_raw(out))
    }

    /// Block layout (`kvc_config_set_layout`).
    pub fn set_layout(&mut self, layout: Layout) -> Result<()> {
        // SAFETY: live config, exclusively borrowed.
        check(unsafe { sys::kvc_config_set_layout(self.raw.as_ptr(), layout.raw()) })
    }

    /// Block layout (`kvc_config_get_layout`).
    pub fn layout(&self) -> Result<Layout> {
        let mut out = 0;
        // SAFETY: live config, valid out pointer.
        check(unsafe { sys::kvc_config_get_layout(self.raw.as_ptr(), &mut out) })?;
        Ok(Layout::from_raw(out))
    }

    /// Device of the primary pool (`kvc_config_set_device`).
    pub fn set_device(&mut self, device: Device) -> Result<()> {
        let (kind, ordinal) = device.raw();
        // SAFETY: live config, exclusively borrowed.
        check(unsafe { sys::kvc_config_set_device(self.raw.as_ptr(), kind, ordinal) })
    }

    /// Tensor parallelism on CUDA devices `ordinals` (distinct), one rank
    /// each (`kvc_config_set_ranks`): kv heads split across the ranks, or
    /// replicated when fewer than the ranks; one set of block ids; every
    /// byte budget per rank. One ordinal is `set_device(Device::Cuda(o))`.
    pub fn set_cuda_ranks(&mut self, ordinals: &[i32]) -> Result<()> {
        self.set_ranks(sys::KVC_DEVICE_CUDA, ordinals)
    }

    /// Tensor parallelism on the CPU backend: `num_ranks` ranks, each with
    /// its own host pools (`kvc_config_set_ranks` with ordinals 0..n).
    pub fn set_cpu_ranks(&mut self, num_ranks: u32) -> Result<()> {
        let ordinals: Vec<i32> = (0..num_ranks as i32).collect();
        self.set_ranks(sys::KVC_DEVICE_CPU, &ordinals)
    }

    fn set_ranks(&mut self, kind: sys::kvc_device_kind_t, ordinals: &[i32]) -> Result<()> {
        let n = u32::try_from(ordinals.len())
            .map_err(|_| Error::invalid(format!("{} ranks is too many", ordinals.len())))?;
        // SAFETY: live config, exclusively borrowed; `ordinals` holds n values.
        check(unsafe { sys::kvc_config_set_ranks(self.raw.as_ptr(), kind, ordinals.as_ptr(), n) })
    }

    /// The ranks' ordinals (one rank: the device ordinal)
    /// (`kvc_config_get_ranks`).
    pub fn ranks(&self) -> Result<Vec<i32>> {
        let mut n = 0u32;
        let mut out = vec![0i32; 64];
        // SAFETY: live config; `out` has room for 64 ordinals, the most.
        check(unsafe {
            sys::kvc_config_get_ranks(self.raw.as_ptr(), out.as_mut_ptr(), 64, &mut n)
        })?;
        out.truncate(n as usize);
        Ok(out)
    }

    /// Device of the primary pool (`kvc_config_get_device`).
    pub fn device(&self) -> Result<Device> {
        let (mut kind, mut ordinal) = (0, 0);
        // SAFETY: live config, valid out pointers.
        check(unsafe { sys::kvc_config_get_device(self.raw.as_ptr(), &mut kind, &mut ordinal) })?;
        Ok(Device::from_raw(kind, ordinal))
    }
}

/// Generates, for each plain setting, the `Config` setter and getter and the
/// `ConfigBuilder` method.
macro_rules! plain_settings {
    ($($(#[doc = $doc:literal])* $name:ident: $ty:ty = $set:ident / $get:ident, $cset:ident / $cget:ident;)*) => {
        impl Config {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!("Calls `", stringify!($cset), "`.")]
                pub fn $set(&mut self, value: $ty) -> Result<()> {
                    // SAFETY: live config, exclusively borrowed.
                    check(unsafe { sys::$cset(self.raw.as_ptr(), value) })
                }

                #[doc = concat!("Reads the setting of [`Config::", stringify!($set),
                                "`] (`", stringify!($cget), "`).")]
                pub fn $get(&self) -> Result<$ty> {
                    let mut out = <$ty>::default();
                    // SAFETY: live config, valid out pointer.
                    check(unsafe { sys::$cget(self.raw.as_ptr(), &mut out) })?;
                    Ok(out)
                }
            )*
        }

        impl ConfigBuilder {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!("See [`Config::", stringify!($set), "`].")]
                pub fn $name(self, value: $ty) -> ConfigBuilder {
                    self.apply(|c| c.$set(value))
                }
            )*
        }
    };
}

plain_settings! {
    /// Number of attention layers (> 0).
    num_layers: u32 = set_num_layers / num_layers,
        kvc_config_set_num_layers / kvc_config_get_num_layers;
    /// Head dimension (> 0).
    head_dim: u32 = set_head_dim / head_dim,
        kvc_config_set_head_dim / kvc_config_get_head_dim;
    /// 2 to store K and V, 1 when K and V are one tensor (MLA).
    kv_factor: u32 = set_kv_factor / kv_factor,
        kvc_config_set_kv_factor / kvc_config_get_kv_factor;
    /// Tokens per block: a power of two > 1, at most 1024.
    tokens_per_block: u32 = set_tokens_per_block / tokens_per_block,
        kvc_config_set_tokens_per_block / kvc_config_get_tokens_per_block;
    /// Upper bound on the primary pool in bytes; 0 means no byte bound.
    primary_bytes: u64 = set_primary_bytes / primary_bytes,
        kvc_config_set_primary_bytes / kvc_config_get_primary_bytes;
    /// The most primary bytes `Cache::resize` may grow the pools to; 0
    /// (default) means the budget at creation.
    max_primary_bytes: u64 = set_max_primary_bytes / max_primary_bytes,
        kvc_config_set_max_primary_bytes / kvc_config_get_max_primary_bytes;
    /// Upper bound on the primary pool in tokens per layer; 0 means none.
    max_tokens: u64 = set_max_tokens / max_tokens,
        kvc_config_set_max_tokens / kvc_config_get_max_tokens;
    /// Share of the free GPU memory the primary pool may take, in (0, 1]
    /// (default 0.9; ignored on the CPU backend).
    free_gpu_memory_fraction: f64 = set_free_gpu_memory_fraction / free_gpu_memory_fraction,
        kvc_config_set_free_gpu_memory_fraction / kvc_config_get_free_gpu_memory_fraction;
    /// Bytes of (pinned) host memory for the secondary tier; 0 means none.
    host_cache_bytes: u64 = set_host_cache_bytes / host_cache_bytes,
        kvc_config_set_host_cache_bytes / kvc_config_get_host_cache_bytes;
    /// Blocks evicted with a priority below this (0..100, default 35) are
    /// dropped instead of offloaded to the secondary tier.
    secondary_offload_min_priority: u32 =
        set_secondary_offload_min_priority / secondary_offload_min_priority,
        kvc_config_set_secondary_offload_min_priority
            / kvc_config_get_secondary_offload_min_priority;
    /// Reuse of blocks across sequences (default on).
    block_reuse: bool = set_block_reuse / block_reuse,
        kvc_config_set_block_reuse / kvc_config_get_block_reuse;
    /// Token-by-token reuse of a partly matching block (default on).
    partial_reuse: bool = set_partial_reuse / partial_reuse,
        kvc_config_set_partial_reuse / kvc_config_get_partial_reuse;
    /// Copy a partly matched block instead of using it in place (default
    /// on).
    copy_on_partial_reuse: bool = set_copy_on_partial_reuse / copy_on_partial_reuse,
        kvc_config_set_copy_on_partial_reuse / kvc_config_get_copy_on_partial_reuse;
    /// Capacity of the event ring in events; 0 (default) turns events off.
    event_buffer_size: u32 = set_event_buffer_size / event_buffer_size,
        kvc_config_set_event_buffer_size / kvc_config_get_event_buffer_size;
    /// Seed of the portable block hashes of events and of
    /// [`Config::block_hashes`] (default 0); engines and routers sharing an
    /// index use equal seeds.
    event_hash_seed: u64 = set_event_hash_seed / event_hash_seed,
        kvc_config_set_event_hash_seed / kvc_config_get_event_hash_seed;
    /// Retention durations run on a manual clock that only
    /// `Cache::advance_clock` moves, instead of the monotonic clock
    /// (default off; for tests and simulators).
    manual_clock: bool = set_manual_clock / manual_clock,
        kvc_config_set_manual_clock / kvc_config_get_manual_clock;
}

/// Builds a [`Config`] by chaining settings; the first failing setting is
/// kept (with its message) and returned by [`ConfigBuilder::build`].
///
/// ```no_run
/// # fn main() -> kvcache::Result<()> {
/// let config = kvcache::Config::builder()
///     .num_layers(32)
///     .kv_heads(8)
///     .head_dim(128)
///     .dtype(kvcache::Dtype::Bf16)
///     .max_tokens(4096)
///     .build()?;
/// let cache = kvcache::Cache::new(&config)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until build() is called"]
pub struct ConfigBuilder {
    config: Result<Config>,
}

impl ConfigBuilder {
    pub(crate) fn apply(mut self, set: impl FnOnce(&mut Config) -> Result<()>) -> ConfigBuilder {
        if let Ok(config) = &mut self.config {
            if let Err(e) = set(config) {
                self.config = Err(e);
            }
        }
        self
    }

    /// The same number of KV heads for every layer. See
    /// [`Config::set_kv_heads`].
    pub fn kv_heads(self, kv_heads: u32) -> ConfigBuilder {
        self.apply(|c| c.set_kv_heads(kv_heads))
    }

    /// KV heads per layer. See [`Config::set_kv_heads_per_layer`].
    pub fn kv_heads_per_layer(self, kv_heads: &[u32]) -> ConfigBuilder {
        self.apply(|c| c.set_kv_heads_per_layer(kv_heads))
    }

    /// Attention windows, repeated over the layers. See
    /// [`Config::set_attention_windows`].
    pub fn attention_windows(self, windows: &[u32]) -> ConfigBuilder {
        self.apply(|c| c.set_attention_windows(windows))
    }

    /// Element type of the stored K/V. See [`Config::set_dtype`].
    pub fn dtype(self, dtype: Dtype) -> ConfigBuilder {
        self.apply(|c| c.set_dtype(dtype))
    }

    /// Block layout. See [`Config::set_layout`].
    pub fn layout(self, layout: Layout) -> ConfigBuilder {
        self.apply(|c| c.set_layout(layout))
    }

    /// Device of the primary pool. See [`Config::set_device`].
    pub fn device(self, device: Device) -> ConfigBuilder {
        self.apply(|c| c.set_device(device))
    }

    /// Tensor parallelism on CUDA devices. See [`Config::set_cuda_ranks`].
    pub fn cuda_ranks(self, ordinals: &[i32]) -> ConfigBuilder {
        self.apply(|c| c.set_cuda_ranks(ordinals))
    }

    /// Tensor parallelism on CPU ranks. See [`Config::set_cpu_ranks`].
    pub fn cpu_ranks(self, num_ranks: u32) -> ConfigBuilder {
        self.apply(|c| c.set_cpu_ranks(num_ranks))
    }

    /// The config, validated (`kvc_config_validate`), or the first error.
    pub fn build(self) -> Result<Config> {
        let config = self.config?;
        config.validate()?;
        Ok(config)
    }

    /// The config without validating it, or the first setter error.
    pub fn build_unvalidated(self) -> Result<Config> {
        self.config
    }
}

//! Paged KV resources, each with its own geometry (`kvcache/kv_resource.h`):
//! layers with their own kv heads, head_dim, dtype, kv_factor, layout and
//! window; resources matching KV resource 0 on (head_dim, dtype, kv_factor,
//! layout) are managed together, the others get pools of their own.

use std::ffi::CStr;

use kvcache_sys as sys;

use crate::cache::{sized, Cache};
use crate::config::Config;
use crate::error::{check, Result};
use crate::types::{Dtype, Layout};

/// A paged KV resource to add (`kvc_kv_resource_t`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvResource {
    /// Model layer ids, ascending and distinct.
    pub layers: Vec<u32>,
    /// KV heads of each layer.
    pub kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Element type (default bf16).
    pub dtype: Dtype,
    /// 2 (K and V) or 1 (default 2).
    pub kv_factor: u32,
    /// Block layout (default NHD).
    pub layout: Layout,
    /// Attention window in tokens; 0 = full (default).
    pub window: u32,
}

impl KvResource {
    /// A resource of `layers` with `kv_heads` heads of `head_dim` and the
    /// defaults of `KVC_KV_RESOURCE_INIT` for the rest.
    pub fn new(layers: &[u32], kv_heads: u32, head_dim: u32) -> KvResource {
        let d = kv_resource_init();
        KvResource {
            layers: layers.to_vec(),
            kv_heads,
            head_dim,
            dtype: Dtype::from_raw(d.dtype),
            kv_factor: d.kv_factor,
            layout: Layout::from_raw(d.layout),
            window: d.window,
        }
    }

    fn to_c(&self) -> sys::kvc_kv_resource_t {
        let mut d = kv_resource_init();
        d.layers = self.layers.as_ptr();
        d.num_layers = u32::try_from(self.layers.len()).unwrap_or(u32::MAX);
        d.kv_heads = self.kv_heads;
        d.head_dim = self.head_dim;
        d.dtype = self.dtype.raw();
        d.kv_factor = self.kv_factor;
        d.layout = self.layout.raw();
        d.window = self.window;
        d
    }
}

/// Why a KV resource is managed together with KV resource 0 or local.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvResourceReason {
    /// Managed: head_dim, dtype, kv_factor and layout equal resource 0's.
    Managed,
    /// Local: head_dim differs.
    HeadDimDiffers,
    /// Local: dtype differs.
    DtypeDiffers,
    /// Local: kv_factor differs.
    KvFactorDiffers,
    /// Local: layout differs.
    LayoutDiffers,
    /// A value this binding does not know.
    Other(u32),
}

impl KvResourceReason {
    fn from_raw(raw: u32) -> KvResourceReason {
        match raw {
            sys::KVC_RESOURCE_REASON_MANAGED => KvResourceReason::Managed,
            sys::KVC_RESOURCE_REASON_KV_HEAD_DIM_DIFFERS => KvResourceReason::HeadDimDiffers,
            sys::KVC_RESOURCE_REASON_KV_DTYPE_DIFFERS => KvResourceReason::DtypeDiffers,
            sys::KVC_RESOURCE_REASON_KV_FACTOR_DIFFERS => KvResourceReason::KvFactorDiffers,
            sys::KVC_RESOURCE_REASON_KV_LAYOUT_DIFFERS => KvResourceReason::LayoutDiffers,
            other => KvResourceReason::Other(other),
        }
    }
}

/// One KV resource of a cache (`kvc_kv_resource_desc_t`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvResourceDesc {
    /// Managed together with KV resource 0, or local (pools of its own).
    pub managed: bool,
    /// Why.
    pub reason: KvResourceReason,
    /// The reason in words.
    pub reason_text: String,
    /// The first KV resource of its class.
    pub managed_with: u32,
    /// Its layers.
    pub num_layers: u32,
    /// KV heads.
    pub kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Element type.
    pub dtype: Dtype,
    /// 2 or 1.
    pub kv_factor: u32,
    /// Layout.
    pub layout: Layout,
    /// Window; 0 = full.
    pub window: u32,
    /// The layer group holding its layers.
    pub group: u32,
    /// That group's pool.
    pub pool: u32,
    /// Bytes of one block of that group.
    pub block_bytes: u64,
}

pub(crate) fn kv_resource_init() -> sys::kvc_kv_resource_t {
    // KVC_KV_RESOURCE_INIT (c_init_tests compares with kvc_kv_resource_init).
    let mut d = sized!(sys::kvc_kv_resource_t);
    d.dtype = sys::KVC_DTYPE_BF16;
    d.kv_factor = 2;
    d.layout = sys::KVC_LAYOUT_NHD;
    d
}

pub(crate) fn kv_resource_desc_init() -> sys::kvc_kv_resource_desc_t {
    sized!(sys::kvc_kv_resource_desc_t)
}

impl Config {
    /// Adds a paged KV resource (`kvc_config_add_kv_resource`); returns its
    /// index. Refused once a global shape setter was called, and those are
    /// refused after it (`Status::InvalidState`).
    pub fn add_kv_resource(&mut self, resource: &KvResource) -> Result<u32> {
        let c = self.as_mut_ptr();
        let d = resource.to_c();
        let mut index = 0u32;
        // SAFETY: live config, exclusively borrowed; d's layers outlive the call.
        check(unsafe { sys::kvc_config_add_kv_resource(c, &d, &mut index) })?;
        Ok(index)
    }
}

impl Cache {
    /// Describes KV resource `index` (`kvc_cache_describe_kv_resource`).
    pub fn describe_kv_resource(&self, index: u32) -> Result<KvResourceDesc> {
        let mut d = kv_resource_desc_init();
        // SAFETY: live cache, valid struct.
        check(unsafe { sys::kvc_cache_describe_kv_resource(self.as_ptr(), index, &mut d) })?;
        // SAFETY: the reason text is a static NUL-terminated string.
        let reason_text = if d.reason_text.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(d.reason_text) }
                .to_string_lossy()
                .into_owned()
        };
        Ok(KvResourceDesc {
            managed: d.managed != 0,
            reason: KvResourceReason::from_raw(d.reason),
            reason_text,
            managed_with: d.managed_with,
            num_layers: d.num_layers,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
            dtype: Dtype::from_raw(d.dtype),
            kv_factor: d.kv_factor,
            layout: Layout::from_raw(d.layout),
            window: d.window,
            group: d.group,
            pool: d.pool,
            block_bytes: d.block_bytes,
        })
    }
}

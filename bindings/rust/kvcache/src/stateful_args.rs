//! Arguments of the stateful mode's calls: the options of a cache and the
//! raw (pointer) forms of append and decode.

use std::ffi::c_void;
use std::ptr;

use kvcache_sys as sys;

use crate::cache::sized;
use crate::types::{Dtype, Layout};

/// Growth policy of the layers' buffers (`kvc_growth_policy_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum GrowthPolicy {
    /// Per-layer offsets: no two layers grow on the same decode step.
    #[default]
    Staggered,
    /// Every layer on the same grid.
    Uniform,
}

/// Settings of a stateful cache beside the config's model spec
/// (`kvc_stateful_options_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatefulOptions {
    /// Rows (beams or requests), 1..1024.
    pub batch: u32,
    /// `Layout::Hnd` (OpenVINO's, the default) or `Layout::Nhd`.
    pub layout: Layout,
    /// Tokens a growth adds; 0 means 128.
    pub growth_step: u32,
    /// Growth policy.
    pub growth_policy: GrowthPolicy,
    /// Longest row allowed; 0 means 2^30.
    pub max_length: u32,
    /// Tokens per row allocated at creation; 0 means none.
    pub initial_length: u32,
}

impl StatefulOptions {
    /// `batch` rows with every default.
    pub fn new(batch: u32) -> Self {
        StatefulOptions {
            batch,
            layout: Layout::Hnd,
            growth_step: 0,
            growth_policy: GrowthPolicy::Staggered,
            max_length: 0,
            initial_length: 0,
        }
    }

    pub(crate) fn to_c(self) -> sys::kvc_stateful_options_t {
        let mut o = sized!(sys::kvc_stateful_options_t);
        o.batch = self.batch;
        o.layout = self.layout.raw();
        o.growth_step = self.growth_step;
        o.growth_policy = match self.growth_policy {
            GrowthPolicy::Staggered => sys::KVC_GROWTH_STAGGERED,
            GrowthPolicy::Uniform => sys::KVC_GROWTH_UNIFORM,
        };
        o.max_length = self.max_length;
        o.initial_length = self.initial_length;
        o
    }
}

/// `kvc_stateful_append_args_t` with raw pointers (device pointers on a
/// CUDA cache), for [`StatefulOn::append_raw`](crate::StatefulOn::append_raw).
#[derive(Clone, Copy, Debug)]
pub struct RawStatefulAppend {
    /// Layer.
    pub layer: u32,
    /// Positions per row in key/value.
    pub num_tokens: u32,
    /// Element type of key and value.
    pub src_dtype: Dtype,
    /// `[batch][num_tokens][heads][head_dim]` (NHD) or
    /// `[batch][heads][num_tokens][head_dim]` (HND) keys.
    pub key: *const c_void,
    /// Values of the same shape; NULL iff kv_factor is 1.
    pub value: *const c_void,
    /// Host `[batch]` tokens each row takes (<= num_tokens), or NULL: all.
    pub row_tokens: *const u32,
    /// fp8 quantization scale of K.
    pub k_scale: f32,
    /// fp8 quantization scale of V.
    pub v_scale: f32,
}

impl Default for RawStatefulAppend {
    /// As `KVC_STATEFUL_APPEND_ARGS_INIT`.
    fn default() -> Self {
        RawStatefulAppend {
            layer: 0,
            num_tokens: 0,
            src_dtype: Dtype::Other(0),
            key: ptr::null(),
            value: ptr::null(),
            row_tokens: ptr::null(),
            k_scale: 1.0,
            v_scale: 1.0,
        }
    }
}

impl RawStatefulAppend {
    pub(crate) fn to_c(self) -> sys::kvc_stateful_append_args_t {
        let mut a = sized!(sys::kvc_stateful_append_args_t);
        a.layer = self.layer;
        a.num_tokens = self.num_tokens;
        a.src_dtype = self.src_dtype.raw();
        a.key = self.key;
        a.value = self.value;
        a.row_tokens = self.row_tokens;
        a.k_scale = self.k_scale;
        a.v_scale = self.v_scale;
        a
    }
}

/// `kvc_stateful_decode_args_t` with raw pointers, for
/// [`StatefulOn::decode_raw`](crate::StatefulOn::decode_raw) and [`StatefulCache::decode_workspace_size`](crate::StatefulCache::decode_workspace_size).
#[derive(Clone, Copy, Debug)]
pub struct RawStatefulDecode {
    /// Layer.
    pub layer: u32,
    /// Query heads, a multiple of the layer's kv heads.
    pub q_heads: u32,
    /// Element type of query and out.
    pub q_dtype: Dtype,
    /// `[batch][q_heads][head_dim]` queries.
    pub query: *const c_void,
    /// `[batch][q_heads][head_dim]` outputs.
    pub out: *mut c_void,
    /// Workspace sizing: the longest length to plan for; 0 = now.
    pub max_seq_len: u32,
    /// Score scale; 0 means `1 / sqrt(head_dim)`.
    pub softmax_scale: f32,
    /// fp8 dequantization scale of K.
    pub k_scale: f32,
    /// fp8 dequantization scale of V.
    pub v_scale: f32,
    /// Scratch (device memory on CUDA).
    pub workspace: *mut c_void,
    /// Bytes at workspace.
    pub workspace_bytes: u64,
}

impl Default for RawStatefulDecode {
    /// As `KVC_STATEFUL_DECODE_ARGS_INIT`.
    fn default() -> Self {
        RawStatefulDecode {
            layer: 0,
            q_heads: 0,
            q_dtype: Dtype::Other(0),
            query: ptr::null(),
            out: ptr::null_mut(),
            max_seq_len: 0,
            softmax_scale: 0.0,
            k_scale: 1.0,
            v_scale: 1.0,
            workspace: ptr::null_mut(),
            workspace_bytes: 0,
        }
    }
}

impl RawStatefulDecode {
    pub(crate) fn to_c(self) -> sys::kvc_stateful_decode_args_t {
        let mut a = sized!(sys::kvc_stateful_decode_args_t);
        a.layer = self.layer;
        a.q_heads = self.q_heads;
        a.q_dtype = self.q_dtype.raw();
        a.query = self.query;
        a.out = self.out;
        a.max_seq_len = self.max_seq_len;
        a.softmax_scale = self.softmax_scale;
        a.k_scale = self.k_scale;
        a.v_scale = self.v_scale;
        a.workspace = self.workspace;
        a.workspace_bytes = self.workspace_bytes;
        a
    }
}

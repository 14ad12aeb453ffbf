//! Storing K/V: [`StoreKv`] on host slices, [`RawStoreArgs`] and
//! [`StoreStrides`] with raw pointers, and the calls that take them.
use std::ffi::c_void;
use std::ptr;

use kvcache_sys as sys;

use super::{check_len, check_reach, tensor_bytes};
use crate::cache::{sized, Cache, OnStream};
use crate::error::{check, Error, Result};
use crate::types::{Dtype, Element, Stream};

/// What [`Cache::store_kv`] writes: the K (and V) of `slot_mapping.len()`
/// tokens of one layer, each `[tokens][kv_heads][head_dim]` of `src_dtype`.
#[derive(Clone, Copy, Debug)]
pub struct StoreKv<'a, T: Element> {
    /// Model layer.
    pub layer: u32,
    /// Tensor parallelism: the rank whose pool is used (0 with one rank;
    /// its share of the heads, `Cache::layer_view_rank`).
    pub rank: u32,
    /// Element type of `key` and `value`: the cache dtype, or f32, f16 or
    /// bf16 for an fp8-e4m3 cache (quantized with the scales).
    pub src_dtype: Dtype,
    /// `[tokens][kv_heads][head_dim]` keys.
    pub key: &'a [T],
    /// Values of the same shape; `None` iff the cache's kv_factor is 1.
    pub value: Option<&'a [T]>,
    /// Slot of each token (`block_id * tokens_per_block + offset`), or -1
    /// to skip it.
    pub slot_mapping: &'a [i64],
    /// fp8 quantization scale of K (> 0; default 1).
    pub k_scale: f32,
    /// fp8 quantization scale of V (> 0; default 1).
    pub v_scale: f32,
}

impl<'a, T: Element> StoreKv<'a, T> {
    /// Arguments with scales 1.
    pub fn new(
        layer: u32,
        src_dtype: Dtype,
        key: &'a [T],
        value: Option<&'a [T]>,
        slot_mapping: &'a [i64],
    ) -> Self {
        StoreKv {
            layer,
            rank: 0,
            src_dtype,
            key,
            value,
            slot_mapping,
            k_scale: 1.0,
            v_scale: 1.0,
        }
    }

    /// The same arguments as raw pointers into the slices.
    fn raw(&self, num_tokens: u32) -> RawStoreArgs {
        RawStoreArgs {
            layer: self.layer,
            rank: self.rank,
            num_tokens,
            src_dtype: self.src_dtype,
            key: self.key.as_ptr().cast(),
            value: self.value.map_or(ptr::null(), |v| v.as_ptr().cast()),
            slot_mapping: self.slot_mapping.as_ptr(),
            k_scale: self.k_scale,
            v_scale: self.v_scale,
        }
    }
}

/// `kvc_store_args_t` with raw pointers (device pointers on a CUDA cache),
/// for [`OnStream::store_kv_raw`].
#[derive(Clone, Copy, Debug)]
pub struct RawStoreArgs {
    /// Model layer.
    pub layer: u32,
    /// Tensor parallelism: the rank whose pool is used (0 with one rank;
    /// its share of the heads, `Cache::layer_view_rank`).
    pub rank: u32,
    /// Tokens at key, value and slot_mapping.
    pub num_tokens: u32,
    /// Element type of key and value.
    pub src_dtype: Dtype,
    /// `[num_tokens][kv_heads][head_dim]` keys.
    pub key: *const c_void,
    /// Values of the same shape; NULL iff kv_factor is 1.
    pub value: *const c_void,
    /// `[num_tokens]` slots or -1.
    pub slot_mapping: *const i64,
    /// fp8 quantization scale of K.
    pub k_scale: f32,
    /// fp8 quantization scale of V.
    pub v_scale: f32,
}

impl Default for RawStoreArgs {
    /// As `KVC_STORE_ARGS_INIT`: NULL pointers, no tokens, src_dtype unset
    /// (`Dtype::Other(0)`), scales 1.
    fn default() -> Self {
        RawStoreArgs {
            layer: 0,
            rank: 0,
            num_tokens: 0,
            src_dtype: Dtype::Other(0),
            key: ptr::null(),
            value: ptr::null(),
            slot_mapping: ptr::null(),
            k_scale: 1.0,
            v_scale: 1.0,
        }
    }
}

impl RawStoreArgs {
    pub(crate) fn to_c(self) -> sys::kvc_store_args_t {
        let mut a = sized!(sys::kvc_store_args_t);
        a.layer = self.layer;
        a.rank = self.rank;
        a.num_tokens = self.num_tokens;
        a.src_dtype = self.src_dtype.raw();
        a.key = self.key;
        a.value = self.value;
        a.slot_mapping = self.slot_mapping;
        a.k_scale = self.k_scale;
        a.v_scale = self.v_scale;
        a
    }
}

/// `kvc_store_strides_t`: where [`Cache::store_kv_strided`] and
/// [`OnStream::store_kv_strided_raw`] read each token's K and V. Token i is
/// token `i % seq_len` of source sequence `i / seq_len`; head h of it
/// starts at element `b * key[0] + t * key[1] + h * key[2]` of the key
/// (`value` likewise); the head dimension is contiguous. Strides count
/// elements of `src_dtype`. A model's `[batch][kv_heads][n][head_dim]`
/// tensor with strides `(s0, s1, s2, 1)` is `seq_len: n, key: [s0, s2, s1]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStrides {
    /// Tokens per source sequence; 0 means all tokens (one sequence).
    pub seq_len: u32,
    /// Element strides of the key: between sequences, tokens, heads.
    pub key: [i64; 3],
    /// Element strides of the value (unread when kv_factor is 1).
    pub value: [i64; 3],
}

impl StoreStrides {
    pub(crate) fn to_c(self) -> sys::kvc_store_strides_t {
        let mut s = sized!(sys::kvc_store_strides_t);
        s.seq_len = self.seq_len;
        s.key_seq_stride = self.key[0];
        s.key_token_stride = self.key[1];
        s.key_head_stride = self.key[2];
        s.value_seq_stride = self.value[0];
        s.value_token_stride = self.value[1];
        s.value_head_stride = self.value[2];
        s
    }

    /// Bytes a source read through `strides` spans from its element 0:
    /// the farthest element read plus one, of `elem` bytes each. Strides
    /// must be >= 0 (a slice has no elements before its first).
    fn reach(
        what: &str,
        name: &str,
        strides: [i64; 3],
        counts: [usize; 3],
        head_dim: u32,
        elem: usize,
    ) -> Result<usize> {
        if strides.iter().any(|&s| s < 0) {
            return Err(Error::invalid(format!(
                "{what}: {name} strides {strides:?} must be >= 0 for a slice; use store_kv_strided_raw"
            )));
        }
        let mut last = head_dim as u128;
        for (s, n) in strides.iter().zip(counts) {
            last += (*s as u128) * (n.saturating_sub(1) as u128);
        }
        usize::try_from(last * elem as u128)
            .map_err(|_| Error::invalid(format!("{what}: the {name} reach overflows")))
    }
}

impl Cache {
    /// Stores the K (and V) of tokens of one layer into their slots on a
    /// CPU cache (`kvc_store_kv`). The slices' lengths are checked against
    /// the layer's shape, and the library checks every slot before writing.
    pub fn store_kv<T: Element>(&self, args: &StoreKv<'_, T>) -> Result<()> {
        const WHAT: &str = "store_kv";
        let view = self.host_layer(WHAT, args.layer)?;
        let tokens = args.slot_mapping.len();
        let num_tokens = u32::try_from(tokens).map_err(|_| {
            Error::invalid(format!("{WHAT}: {tokens} tokens is more than 2^32 - 1"))
        })?;
        let bytes = tensor_bytes(WHAT, tokens, view.kv_heads, view.head_dim, args.src_dtype)?;
        check_len(WHAT, "key", args.key, bytes, args.src_dtype)?;
        if let Some(value) = args.value {
            check_len(WHAT, "value", value, bytes, args.src_dtype)?;
        }
        let raw = args.raw(num_tokens).to_c();
        let _memory = self.memory_write();
        // SAFETY: CPU cache: the work runs in the call on host memory; key,
        // value and slot_mapping hold exactly num_tokens tokens of the
        // layer's shape (checked above); the library checks the slots
        // before writing.
        check(unsafe { sys::kvc_store_kv(self.as_ptr(), &raw, ptr::null_mut()) })
    }

    /// [`Cache::store_kv`] reading K and V through `strides` on a CPU
    /// cache (`kvc_store_kv_strided`), e.g. from a model's
    /// `[batch][kv_heads][n][head_dim]` tensors without a copy. Each slice
    /// must reach the farthest element the strides address (non-negative
    /// strides); `slot_mapping.len()` tokens, a multiple of `seq_len`.
    pub fn store_kv_strided<T: Element>(
        &self,
        args: &StoreKv<'_, T>,
        strides: &StoreStrides,
    ) -> Result<()> {
        const WHAT: &str = "store_kv_strided";
        let view = self.host_layer(WHAT, args.layer)?;
        let tokens = args.slot_mapping.len();
        let num_tokens = u32::try_from(tokens).map_err(|_| {
            Error::invalid(format!("{WHAT}: {tokens} tokens is more than 2^32 - 1"))
        })?;
        let seq_len = if strides.seq_len == 0 {
            tokens.max(1)
        } else {
            strides.seq_len as usize
        };
        if tokens % seq_len != 0 {
            return Err(Error::invalid(format!(
                "{WHAT}: {tokens} tokens is not a multiple of seq_len {seq_len}"
            )));
        }
        let elem = args
            .src_dtype
            .size()
            .ok_or_else(|| Error::invalid(format!("{WHAT}: unknown dtype {:?}", args.src_dtype)))?;
        let counts = [tokens / seq_len, seq_len, view.kv_heads as usize];
        if tokens > 0 {
            let need = StoreStrides::reach(WHAT, "key", strides.key, counts, view.head_dim, elem)?;
            check_reach(WHAT, "key", args.key, need, args.src_dtype)?;
            if let Some(value) = args.value {
                let need =
                    StoreStrides::reach(WHAT, "value", strides.value, counts, view.head_dim, elem)?;
                check_reach(WHAT, "value", value, need, args.src_dtype)?;
            }
        }
        let raw = args.raw(num_tokens).to_c();
        let strides = strides.to_c();
        let _memory = self.memory_write();
        // SAFETY: CPU cache: the work runs in the call on host memory; every
        // element the strides address lies inside key and value (checked
        // above, strides >= 0); the library checks the slots before writing.
        check(unsafe { sys::kvc_store_kv_strided(self.as_ptr(), &raw, &strides, ptr::null_mut()) })
    }

    /// [`OnStream::store_kv_raw`] on the default stream.
    ///
    /// # Safety
    /// As [`OnStream::store_kv_raw`].
    pub unsafe fn store_kv_raw(&self, args: &RawStoreArgs) -> Result<()> {
        self.on(Stream::DEFAULT).store_kv_raw(args)
    }

    /// [`OnStream::store_kv_strided_raw`] on the default stream.
    ///
    /// # Safety
    /// As [`OnStream::store_kv_strided_raw`].
    pub unsafe fn store_kv_strided_raw(
        &self,
        args: &RawStoreArgs,
        strides: &StoreStrides,
    ) -> Result<()> {
        self.on(Stream::DEFAULT).store_kv_strided_raw(args, strides)
    }
}

impl OnStream<'_> {
    /// Stores K/V through a slot mapping with raw pointers
    /// (`kvc_store_kv`), enqueued on this stream on a CUDA cache.
    ///
    /// # Safety
    /// The pointers must be valid for the shapes in `args` on the cache's
    /// device (device memory on CUDA, host memory on CPU) and stay valid
    /// until the work completes; on a CUDA cache, slots out of range are
    /// skipped and reported by [`OnStream::async_error`].
    pub unsafe fn store_kv_raw(&self, args: &RawStoreArgs) -> Result<()> {
        let raw = args.to_c();
        let _memory = self.cache.memory_write();
        check(sys::kvc_store_kv(
            self.cache.as_ptr(),
            &raw,
            self.stream.as_raw(),
        ))
    }

    /// Stores K/V read through `strides` with raw pointers
    /// (`kvc_store_kv_strided`), enqueued on this stream on a CUDA cache:
    /// `key` and `value` point at element 0 of their tensors.
    ///
    /// # Safety
    /// Every element the strides address must be valid on the cache's
    /// device and stay valid until the work completes; as
    /// [`OnStream::store_kv_raw`] otherwise.
    pub unsafe fn store_kv_strided_raw(
        &self,
        args: &RawStoreArgs,
        strides: &StoreStrides,
    ) -> Result<()> {
        let raw = args.to_c();
        let strides = strides.to_c();
        let _memory = self.cache.memory_write();
        check(sys::kvc_store_kv_strided(
            self.cache.as_ptr(),
            &raw,
            &strides,
            self.stream.as_raw(),
        ))
    }
}

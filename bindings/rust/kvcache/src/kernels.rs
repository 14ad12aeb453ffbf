//! Kernels on a cache's memory: store K/V through a slot mapping, paged
//! decode and prefill attention, block copies.
//!
//! On a CPU cache the data live in host memory and run synchronously:
//! [`Cache::store_kv`], [`Cache::decode_attention`] and
//! [`Cache::prefill_attention`] take slices, checked against the layer's
//! shape before anything runs, and are safe. On a CUDA cache the data are
//! device pointers that Rust cannot check: [`OnStream::store_kv_raw`],
//! [`OnStream::decode_attention_raw`] and
//! [`OnStream::prefill_attention_raw`] are `unsafe`. Block copies take host lists of block ids on every device and
//! are safe.

use std::ffi::c_void;
use std::mem::size_of_val;
use std::ptr;

use kvcache_sys as sys;

use crate::cache::{sized, Cache, LayerView, OnStream};
use crate::error::{check, Error, Result};
use crate::types::{Device, Dtype, Element, Stream};

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
}

/// Block tables given to decode attention.
#[derive(Clone, Copy, Debug)]
pub enum BlockTables<'a> {
    /// `table[b * stride + j]` is block j of sequence b.
    Padded {
        /// Row-major `[batch][stride]` block ids.
        table: &'a [i32],
        /// Entries per row.
        stride: u32,
    },
    /// FlashInfer's CSR: sequence b's blocks are
    /// `indices[indptr[b]..indptr[b + 1]]`.
    Csr {
        /// `batch + 1` offsets, starting at 0.
        indptr: &'a [i32],
        /// Block ids.
        indices: &'a [i32],
    },
}

/// What [`Cache::decode_attention`] computes: one query token per sequence
/// against its cached K/V of one layer.
#[derive(Clone, Copy, Debug)]
pub struct Decode<'a, T: Element> {
    /// Model layer.
    pub layer: u32,
    /// Tensor parallelism: the rank whose pool is used (0 with one rank;
    /// its share of the heads, `Cache::layer_view_rank`).
    pub rank: u32,
    /// Query heads, a multiple of the layer's kv heads.
    pub q_heads: u32,
    /// Element type of `query` and the output.
    pub q_dtype: Dtype,
    /// `[batch][q_heads][head_dim]` queries.
    pub query: &'a [T],
    /// Tokens of each sequence; `batch` is its length.
    pub seq_lens: &'a [i32],
    /// Blocks of each sequence.
    pub tables: BlockTables<'a>,
    /// Upper bound of every sequence length (> 0 when batch > 0).
    pub max_seq_len: u32,
    /// Attend to the last `window` tokens; 0 means the layer's window.
    pub window: u32,
    /// Score scale; 0 means `1 / sqrt(head_dim)`.
    pub softmax_scale: f32,
    /// fp8 dequantization scale of K (default 1).
    pub k_scale: f32,
    /// fp8 dequantization scale of V (default 1).
    pub v_scale: f32,
}

impl<'a, T: Element> Decode<'a, T> {
    /// Arguments with the layer's window, the default softmax scale and
    /// scales 1.
    pub fn new(
        layer: u32,
        q_heads: u32,
        q_dtype: Dtype,
        query: &'a [T],
        seq_lens: &'a [i32],
        tables: BlockTables<'a>,
        max_seq_len: u32,
    ) -> Self {
        Decode {
            layer,
            rank: 0,
            q_heads,
            q_dtype,
            query,
            seq_lens,
            tables,
            max_seq_len,
            window: 0,
            softmax_scale: 0.0,
            k_scale: 1.0,
            v_scale: 1.0,
        }
    }
}

/// What [`Cache::prefill_attention`] computes: a ragged batch of new query
/// tokens, causal among themselves, against all the cached K/V of their
/// sequences (chunked prefill, prefix reuse, mixed prefill and decode).
#[derive(Clone, Copy, Debug)]
pub struct Prefill<'a, T: Element> {
    /// Model layer.
    pub layer: u32,
    /// Tensor parallelism: the rank whose pool is used (0 with one rank;
    /// its share of the heads, `Cache::layer_view_rank`).
    pub rank: u32,
    /// Query heads, a multiple of the layer's kv heads.
    pub q_heads: u32,
    /// Element type of `query` and the output.
    pub q_dtype: Dtype,
    /// `[total_q][q_heads][head_dim]` queries; `total_q = qo_indptr[batch]`.
    pub query: &'a [T],
    /// `batch + 1` query row offsets (FlashInfer's qo_indptr), from 0.
    pub qo_indptr: &'a [i32],
    /// Tokens of each sequence, its new ones included; `batch` is its length.
    pub kv_lens: &'a [i32],
    /// Blocks of each sequence.
    pub tables: BlockTables<'a>,
    /// Upper bound of every kv length (> 0 when batch > 0).
    pub max_kv_len: u32,
    /// Attend to the last `window` tokens of each query; 0 means the layer's.
    pub window: u32,
    /// Score scale; 0 means `1 / sqrt(head_dim)`.
    pub softmax_scale: f32,
    /// Soft cap of the scores (`cap * tanh(s / cap)`); 0 means none.
    pub logits_soft_cap: f32,
    /// fp8 dequantization scale of K (default 1).
    pub k_scale: f32,
    /// fp8 dequantization scale of V (default 1).
    pub v_scale: f32,
}

impl<'a, T: Element> Prefill<'a, T> {
    /// Arguments with the layer's window, the default softmax scale, no
    /// soft cap and scales 1.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        layer: u32,
        q_heads: u32,
        q_dtype: Dtype,
        query: &'a [T],
        qo_indptr: &'a [i32],
        kv_lens: &'a [i32],
        tables: BlockTables<'a>,
        max_kv_len: u32,
    ) -> Self {
        Prefill {
            layer,
            rank: 0,
            q_heads,
            q_dtype,
            query,
            qo_indptr,
            kv_lens,
            tables,
            max_kv_len,
            window: 0,
            softmax_scale: 0.0,
            logits_soft_cap: 0.0,
            k_scale: 1.0,
            v_scale: 1.0,
        }
    }
}

/// Block table format of [`RawDecodeArgs`] (`kvc_table_format_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TableFormat {
    /// `KVC_TABLE_PADDED`.
    Padded,
    /// `KVC_TABLE_CSR`.
    Csr,
    /// A value this binding does not know (a newer library).
    Other(u32),
}

impl TableFormat {
    /// The C value.
    pub fn raw(self) -> sys::kvc_table_format_t {
        match self {
            TableFormat::Padded => sys::KVC_TABLE_PADDED,
            TableFormat::Csr => sys::KVC_TABLE_CSR,
            TableFormat::Other(raw) => raw,
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

/// `kvc_decode_args_t` with raw pointers (device pointers on a CUDA cache),
/// for [`OnStream::decode_attention_raw`] and
/// [`Cache::decode_workspace_size`].
#[derive(Clone, Copy, Debug)]
pub struct RawDecodeArgs {
    /// Model layer.
    pub layer: u32,
    /// Tensor parallelism: the rank whose pool is used (0 with one rank;
    /// its share of the heads, `Cache::layer_view_rank`).
    pub rank: u32,
    /// Sequences.
    pub batch: u32,
    /// Query heads.
    pub q_heads: u32,
    /// Element type of query and out.
    pub q_dtype: Dtype,
    /// Padded or CSR tables.
    pub table_format: TableFormat,
    /// `[batch][q_heads][head_dim]` queries.
    pub query: *const c_void,
    /// `[batch][q_heads][head_dim]` outputs.
    pub out: *mut c_void,
    /// `[batch]` sequence lengths.
    pub seq_lens: *const i32,
    /// Padded `[batch][table_stride]` block ids, or CSR indices.
    pub block_table: *const i32,
    /// CSR: `[batch + 1]` offsets; NULL when padded.
    pub indptr: *const i32,
    /// Padded: entries per row; 0 for CSR.
    pub table_stride: u32,
    /// Upper bound of every sequence length.
    pub max_seq_len: u32,
    /// Attended window; 0 means the layer's.
    pub window: u32,
    /// Score scale; 0 means `1 / sqrt(head_dim)`.
    pub softmax_scale: f32,
    /// fp8 dequantization scale of K.
    pub k_scale: f32,
    /// fp8 dequantization scale of V.
    pub v_scale: f32,
    /// Scratch memory (device memory on CUDA).
    pub workspace: *mut c_void,
    /// Bytes at workspace.
    pub workspace_bytes: u64,
}

impl Default for RawDecodeArgs {
    /// As `KVC_DECODE_ARGS_INIT`: padded tables, scales 1, NULL pointers.
    fn default() -> Self {
        RawDecodeArgs {
            layer: 0,
            rank: 0,
            batch: 0,
            q_heads: 0,
            q_dtype: Dtype::Other(0),
            table_format: TableFormat::Padded,
            query: ptr::null(),
            out: ptr::null_mut(),
            seq_lens: ptr::null(),
            block_table: ptr::null(),
            indptr: ptr::null(),
            table_stride: 0,
            max_seq_len: 0,
            window: 0,
            softmax_scale: 0.0,
            k_scale: 1.0,
            v_scale: 1.0,
            workspace: ptr::null_mut(),
            workspace_bytes: 0,
        }
    }
}

impl RawDecodeArgs {
    pub(crate) fn to_c(self) -> sys::kvc_decode_args_t {
        let mut a = sized!(sys::kvc_decode_args_t);
        a.layer = self.layer;
        a.rank = self.rank;
        a.batch = self.batch;
        a.q_heads = self.q_heads;
        a.q_dtype = self.q_dtype.raw();
        a.table_format = self.table_format.raw();
        a.query = self.query;
        a.out = self.out;
        a.seq_lens = self.seq_lens;
        a.block_table = self.block_table;
        a.indptr = self.indptr;
        a.table_stride = self.table_stride;
        a.max_seq_len = self.max_seq_len;
        a.window = self.window;
        a.softmax_scale = self.softmax_scale;
        a.k_scale = self.k_scale;
        a.v_scale = self.v_scale;
        a.workspace = self.workspace;
        a.workspace_bytes = self.workspace_bytes;
        a
    }
}

/// `kvc_prefill_args_t` with raw pointers, for
/// [`OnStream::prefill_attention_raw`] and [`Cache::prefill_workspace_size`].
/// `qo_indptr` and `kv_lens` are host memory on every device; the rest is
/// device memory on a CUDA cache.
#[derive(Clone, Copy, Debug)]
pub struct RawPrefillArgs {
    /// Model layer.
    pub layer: u32,
    /// Tensor parallelism: the rank whose pool is used (0 with one rank;
    /// its share of the heads, `Cache::layer_view_rank`).
    pub rank: u32,
    /// Sequences.
    pub batch: u32,
    /// Query rows (`qo_indptr[batch]`).
    pub total_q: u32,
    /// Query heads.
    pub q_heads: u32,
    /// Element type of query and out.
    pub q_dtype: Dtype,
    /// Padded or CSR tables.
    pub table_format: TableFormat,
    /// `[total_q][q_heads][head_dim]` queries.
    pub query: *const c_void,
    /// `[total_q][q_heads][head_dim]` outputs.
    pub out: *mut c_void,
    /// `[total_q][q_heads]` log-sum-exp of the scores, or NULL.
    pub lse: *mut f32,
    /// Host `[batch + 1]` query row offsets.
    pub qo_indptr: *const i32,
    /// Host `[batch]` kv lengths.
    pub kv_lens: *const i32,
    /// Padded `[batch][table_stride]` block ids, or CSR indices.
    pub block_table: *const i32,
    /// CSR: `[batch + 1]` offsets; NULL when padded.
    pub indptr: *const i32,
    /// Padded: entries per row; 0 for CSR.
    pub table_stride: u32,
    /// Upper bound of every kv length.
    pub max_kv_len: u32,
    /// Attended window; 0 means the layer's.
    pub window: u32,
    /// Score scale; 0 means `1 / sqrt(head_dim)`.
    pub softmax_scale: f32,
    /// Soft cap of the scores; 0 means none.
    pub logits_soft_cap: f32,
    /// fp8 dequantization scale of K.
    pub k_scale: f32,
    /// fp8 dequantization scale of V.
    pub v_scale: f32,
    /// Scratch memory (device memory on CUDA).
    pub workspace: *mut c_void,
    /// Bytes at workspace.
    pub workspace_bytes: u64,
}

impl Default for RawPrefillArgs {
    /// As `KVC_PREFILL_ARGS_INIT`: padded tables, scales 1, NULL pointers.
    fn default() -> Self {
        RawPrefillArgs {
            layer: 0,
            rank: 0,
            batch: 0,
            total_q: 0,
            q_heads: 0,
            q_dtype: Dtype::Other(0),
            table_format: TableFormat::Padded,
            query: ptr::null(),
            out: ptr::null_mut(),
            lse: ptr::null_mut(),
            qo_indptr: ptr::null(),
            kv_lens: ptr::null(),
            block_table: ptr::null(),
            indptr: ptr::null(),
            table_stride: 0,
            max_kv_len: 0,
            window: 0,
            softmax_scale: 0.0,
            logits_soft_cap: 0.0,
            k_scale: 1.0,
            v_scale: 1.0,
            workspace: ptr::null_mut(),
            workspace_bytes: 0,
        }
    }
}

impl RawPrefillArgs {
    pub(crate) fn to_c(self) -> sys::kvc_prefill_args_t {
        let mut a = sized!(sys::kvc_prefill_args_t);
        a.layer = self.layer;
        a.rank = self.rank;
        a.batch = self.batch;
        a.total_q = self.total_q;
        a.q_heads = self.q_heads;
        a.q_dtype = self.q_dtype.raw();
        a.table_format = self.table_format.raw();
        a.query = self.query;
        a.out = self.out;
        a.lse = self.lse;
        a.qo_indptr = self.qo_indptr;
        a.kv_lens = self.kv_lens;
        a.block_table = self.block_table;
        a.indptr = self.indptr;
        a.table_stride = self.table_stride;
        a.max_kv_len = self.max_kv_len;
        a.window = self.window;
        a.softmax_scale = self.softmax_scale;
        a.logits_soft_cap = self.logits_soft_cap;
        a.k_scale = self.k_scale;
        a.v_scale = self.v_scale;
        a.workspace = self.workspace;
        a.workspace_bytes = self.workspace_bytes;
        a
    }
}

/// Bytes of `[rows][heads][head_dim]` elements of `dtype`.
fn tensor_bytes(what: &str, rows: usize, heads: u32, head_dim: u32, dtype: Dtype) -> Result<usize> {
    let elem = dtype
        .size()
        .ok_or_else(|| Error::invalid(format!("{what}: unknown dtype {dtype:?}")))?;
    rows.checked_mul(heads as usize)
        .and_then(|n| n.checked_mul(head_dim as usize))
        .and_then(|n| n.checked_mul(elem))
        .ok_or_else(|| Error::invalid(format!("{what}: the tensor size overflows")))
}

/// Checks that `slice` holds at least `bytes` bytes of `dtype` elements,
/// aligned for them.
fn check_reach<T>(what: &str, name: &str, slice: &[T], bytes: usize, dtype: Dtype) -> Result<()> {
    if size_of_val(slice) < bytes {
        return Err(Error::invalid(format!(
            "{what}: {name} has {} bytes, the strides reach {bytes}",
            size_of_val(slice)
        )));
    }
    check_len(what, name, slice, size_of_val(slice), dtype)
}

/// Checks that `slice` holds exactly `bytes` bytes of `dtype` elements,
/// aligned for them (a `&[u8]` may hold f32 data).
fn check_len<T>(what: &str, name: &str, slice: &[T], bytes: usize, dtype: Dtype) -> Result<()> {
    if size_of_val(slice) != bytes {
        return Err(Error::invalid(format!(
            "{what}: {name} has {} bytes, the shape needs {bytes}",
            size_of_val(slice)
        )));
    }
    let align = dtype.size().unwrap_or(1);
    if !(slice.as_ptr() as usize).is_multiple_of(align) {
        return Err(Error::invalid(format!(
            "{what}: {name} is not aligned to the {align}-byte elements of {dtype:?}"
        )));
    }
    Ok(())
}

/// Checks host tables of `rows` sequences: (format, table, indptr, stride).
fn host_tables<'a>(
    what: &str,
    rows: usize,
    tables: BlockTables<'a>,
) -> Result<(TableFormat, &'a [i32], *const i32, u32)> {
    match tables {
        BlockTables::Padded { table, stride } => {
            let need = rows
                .checked_mul(stride as usize)
                .ok_or_else(|| Error::invalid(format!("{what}: the table size overflows")))?;
            if table.len() < need {
                return Err(Error::invalid(format!(
                    "{what}: table has {} entries, {rows} rows of stride {stride} need {need}",
                    table.len()
                )));
            }
            Ok((TableFormat::Padded, table, ptr::null(), stride))
        }
        BlockTables::Csr { indptr, indices } => {
            if indptr.len() != rows + 1 {
                return Err(Error::invalid(format!(
                    "{what}: indptr has {} entries, {rows} sequences need {}",
                    indptr.len(),
                    rows + 1
                )));
            }
            if let Some((i, &at)) = indptr
                .iter()
                .enumerate()
                .find(|(_, &at)| at < 0 || at as usize > indices.len())
            {
                return Err(Error::invalid(format!(
                    "{what}: indptr[{i}] = {at} is outside [0, {}] (the length of indices)",
                    indices.len()
                )));
            }
            Ok((TableFormat::Csr, indices, indptr.as_ptr(), 0))
        }
    }
}

impl Cache {
    fn host_layer(&self, what: &str, layer: u32) -> Result<&LayerView> {
        if self.device() != Device::Cpu {
            return Err(Error::invalid(format!(
                "{what}: host slices need a CPU cache, this one is on {:?}; use the unsafe {what}_raw with device pointers",
                self.device()
            )));
        }
        self.layer_shape(layer, what)
    }

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
        let raw = RawStoreArgs {
            layer: args.layer,
            rank: args.rank,
            num_tokens,
            src_dtype: args.src_dtype,
            key: args.key.as_ptr().cast(),
            value: args.value.map_or(ptr::null(), |v| v.as_ptr().cast()),
            slot_mapping: args.slot_mapping.as_ptr(),
            k_scale: args.k_scale,
            v_scale: args.v_scale,
        }
        .to_c();
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
        let raw = RawStoreArgs {
            layer: args.layer,
            rank: args.rank,
            num_tokens,
            src_dtype: args.src_dtype,
            key: args.key.as_ptr().cast(),
            value: args.value.map_or(ptr::null(), |v| v.as_ptr().cast()),
            slot_mapping: args.slot_mapping.as_ptr(),
            k_scale: args.k_scale,
            v_scale: args.v_scale,
        }
        .to_c();
        let strides = strides.to_c();
        let _memory = self.memory_write();
        // SAFETY: CPU cache: the work runs in the call on host memory; every
        // element the strides address lies inside key and value (checked
        // above, strides >= 0); the library checks the slots before writing.
        check(unsafe { sys::kvc_store_kv_strided(self.as_ptr(), &raw, &strides, ptr::null_mut()) })
    }

    /// Paged decode attention of one layer on a CPU cache
    /// (`kvc_decode_attention`): `out` receives `[batch][q_heads][head_dim]`
    /// of `q_dtype`. Slice lengths and CSR offsets are checked here; the
    /// library checks lengths and block ids before reading.
    pub fn decode_attention<T: Element>(&self, args: &Decode<'_, T>, out: &mut [T]) -> Result<()> {
        const WHAT: &str = "decode_attention";
        let view = self.host_layer(WHAT, args.layer)?;
        let rows = args.seq_lens.len();
        let batch = u32::try_from(rows).map_err(|_| {
            Error::invalid(format!("{WHAT}: {rows} sequences is more than 2^32 - 1"))
        })?;
        let bytes = tensor_bytes(WHAT, rows, args.q_heads, view.head_dim, args.q_dtype)?;
        check_len(WHAT, "query", args.query, bytes, args.q_dtype)?;
        check_len(WHAT, "out", out, bytes, args.q_dtype)?;
        let (format, table, indptr, stride) = match args.tables {
            BlockTables::Padded { table, stride } => {
                let need = rows
                    .checked_mul(stride as usize)
                    .ok_or_else(|| Error::invalid(format!("{WHAT}: the table size overflows")))?;
                if table.len() < need {
                    return Err(Error::invalid(format!(
                        "{WHAT}: table has {} entries, {rows} rows of stride {stride} need {need}",
                        table.len()
                    )));
                }
                (TableFormat::Padded, table, ptr::null(), stride)
            }
            BlockTables::Csr { indptr, indices } => {
                if indptr.len() != rows + 1 {
                    return Err(Error::invalid(format!(
                        "{WHAT}: indptr has {} entries, {rows} sequences need {}",
                        indptr.len(),
                        rows + 1
                    )));
                }
                if let Some((i, &at)) = indptr
                    .iter()
                    .enumerate()
                    .find(|(_, &at)| at < 0 || at as usize > indices.len())
                {
                    return Err(Error::invalid(format!(
                        "{WHAT}: indptr[{i}] = {at} is outside [0, {}] (the length of indices)",
                        indices.len()
                    )));
                }
                (TableFormat::Csr, indices, indptr.as_ptr(), 0)
            }
        };
        let raw = RawDecodeArgs {
            layer: args.layer,
            rank: args.rank,
            batch,
            q_heads: args.q_heads,
            q_dtype: args.q_dtype,
            table_format: format,
            query: args.query.as_ptr().cast(),
            out: out.as_mut_ptr().cast(),
            seq_lens: args.seq_lens.as_ptr(),
            block_table: table.as_ptr(),
            indptr,
            table_stride: stride,
            max_seq_len: args.max_seq_len,
            window: args.window,
            softmax_scale: args.softmax_scale,
            k_scale: args.k_scale,
            v_scale: args.v_scale,
            workspace: ptr::null_mut(),
            workspace_bytes: 0,
        }
        .to_c();
        let _memory = self.memory_read();
        // SAFETY: CPU cache: the work runs in the call. query and out hold
        // [batch][q_heads][head_dim] of q_dtype; a padded table holds batch
        // rows of `stride` entries and the library checks stride against
        // max_seq_len and every length against max_seq_len; CSR offsets lie
        // in indices (checked above) and the library checks that each
        // sequence's range holds its blocks. A CPU cache needs no workspace.
        check(unsafe { sys::kvc_decode_attention(self.as_ptr(), &raw, ptr::null_mut()) })
    }

    /// Paged prefill attention of one layer on a CPU cache
    /// (`kvc_prefill_attention`): `out` receives `[total_q][q_heads][head_dim]`
    /// of `q_dtype` and `lse`, when given, `[total_q][q_heads]` log-sum-exps.
    /// Slice lengths and CSR offsets are checked here; the library checks
    /// qo_indptr, lengths and block ids before reading.
    pub fn prefill_attention<T: Element>(
        &self,
        args: &Prefill<'_, T>,
        out: &mut [T],
        lse: Option<&mut [f32]>,
    ) -> Result<()> {
        const WHAT: &str = "prefill_attention";
        let view = self.host_layer(WHAT, args.layer)?;
        let rows = args.kv_lens.len();
        let batch = u32::try_from(rows).map_err(|_| {
            Error::invalid(format!("{WHAT}: {rows} sequences is more than 2^32 - 1"))
        })?;
        if args.qo_indptr.len() != rows + 1 {
            return Err(Error::invalid(format!(
                "{WHAT}: qo_indptr has {} entries, {rows} sequences need {}",
                args.qo_indptr.len(),
                rows + 1
            )));
        }
        let last = args.qo_indptr[rows];
        let total_q = u32::try_from(last).map_err(|_| {
            Error::invalid(format!("{WHAT}: qo_indptr[{rows}] = {last} is negative"))
        })?;
        let bytes = tensor_bytes(
            WHAT,
            total_q as usize,
            args.q_heads,
            view.head_dim,
            args.q_dtype,
        )?;
        check_len(WHAT, "query", args.query, bytes, args.q_dtype)?;
        check_len(WHAT, "out", out, bytes, args.q_dtype)?;
        let lse_ptr = match lse {
            Some(l) => {
                let need = total_q as usize * args.q_heads as usize;
                if l.len() != need {
                    return Err(Error::invalid(format!(
                        "{WHAT}: lse has {} entries, total_q {total_q} x q_heads {} need {need}",
                        l.len(),
                        args.q_heads
                    )));
                }
                l.as_mut_ptr()
            }
            None => ptr::null_mut(),
        };
        let (format, table, indptr, stride) = host_tables(WHAT, rows, args.tables)?;
        let raw = RawPrefillArgs {
            layer: args.layer,
            rank: args.rank,
            batch,
            total_q,
            q_heads: args.q_heads,
            q_dtype: args.q_dtype,
            table_format: format,
            query: args.query.as_ptr().cast(),
            out: out.as_mut_ptr().cast(),
            lse: lse_ptr,
            qo_indptr: args.qo_indptr.as_ptr(),
            kv_lens: args.kv_lens.as_ptr(),
            block_table: table.as_ptr(),
            indptr,
            table_stride: stride,
            max_kv_len: args.max_kv_len,
            window: args.window,
            softmax_scale: args.softmax_scale,
            logits_soft_cap: args.logits_soft_cap,
            k_scale: args.k_scale,
            v_scale: args.v_scale,
            workspace: ptr::null_mut(),
            workspace_bytes: 0,
        }
        .to_c();
        let _memory = self.memory_read();
        // SAFETY: CPU cache: the work runs in the call. qo_indptr holds
        // batch + 1 offsets and kv_lens batch lengths; the library checks
        // that qo_indptr starts at 0, never decreases and ends at total_q
        // before reading query, out or lse, which hold total_q rows (checked
        // above); a padded table holds batch rows of `stride` entries and the
        // library checks stride against max_kv_len and every length against
        // max_kv_len; CSR offsets lie in indices (checked above) and the
        // library checks each sequence's range. A CPU cache needs no
        // workspace.
        check(unsafe { sys::kvc_prefill_attention(self.as_ptr(), &raw, ptr::null_mut()) })
    }

    /// Bytes of workspace prefill attention needs for `args` (0 on a CPU
    /// cache) (`kvc_prefill_workspace_size`). Reads only; no pointer is
    /// dereferenced.
    pub fn prefill_workspace_size(&self, args: &RawPrefillArgs) -> Result<u64> {
        let raw = args.to_c();
        let mut bytes = 0;
        // SAFETY: live cache; the library reads the struct's fields, not
        // the memory its pointers name.
        check(unsafe { sys::kvc_prefill_workspace_size(self.as_ptr(), &raw, &mut bytes) })?;
        Ok(bytes)
    }

    /// [`OnStream::prefill_attention_raw`] on the default stream.
    ///
    /// # Safety
    /// As [`OnStream::prefill_attention_raw`].
    pub unsafe fn prefill_attention_raw(&self, args: &RawPrefillArgs) -> Result<()> {
        self.on(Stream::DEFAULT).prefill_attention_raw(args)
    }

    /// Bytes of workspace decode attention needs for `args` (0 on a CPU
    /// cache) (`kvc_decode_workspace_size`). Reads only; no pointer is
    /// dereferenced.
    pub fn decode_workspace_size(&self, args: &RawDecodeArgs) -> Result<u64> {
        let raw = args.to_c();
        let mut bytes = 0;
        // SAFETY: live cache; the library reads the struct's fields, not
        // the memory its pointers name.
        check(unsafe { sys::kvc_decode_workspace_size(self.as_ptr(), &raw, &mut bytes) })?;
        Ok(bytes)
    }

    /// [`OnStream::copy_blocks`] on the default stream.
    pub fn copy_blocks(
        &self,
        group: u32,
        src: &[i32],
        dst: &[i32],
        num_tokens: Option<&[u32]>,
    ) -> Result<()> {
        self.on(Stream::DEFAULT)
            .copy_blocks(group, src, dst, num_tokens)
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

    /// [`OnStream::decode_attention_raw`] on the default stream.
    ///
    /// # Safety
    /// As [`OnStream::decode_attention_raw`].
    pub unsafe fn decode_attention_raw(&self, args: &RawDecodeArgs) -> Result<()> {
        self.on(Stream::DEFAULT).decode_attention_raw(args)
    }
}

impl OnStream<'_> {
    /// Copies blocks of layer group `group` inside its pool, every layer of
    /// the group at once (`kvc_copy_blocks`): copy i copies block `src[i]`
    /// to `dst[i]`, whole or only its first `num_tokens[i]` token rows.
    /// The lists are host memory on every device; block ids are checked by
    /// the library before anything is copied.
    pub fn copy_blocks(
        &self,
        group: u32,
        src: &[i32],
        dst: &[i32],
        num_tokens: Option<&[u32]>,
    ) -> Result<()> {
        const WHAT: &str = "copy_blocks";
        if dst.len() != src.len() {
            return Err(Error::invalid(format!(
                "{WHAT}: dst has {} entries, src {}",
                dst.len(),
                src.len()
            )));
        }
        if let Some(n) = num_tokens {
            if n.len() != src.len() {
                return Err(Error::invalid(format!(
                    "{WHAT}: num_tokens has {} entries, src {}",
                    n.len(),
                    src.len()
                )));
            }
        }
        let count = u32::try_from(src.len())
            .map_err(|_| Error::invalid(format!("{WHAT}: more than 2^32 - 1 copies")))?;
        let _memory = self.cache.memory_write();
        // SAFETY: live cache; the three host lists hold `count` entries and
        // are read during the call; the library checks every block id; the
        // stream was vouched for.
        check(unsafe {
            sys::kvc_copy_blocks(
                self.cache.as_ptr(),
                group,
                src.as_ptr(),
                dst.as_ptr(),
                num_tokens.map_or(ptr::null(), |n| n.as_ptr()),
                count,
                self.stream.as_raw(),
            )
        })
    }

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

    /// Paged decode attention with raw pointers (`kvc_decode_attention`),
    /// enqueued on this stream on a CUDA cache. There the query must be
    /// 16-byte aligned, a call takes at most 65535 sequences, and f32 K/V
    /// is `Status::Unsupported` (the CPU backend computes it).
    ///
    /// # Safety
    /// Every pointer must be valid for the shapes in `args` on the cache's
    /// device and stay valid until the work completes; the workspace must
    /// hold `workspace_bytes` (see [`Cache::decode_workspace_size`]).
    pub unsafe fn decode_attention_raw(&self, args: &RawDecodeArgs) -> Result<()> {
        let raw = args.to_c();
        let _memory = self.cache.memory_read();
        check(sys::kvc_decode_attention(
            self.cache.as_ptr(),
            &raw,
            self.stream.as_raw(),
        ))
    }

    /// Paged prefill attention with raw pointers (`kvc_prefill_attention`),
    /// enqueued on this stream on a CUDA cache. There query and out must be
    /// 16-byte aligned and lse 4-byte aligned, and f32 K/V is
    /// `Status::Unsupported` (the CPU backend computes it).
    ///
    /// # Safety
    /// `qo_indptr` (batch + 1) and `kv_lens` (batch) must be valid host
    /// arrays for the call; every other pointer must be valid for the shapes
    /// in `args` on the cache's device and stay valid until the work
    /// completes; the workspace must hold `workspace_bytes` (see
    /// [`Cache::prefill_workspace_size`]).
    pub unsafe fn prefill_attention_raw(&self, args: &RawPrefillArgs) -> Result<()> {
        let raw = args.to_c();
        let _memory = self.cache.memory_read();
        check(sys::kvc_prefill_attention(
            self.cache.as_ptr(),
            &raw,
            self.stream.as_raw(),
        ))
    }
}

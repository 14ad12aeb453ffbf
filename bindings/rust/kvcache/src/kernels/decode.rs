//! Paged decode attention: [`Decode`] on host slices, [`RawDecodeArgs`]
//! with raw pointers, and the calls that take them.
use std::ffi::c_void;
use std::ptr;

use kvcache_sys as sys;

use super::{check_len, host_tables, tensor_bytes, BlockTables, TableFormat};
use crate::cache::{sized, Cache, OnStream};
use crate::error::{check, Error, Result};
use crate::types::{Dtype, Element, Stream};

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

impl Cache {
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
        let (format, table, indptr, stride) = host_tables(WHAT, rows, args.tables)?;
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

    /// [`OnStream::decode_attention_raw`] on the default stream.
    ///
    /// # Safety
    /// As [`OnStream::decode_attention_raw`].
    pub unsafe fn decode_attention_raw(&self, args: &RawDecodeArgs) -> Result<()> {
        self.on(Stream::DEFAULT).decode_attention_raw(args)
    }
}

impl OnStream<'_> {
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
}

//! Paged prefill attention: [`Prefill`] on host slices,
//! [`RawPrefillArgs`] with raw pointers, and the calls that take them.
use std::ffi::c_void;
use std::ptr;

use kvcache_sys as sys;

use super::{check_len, host_tables, tensor_bytes, BlockTables, TableFormat};
use crate::cache::{sized, Cache, OnStream};
use crate::error::{check, Error, Result};
use crate::types::{Dtype, Element, Stream};

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

impl Cache {
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
}

impl OnStream<'_> {
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

//! The stateful contiguous mode (`include/kvcache/stateful.h`): per layer
//! one K/V buffer for a fixed batch of rows, in-place append with staggered
//! growth, beam search through a beam table (no K/V gathered), indirect
//! decode attention, compaction, trim, reset and row export/import.
//!
//! On a CPU cache [`StatefulCache::append`] and [`StatefulCache::decode`]
//! take slices whose lengths are checked against the layer's shape, and are
//! safe. On a CUDA cache the data are device pointers: the `_raw` forms are
//! `unsafe`. Device work goes to the default stream unless a call is made
//! through [`StatefulCache::on`].

use std::ffi::c_void;
use std::mem::size_of_val;
use std::ptr::{self, NonNull};

use kvcache_sys as sys;

use crate::cache::sized;
use crate::config::Config;
use crate::error::{check, Error, Result, Status};
pub use crate::stateful_args::{
    GrowthPolicy, RawStatefulAppend, RawStatefulDecode, StatefulOptions,
};
use crate::types::{Device, Dtype, Element, Layout, Stream};

/// Where one layer's K/V are (`kvc_stateful_view_t`). Element (row r, head
/// h, position t, dim d) of K is at `key + r*row_stride + h*head_stride +
/// t*token_stride + d*elem_size` bytes; with a beam table, position t of
/// row r is read from row `beam_table[r * beam_table_stride + t]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatefulView {
    /// The layer.
    pub layer: u32,
    /// K of row 0 (device memory on CUDA); valid until the next call that
    /// may reallocate the layer (append, import, compact, reset).
    pub key: *mut c_void,
    /// V of row 0; equals `key` when kv_factor is 1.
    pub value: *mut c_void,
    /// Bytes between rows.
    pub row_stride: u64,
    /// Bytes between heads.
    pub head_stride: u64,
    /// Bytes between positions.
    pub token_stride: u64,
    /// Rows.
    pub batch: u32,
    /// Positions allocated per row.
    pub capacity: u32,
    /// KV heads of the layer.
    pub kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Element type.
    pub dtype: Dtype,
    /// HND or NHD.
    pub layout: Layout,
    /// Longest row of the layer now.
    pub max_length: u32,
    /// `[batch]` int32 lengths (device memory on CUDA).
    pub lengths: *const i32,
    /// `[batch][beam_table_stride]` source rows, or NULL without a table.
    pub beam_table: *const i32,
    /// Entries per table row; 0 without a table.
    pub beam_table_stride: u32,
}

// SAFETY: the pointers are addresses for external kernels; reading through
// them takes unsafe code, which must uphold the cache's lifetime.
unsafe impl Send for StatefulView {}
// SAFETY: as above.
unsafe impl Sync for StatefulView {}

/// Whole-cache statistics (`kvc_stateful_stats_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StatefulStats {
    /// Layers.
    pub num_layers: u32,
    /// Device bytes held now (K/V, beam table, lengths).
    pub bytes_allocated: u64,
    /// Most bytes held at once since creation.
    pub peak_bytes: u64,
    /// Of `bytes_allocated`: the layers' buffers.
    pub kv_bytes: u64,
    /// Of `bytes_allocated`: the beam table.
    pub table_bytes: u64,
    /// Layer growths (a first allocation is not one).
    pub reallocations: u64,
    /// Reorders that changed rows.
    pub reorders: u64,
    /// Beam table entries those reorders copied.
    pub table_entries_copied: u64,
    /// Compactions that gathered.
    pub compactions: u64,
}

/// One layer's statistics (`kvc_stateful_layer_stats_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StatefulLayerStats {
    /// The layer.
    pub layer: u32,
    /// Positions allocated per row.
    pub capacity: u32,
    /// The growth policy's offset of this layer.
    pub growth_offset: u32,
    /// Bytes of the layer's buffer.
    pub bytes: u64,
    /// Growths of this layer's buffer.
    pub reallocations: u64,
    /// Longest row when the layer last grew.
    pub last_growth_length: u32,
    /// Longest row now.
    pub max_length: u32,
}

/// A stateful cache (`kvc_stateful_t`); destroyed on drop. `Send + Sync`:
/// the library serializes the calls on one cache.
#[derive(Debug)]
pub struct StatefulCache {
    raw: NonNull<sys::kvc_stateful_t>,
    device: Device,
    batch: u32,
}

// SAFETY: every function on a stateful handle may be called from any
// thread and is serialized inside the library; Drop has exclusive use.
unsafe impl Send for StatefulCache {}
// SAFETY: as above.
unsafe impl Sync for StatefulCache {}

impl Drop for StatefulCache {
    fn drop(&mut self) {
        // SAFETY: raw came from kvc_stateful_create and is destroyed once.
        unsafe { sys::kvc_stateful_destroy(self.raw.as_ptr()) }
    }
}

/// The calls of a stateful cache whose device work goes to one stream;
/// made by [`StatefulCache::on`].
#[derive(Clone, Copy, Debug)]
pub struct StatefulOn<'a> {
    cache: &'a StatefulCache,
    stream: Stream,
}

impl StatefulCache {
    /// Creates a cache for the model of `config` on its device
    /// (`kvc_stateful_create`).
    pub fn new(config: &Config, options: &StatefulOptions) -> Result<StatefulCache> {
        let device = config.device()?;
        let opts = options.to_c();
        let mut raw = ptr::null_mut();
        // SAFETY: live config, valid options and out pointer.
        check(unsafe { sys::kvc_stateful_create(config.as_ptr(), &opts, &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "kvcache returned a NULL cache"))?;
        Ok(StatefulCache {
            raw,
            device,
            batch: options.batch,
        })
    }

    /// The C handle; it stays owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::kvc_stateful_t {
        self.raw.as_ptr()
    }

    /// Rows.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    /// The calls whose device work goes to `stream`.
    pub fn on(&self, stream: Stream) -> StatefulOn<'_> {
        StatefulOn {
            cache: self,
            stream,
        }
    }

    fn default_stream(&self) -> StatefulOn<'_> {
        self.on(Stream::DEFAULT)
    }

    /// Layer `layer`'s view (`kvc_stateful_layer_view`).
    pub fn view(&self, layer: u32) -> Result<StatefulView> {
        let mut v = sized!(sys::kvc_stateful_view_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_stateful_layer_view(self.as_ptr(), layer, &mut v) })?;
        Ok(StatefulView {
            layer: v.layer,
            key: v.key,
            value: v.value,
            row_stride: v.row_stride,
            head_stride: v.head_stride,
            token_stride: v.token_stride,
            batch: v.batch,
            capacity: v.capacity,
            kv_heads: v.kv_heads,
            head_dim: v.head_dim,
            dtype: Dtype::from_raw(v.dtype),
            layout: Layout::from_raw(v.layout),
            max_length: v.max_length,
            lengths: v.lengths,
            beam_table: v.beam_table,
            beam_table_stride: v.beam_table_stride,
        })
    }

    /// The rows' lengths in layer `layer` (`kvc_stateful_get_lengths`).
    pub fn lengths(&self, layer: u32) -> Result<Vec<u32>> {
        let mut out = vec![0u32; self.batch as usize];
        // SAFETY: live cache; out holds batch entries.
        check(unsafe {
            sys::kvc_stateful_get_lengths(self.as_ptr(), layer, out.as_mut_ptr(), self.batch)
        })?;
        Ok(out)
    }

    /// Statistics (`kvc_stateful_get_stats`).
    pub fn stats(&self) -> Result<StatefulStats> {
        let mut s = sized!(sys::kvc_stateful_stats_t);
        // SAFETY: live cache, valid out struct.
        check(unsafe { sys::kvc_stateful_get_stats(self.as_ptr(), &mut s) })?;
        Ok(StatefulStats {
            num_layers: s.num_layers,
            bytes_allocated: s.bytes_allocated,
            peak_bytes: s.peak_bytes,
            kv_bytes: s.kv_bytes,
            table_bytes: s.table_bytes,
            reallocations: s.reallocations,
            reorders: s.reorders,
            table_entries_copied: s.table_entries_copied,
            compactions: s.compactions,
        })
    }

    /// One layer's statistics (`kvc_stateful_get_layer_stats`).
    pub fn layer_stats(&self, layer: u32) -> Result<StatefulLayerStats> {
        let mut s = sized!(sys::kvc_stateful_layer_stats_t);
        // SAFETY: live cache, valid out struct.
        check(unsafe { sys::kvc_stateful_get_layer_stats(self.as_ptr(), layer, &mut s) })?;
        Ok(StatefulLayerStats {
            layer: s.layer,
            capacity: s.capacity,
            growth_offset: s.growth_offset,
            bytes: s.bytes,
            reallocations: s.reallocations,
            last_growth_length: s.last_growth_length,
            max_length: s.max_length,
        })
    }

    /// Workspace bytes of a decode call (`kvc_stateful_decode_workspace_size`;
    /// only the args' layer, q_heads, q_dtype and max_seq_len matter).
    pub fn decode_workspace_size(&self, args: &RawStatefulDecode) -> Result<u64> {
        let a = args.to_c();
        let mut bytes = 0u64;
        // SAFETY: live cache, valid args and out pointer; no pointer is read.
        check(unsafe { sys::kvc_stateful_decode_workspace_size(self.as_ptr(), &a, &mut bytes) })?;
        Ok(bytes)
    }

    fn host_only(&self, what: &str) -> Result<()> {
        match self.device {
            Device::Cpu => Ok(()),
            _ => Err(Error::invalid(format!(
                "{what} takes host slices and works on a CPU cache; use {what}_raw with device pointers"
            ))),
        }
    }

    /// Appends `num_tokens` positions of one layer for every row (each row
    /// its first `row_tokens[r]` of them when given) on a CPU cache. `key`
    /// and `value` hold `[batch][num_tokens][heads][head_dim]` (NHD) or
    /// `[batch][heads][num_tokens][head_dim]` (HND) elements of `src_dtype`.
    #[allow(clippy::too_many_arguments)]
    pub fn append<T: Element>(
        &self,
        layer: u32,
        num_tokens: u32,
        src_dtype: Dtype,
        key: &[T],
        value: Option<&[T]>,
        row_tokens: Option<&[u32]>,
    ) -> Result<()> {
        self.host_only("append")?;
        let v = self.view(layer)?;
        let elem = src_dtype
            .size()
            .ok_or_else(|| Error::invalid(format!("append: unknown dtype {src_dtype:?}")))?;
        let bytes = self.batch as usize
            * num_tokens as usize
            * v.kv_heads as usize
            * v.head_dim as usize
            * elem;
        for (name, s) in [("key", Some(key)), ("value", value)] {
            if let Some(s) = s {
                if size_of_val(s) != bytes {
                    return Err(Error::invalid(format!(
                        "append: {name} has {} bytes, the shape needs {bytes}",
                        size_of_val(s)
                    )));
                }
            }
        }
        if let Some(r) = row_tokens {
            if r.len() != self.batch as usize {
                return Err(Error::invalid(format!(
                    "append: row_tokens has {} entries, the cache has batch {}",
                    r.len(),
                    self.batch
                )));
            }
        }
        let args = RawStatefulAppend {
            layer,
            num_tokens,
            src_dtype,
            key: key.as_ptr().cast(),
            value: value.map_or(ptr::null(), |s| s.as_ptr().cast()),
            row_tokens: row_tokens.map_or(ptr::null(), |r| r.as_ptr()),
            ..RawStatefulAppend::default()
        };
        // SAFETY: host slices of the checked sizes on a CPU cache.
        unsafe { self.default_stream().append_raw(&args) }
    }

    /// Decode attention of one layer for every row, reading K/V through the
    /// beam table, on a CPU cache: `query` and `out` are
    /// `[batch][q_heads][head_dim]` of `q_dtype` (the cache dtype; f16 or
    /// bf16 for an fp8 cache).
    pub fn decode<T: Element>(
        &self,
        layer: u32,
        q_heads: u32,
        q_dtype: Dtype,
        query: &[T],
        out: &mut [T],
    ) -> Result<()> {
        self.host_only("decode")?;
        let v = self.view(layer)?;
        let n = self.batch as usize * q_heads as usize * v.head_dim as usize;
        let bytes = n * q_dtype.size().unwrap_or(0);
        if size_of_val(query) != bytes || size_of_val(out) != bytes {
            return Err(Error::invalid(format!(
                "decode: query and out must hold {bytes} bytes, got {} and {}",
                size_of_val(query),
                size_of_val(out)
            )));
        }
        let args = RawStatefulDecode {
            layer,
            q_heads,
            q_dtype,
            query: query.as_ptr().cast(),
            out: out.as_mut_ptr().cast(),
            ..RawStatefulDecode::default()
        };
        // SAFETY: host slices of the checked sizes on a CPU cache.
        unsafe { self.default_stream().decode_raw(&args) }
    }

    /// [`StatefulOn::reorder`] on the default stream.
    pub fn reorder(&self, beam_idx: &[i32]) -> Result<()> {
        self.default_stream().reorder(beam_idx)
    }
    /// [`StatefulOn::compact`] on the default stream.
    pub fn compact(&self) -> Result<()> {
        self.default_stream().compact()
    }
    /// [`StatefulOn::trim`] on the default stream.
    pub fn trim(&self, row: Option<u32>, num_tokens: u32) -> Result<()> {
        self.default_stream().trim(row, num_tokens)
    }
    /// [`StatefulOn::reset`] on the default stream.
    pub fn reset(&self, release_memory: bool) -> Result<()> {
        self.default_stream().reset(release_memory)
    }
    /// [`StatefulOn::export_row`] on the default stream.
    pub fn export_row(&self, row: u32) -> Result<Vec<u8>> {
        self.default_stream().export_row(row)
    }
    /// [`StatefulOn::import_row`] on the default stream.
    pub fn import_row(&self, row: u32, state: &[u8]) -> Result<()> {
        self.default_stream().import_row(row, state)
    }
    /// [`StatefulOn::async_error`] on the default stream.
    pub fn async_error(&self) -> Result<Option<Error>> {
        self.default_stream().async_error()
    }
}

impl StatefulOn<'_> {
    fn ptr(&self) -> *mut sys::kvc_stateful_t {
        self.cache.as_ptr()
    }

    /// `kvc_stateful_append` with raw pointers.
    ///
    /// # Safety
    /// key and value (device pointers on CUDA) must hold the shape the args
    /// describe and stay valid until the work completes; row_tokens, when
    /// not NULL, must hold batch host entries.
    pub unsafe fn append_raw(&self, args: &RawStatefulAppend) -> Result<()> {
        let a = args.to_c();
        check(sys::kvc_stateful_append(
            self.ptr(),
            &a,
            self.stream.as_raw(),
        ))
    }

    /// `kvc_stateful_decode` with raw pointers.
    ///
    /// # Safety
    /// query, out and workspace (device pointers on CUDA) must be of the
    /// sizes the args and the cache describe and stay valid until the work
    /// completes.
    pub unsafe fn decode_raw(&self, args: &RawStatefulDecode) -> Result<()> {
        let a = args.to_c();
        check(sys::kvc_stateful_decode(
            self.ptr(),
            &a,
            self.stream.as_raw(),
        ))
    }

    /// Row b continues row `beam_idx[b]`'s history; only beam table entries
    /// move (`kvc_stateful_reorder`).
    pub fn reorder(&self, beam_idx: &[i32]) -> Result<()> {
        let n = u32::try_from(beam_idx.len())
            .map_err(|_| Error::invalid("reorder: beam_idx is too long".to_string()))?;
        // SAFETY: live cache; beam_idx holds n host entries for the call.
        check(unsafe {
            sys::kvc_stateful_reorder(self.ptr(), beam_idx.as_ptr(), n, self.stream.as_raw())
        })
    }

    /// Gathers the K/V by the beam table and drops it (`kvc_stateful_compact`).
    pub fn compact(&self) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_stateful_compact(self.ptr(), self.stream.as_raw()) })
    }

    /// Drops the last `num_tokens` of one row (`None`: every row) in every
    /// layer (`kvc_stateful_trim`).
    pub fn trim(&self, row: Option<u32>, num_tokens: u32) -> Result<()> {
        let row = row.unwrap_or(sys::KVC_STATEFUL_ALL_ROWS);
        // SAFETY: live cache.
        check(unsafe { sys::kvc_stateful_trim(self.ptr(), row, num_tokens, self.stream.as_raw()) })
    }

    /// Empties every row; frees the buffers too with `release_memory`
    /// (`kvc_stateful_reset`).
    pub fn reset(&self, release_memory: bool) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_stateful_reset(self.ptr(), release_memory, self.stream.as_raw()) })
    }

    /// Row `row`'s state as bytes (`kvc_stateful_export_row`).
    pub fn export_row(&self, row: u32) -> Result<Vec<u8>> {
        let mut size = 0u64;
        // SAFETY: live cache; capacity 0 with a NULL buffer asks the size.
        let code = unsafe {
            sys::kvc_stateful_export_row(
                self.ptr(),
                row,
                ptr::null_mut(),
                0,
                &mut size,
                self.stream.as_raw(),
            )
        };
        if code != sys::KVC_ERR_BUFFER_TOO_SMALL {
            check(code)?;
        }
        let mut buf = vec![0u8; size as usize];
        // SAFETY: buf holds size bytes of host memory.
        check(unsafe {
            sys::kvc_stateful_export_row(
                self.ptr(),
                row,
                buf.as_mut_ptr().cast(),
                size,
                &mut size,
                self.stream.as_raw(),
            )
        })?;
        Ok(buf)
    }

    /// Restores a state from [`StatefulOn::export_row`] into row `row`
    /// (`kvc_stateful_import_row`).
    pub fn import_row(&self, row: u32, state: &[u8]) -> Result<()> {
        // SAFETY: live cache; state is host memory of its length.
        check(unsafe {
            sys::kvc_stateful_import_row(
                self.ptr(),
                row,
                state.as_ptr().cast(),
                state.len() as u64,
                self.stream.as_raw(),
            )
        })
    }

    /// The first error of work this cache enqueued
    /// (`kvc_stateful_get_async_error`).
    pub fn async_error(&self) -> Result<Option<Error>> {
        let mut status: sys::kvc_status_t = sys::KVC_OK;
        // SAFETY: live cache, valid out pointer.
        check(unsafe {
            sys::kvc_stateful_get_async_error(self.ptr(), self.stream.as_raw(), &mut status)
        })?;
        Ok(if status == sys::KVC_OK {
            None
        } else {
            Some(Error::last(status))
        })
    }
}

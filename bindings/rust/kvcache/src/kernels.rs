//! Kernels on a cache's memory: store K/V through a slot mapping, paged
//! decode and prefill attention, block copies.
//!
//! On a CPU cache the data live in host memory and run synchronously:
//! [`Cache::store_kv`], [`Cache::decode_attention`] and
//! [`Cache::prefill_attention`] take slices, checked against the layer's
//! shape before anything runs, and are safe. On a CUDA cache the data are
//! device pointers that Rust cannot check: [`OnStream::store_kv_raw`],
//! [`OnStream::decode_attention_raw`] and
//! [`OnStream::prefill_attention_raw`] are `unsafe`. Block copies take host
//! lists of block ids on every device and are safe.
//!
//! This file holds the block tables, the checks the kernels share and the
//! block copies; `kernels/store.rs`, `kernels/decode.rs` and
//! `kernels/prefill.rs` hold each kernel's arguments and calls.

use std::mem::size_of_val;
use std::ptr;

use kvcache_sys as sys;

use crate::cache::{Cache, LayerView, OnStream};
use crate::error::{check, Error, Result};
use crate::types::{Device, Dtype, Stream};

mod decode;
mod prefill;
mod store;

pub use decode::{Decode, RawDecodeArgs};
pub use prefill::{Prefill, RawPrefillArgs};
pub use store::{RawStoreArgs, StoreKv, StoreStrides};

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
}

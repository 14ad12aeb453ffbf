//! One scheduling step over a batch of sequences: a decode step appending a
//! token to each, and the tables attention kernels take (block tables
//! padded or CSR, sequence lengths, slot mappings), written into slices.

use std::ptr;

use kvcache_sys as sys;

use crate::cache::{Cache, OnStream};
use crate::error::{check, Error, Result};
use crate::types::Stream;

/// Block tables in FlashInfer's CSR form (`paged_kv_indptr`,
/// `paged_kv_indices`, `paged_kv_last_page_len`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CsrTable {
    /// `count + 1` offsets: sequence i's blocks are
    /// `indices[indptr[i]..indptr[i + 1]]`.
    pub indptr: Vec<i32>,
    /// Block ids of every sequence, one after the other.
    pub indices: Vec<i32>,
    /// Tokens in each sequence's last block (1..=tokens_per_block; 0 for an
    /// empty sequence).
    pub last_page_len: Vec<i32>,
}

/// Padded block tables: `count` rows of `max_blocks` block ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockTable {
    /// Row-major `[count][max_blocks]` ids, padded.
    pub table: Vec<i32>,
    /// Entries per row (the longest sequence's blocks).
    pub max_blocks: usize,
}

/// The slots of the tokens added to each sequence of a batch since the
/// previous slot mapping of the group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotMapping {
    /// One slot per new token, sequence after sequence: `block_id *
    /// tokens_per_block + offset`, or -1 for a token whose KV is cached.
    pub slots: Vec<i64>,
    /// New tokens (slots) per sequence.
    pub new_tokens: Vec<i32>,
}

fn mismatch(what: &str, name: &str, len: usize, need: usize) -> Error {
    Error::invalid(format!(
        "{what}: {name} has {len} entries, the batch needs {need}"
    ))
}

impl OnStream<'_> {
    /// One decode step: appends `tokens[i]` to sequence `ids[i]` for every
    /// i, all or nothing (`kvc_batch_extend`). Shared tails are copied on
    /// this stream.
    pub fn batch_extend(&self, ids: &[u64], tokens: &[i32]) -> Result<()> {
        if ids.len() != tokens.len() {
            return Err(mismatch("batch_extend", "tokens", tokens.len(), ids.len()));
        }
        let _memory = self.cache.memory_write();
        // SAFETY: live cache; both slices hold ids.len() entries; the stream
        // was vouched for.
        check(unsafe {
            sys::kvc_batch_extend(
                self.cache.as_ptr(),
                ids.as_ptr(),
                tokens.as_ptr(),
                ids.len(),
                self.stream.as_raw(),
            )
        })
    }
}

impl Cache {
    /// [`OnStream::batch_extend`] on the default stream.
    pub fn batch_extend(&self, ids: &[u64], tokens: &[i32]) -> Result<()> {
        self.on(Stream::DEFAULT).batch_extend(ids, tokens)
    }

    /// Writes padded block tables of layer group `group` into `table`, a
    /// row-major `[ids.len()][max_blocks]` slice: row i holds the blocks of
    /// `ids[i]`, then `pad` (`kvc_batch_block_table`). Returns the longest
    /// row; a sequence longer than `max_blocks` is `Status::BufferTooSmall`.
    pub fn block_table_into(
        &self,
        group: u32,
        ids: &[u64],
        table: &mut [i32],
        max_blocks: usize,
        pad: i32,
    ) -> Result<usize> {
        let need = ids.len().checked_mul(max_blocks).ok_or_else(|| {
            Error::invalid(format!(
                "block_table: {} rows of {max_blocks} overflow",
                ids.len()
            ))
        })?;
        if table.len() < need {
            return Err(mismatch("block_table", "table", table.len(), need));
        }
        let mut longest = 0;
        // SAFETY: live cache; table holds ids.len() * max_blocks entries.
        check(unsafe {
            sys::kvc_batch_block_table(
                self.as_ptr(),
                group,
                ids.as_ptr(),
                ids.len(),
                table.as_mut_ptr(),
                max_blocks,
                pad,
                &mut longest,
            )
        })?;
        Ok(longest)
    }

    /// Padded block tables of layer group `group`, as wide as the longest
    /// sequence (`kvc_batch_block_table`).
    pub fn block_table(&self, group: u32, ids: &[u64], pad: i32) -> Result<BlockTable> {
        let mut out = BlockTable::default();
        loop {
            let mut longest = 0;
            // SAFETY: live cache; table holds ids.len() * max_blocks entries
            // (none while max_blocks is 0, when C writes nothing).
            let status = unsafe {
                sys::kvc_batch_block_table(
                    self.as_ptr(),
                    group,
                    ids.as_ptr(),
                    ids.len(),
                    if out.table.is_empty() {
                        ptr::null_mut()
                    } else {
                        out.table.as_mut_ptr()
                    },
                    out.max_blocks,
                    pad,
                    &mut longest,
                )
            };
            match status {
                sys::KVC_OK => return Ok(out),
                // Sized now; again if another thread grew a sequence since.
                sys::KVC_ERR_BUFFER_TOO_SMALL if longest > out.max_blocks => {
                    let cells = ids.len().checked_mul(longest).ok_or_else(|| {
                        Error::invalid(format!(
                            "block_table: {} rows of {longest} overflow",
                            ids.len()
                        ))
                    })?;
                    out.max_blocks = longest;
                    out.table = vec![pad; cells];
                }
                _ => return Err(Error::last(status)),
            }
        }
    }

    /// Writes CSR block tables of layer group `group` into the slices
    /// (`kvc_batch_block_table_csr`): `indptr` needs `ids.len() + 1`
    /// entries, `last_page_len` `ids.len()`. Returns the entries of
    /// `indices` used; too few is `Status::BufferTooSmall`.
    pub fn block_table_csr_into(
        &self,
        group: u32,
        ids: &[u64],
        indptr: &mut [i32],
        indices: &mut [i32],
        last_page_len: &mut [i32],
    ) -> Result<usize> {
        if indptr.len() < ids.len() + 1 {
            return Err(mismatch(
                "block_table_csr",
                "indptr",
                indptr.len(),
                ids.len() + 1,
            ));
        }
        if last_page_len.len() < ids.len() {
            return Err(mismatch(
                "block_table_csr",
                "last_page_len",
                last_page_len.len(),
                ids.len(),
            ));
        }
        let mut used = 0;
        // SAFETY: live cache; indptr holds count + 1 entries, last_page_len
        // count, indices its own length, as the C call writes.
        check(unsafe {
            sys::kvc_batch_block_table_csr(
                self.as_ptr(),
                group,
                ids.as_ptr(),
                ids.len(),
                indptr.as_mut_ptr(),
                indices.as_mut_ptr(),
                indices.len(),
                last_page_len.as_mut_ptr(),
                &mut used,
            )
        })?;
        Ok(used)
    }

    /// CSR block tables of layer group `group` (`kvc_batch_block_table_csr`).
    pub fn block_table_csr(&self, group: u32, ids: &[u64]) -> Result<CsrTable> {
        let mut out = CsrTable {
            indptr: vec![0; ids.len() + 1],
            indices: Vec::new(),
            last_page_len: vec![0; ids.len()],
        };
        loop {
            let mut used = 0;
            // SAFETY: as in block_table_csr_into.
            let status = unsafe {
                sys::kvc_batch_block_table_csr(
                    self.as_ptr(),
                    group,
                    ids.as_ptr(),
                    ids.len(),
                    out.indptr.as_mut_ptr(),
                    out.indices.as_mut_ptr(),
                    out.indices.len(),
                    out.last_page_len.as_mut_ptr(),
                    &mut used,
                )
            };
            match status {
                sys::KVC_OK => {
                    out.indices.truncate(used);
                    return Ok(out);
                }
                sys::KVC_ERR_BUFFER_TOO_SMALL if used > out.indices.len() => {
                    out.indices.resize(used, 0)
                }
                _ => return Err(Error::last(status)),
            }
        }
    }

    /// Writes the current lengths (tokens) of the sequences into `lengths`
    /// (`kvc_batch_sequence_lengths`).
    pub fn sequence_lengths_into(&self, ids: &[u64], lengths: &mut [i32]) -> Result<()> {
        if lengths.len() < ids.len() {
            return Err(mismatch(
                "sequence_lengths",
                "lengths",
                lengths.len(),
                ids.len(),
            ));
        }
        // SAFETY: live cache; lengths holds ids.len() entries.
        check(unsafe {
            sys::kvc_batch_sequence_lengths(
                self.as_ptr(),
                ids.as_ptr(),
                ids.len(),
                lengths.as_mut_ptr(),
            )
        })
    }

    /// The current lengths (tokens) of the sequences
    /// (`kvc_batch_sequence_lengths`).
    pub fn sequence_lengths(&self, ids: &[u64]) -> Result<Vec<i32>> {
        let mut lengths = vec![0; ids.len()];
        self.sequence_lengths_into(ids, &mut lengths)?;
        Ok(lengths)
    }

    /// Writes the slot mapping of the tokens added to each sequence since
    /// the previous call for `group` into `slots`, and the count per
    /// sequence into `new_tokens` when given (`kvc_batch_slot_mapping`).
    /// Returns the slots written; too few slots is
    /// `Status::BufferTooSmall` and then no cursor advances.
    pub fn slot_mapping_into(
        &self,
        group: u32,
        ids: &[u64],
        slots: &mut [i64],
        new_tokens: Option<&mut [i32]>,
    ) -> Result<usize> {
        let new_tokens = match new_tokens {
            Some(n) if n.len() < ids.len() => {
                return Err(mismatch("slot_mapping", "new_tokens", n.len(), ids.len()))
            }
            Some(n) => n.as_mut_ptr(),
            None => ptr::null_mut(),
        };
        let mut written = 0;
        // SAFETY: live cache; slots holds its length, new_tokens (if any)
        // ids.len() entries.
        check(unsafe {
            sys::kvc_batch_slot_mapping(
                self.as_ptr(),
                group,
                ids.as_ptr(),
                ids.len(),
                slots.as_mut_ptr(),
                slots.len(),
                &mut written,
                new_tokens,
            )
        })?;
        Ok(written)
    }

    /// The slot mapping of the tokens added to each sequence since the
    /// previous call for `group` (for a new sequence, its whole prompt);
    /// advances the sequences' cursors (`kvc_batch_slot_mapping`).
    pub fn slot_mapping(&self, group: u32, ids: &[u64]) -> Result<SlotMapping> {
        let mut out = SlotMapping {
            slots: Vec::new(),
            new_tokens: vec![0; ids.len()],
        };
        loop {
            let mut needed = 0;
            // SAFETY: as in slot_mapping_into.
            let status = unsafe {
                sys::kvc_batch_slot_mapping(
                    self.as_ptr(),
                    group,
                    ids.as_ptr(),
                    ids.len(),
                    out.slots.as_mut_ptr(),
                    out.slots.len(),
                    &mut needed,
                    out.new_tokens.as_mut_ptr(),
                )
            };
            match status {
                sys::KVC_OK => {
                    out.slots.truncate(needed);
                    return Ok(out);
                }
                sys::KVC_ERR_BUFFER_TOO_SMALL if needed > out.slots.len() => {
                    out.slots.resize(needed, 0)
                }
                _ => return Err(Error::last(status)),
            }
        }
    }
}

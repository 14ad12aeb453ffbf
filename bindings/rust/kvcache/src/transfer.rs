//! Moving blocks between caches for disaggregated prefill/decode
//! (`transfer.h`): [`Cache::export_sequence`] holds a sequence's committed
//! blocks and gives their ids and the key blob; [`Cache::import_begin`]
//! verifies a peer's blob against the receiver's own prompt and names the
//! blocks to write; [`Import::complete`] publishes them. The caller moves
//! the bytes (addresses from [`Cache::layer_view`]).

use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use kvcache_sys as sys;

use crate::cache::{sized, Cache};
use crate::error::{check, Error, Result};
use crate::sequence::SequenceOptions;

/// What an export or an import covers (`kvc_transfer_desc_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferDesc {
    /// Layer groups.
    pub num_groups: u32,
    /// Tokens per block.
    pub tokens_per_block: u32,
    /// The sequence exported, or the import's.
    pub seq_id: u64,
    /// Full blocks the key blob names (prompt positions `0..num_blocks`).
    pub num_blocks: u64,
    /// Export: 0. Import: the first position the caller writes.
    pub first_block: u64,
    /// `num_blocks * tokens_per_block`.
    pub num_tokens: u64,
    /// Size of the key blob (import: 0).
    pub keys_bytes: u64,
}

impl TransferDesc {
    fn from_raw(d: &sys::kvc_transfer_desc_t) -> TransferDesc {
        TransferDesc {
            num_groups: d.num_groups,
            tokens_per_block: d.tokens_per_block,
            seq_id: d.seq_id,
            num_blocks: d.num_blocks,
            first_block: d.first_block,
            num_tokens: d.num_tokens,
            keys_bytes: d.keys_bytes,
        }
    }
}

/// The memory backing one rank's pool, for another process to map
/// (`kvc_pool_share_t`; CUDA IPC, see `transfer.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolShare {
    /// The CUDA device holding the pool, in this process's numbering.
    pub device_ordinal: i32,
    /// The rank described.
    pub rank: u32,
    /// The pool described.
    pub pool: u32,
    /// `KVC_SHARE_HANDLE_POSIX_FD`.
    pub handle_type: u32,
    /// Physical allocations backing the pool now.
    pub num_chunks: u64,
    /// Every offset and size is a multiple of it.
    pub granularity: u64,
    /// Address space of the pool's reservation.
    pub reserved_bytes: u64,
    /// Bytes backed from the pool's base.
    pub mapped_bytes: u64,
}

/// One exported chunk of a pool (`kvc_share_chunk_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareChunk {
    /// A new POSIX file descriptor for the chunk, owned by the caller
    /// (send it, then close it; `std::os::fd::OwnedFd::from_raw_fd` takes it).
    pub fd: i32,
    /// The chunk.
    pub index: u64,
    /// Its place from the pool's base.
    pub offset: u64,
    /// Its bytes.
    pub size: u64,
}

/// Fills a vector through a capacity-in/count-out call, growing it on
/// `KVC_ERR_BUFFER_TOO_SMALL`.
fn fill<T: Copy + Default>(
    mut call: impl FnMut(*mut T, usize, &mut usize) -> i32,
) -> Result<Vec<T>> {
    let mut out: Vec<T> = Vec::new();
    loop {
        let mut count = 0;
        let status = call(out.as_mut_ptr(), out.len(), &mut count);
        match status {
            sys::KVC_OK => {
                out.truncate(count);
                return Ok(out);
            }
            sys::KVC_ERR_BUFFER_TOO_SMALL if count > out.len() => out.resize(count, T::default()),
            _ => return Err(Error::last(status)),
        }
    }
}

/// Blocks held for a transfer (`kvc_export_t`); dropping it releases them
/// (`kvc_export_release`). Borrows its cache, which therefore outlives it.
#[derive(Debug)]
pub struct Export<'c> {
    raw: NonNull<sys::kvc_export_t>,
    _cache: PhantomData<&'c Cache>,
}

// SAFETY: an export is used by one thread at a time (&mut or owned moves);
// its calls on the cache are the cache's thread-safe calls.
unsafe impl Send for Export<'_> {}

impl Export<'_> {
    /// What the export covers (`kvc_export_describe`).
    pub fn describe(&self) -> Result<TransferDesc> {
        let mut d = sized!(sys::kvc_transfer_desc_t);
        // SAFETY: live export, valid struct.
        check(unsafe { sys::kvc_export_describe(self.raw.as_ptr(), &mut d) })?;
        Ok(TransferDesc::from_raw(&d))
    }

    /// The exported block ids of layer group `group`, position 0 first
    /// (`kvc_export_block_ids`).
    pub fn block_ids(&self, group: u32) -> Result<Vec<i32>> {
        // SAFETY: live export; the buffer is writable for its length.
        fill(|ids, cap, count| unsafe {
            sys::kvc_export_block_ids(self.raw.as_ptr(), group, ids, cap, count)
        })
    }

    /// The key blob to send to the receiver (`kvc_export_keys`; its format
    /// is documented in `transfer.h`).
    pub fn keys(&self) -> Result<Vec<u8>> {
        // SAFETY: live export; the buffer is writable for its length.
        fill(|buf: *mut u8, cap, size| unsafe {
            sys::kvc_export_keys(self.raw.as_ptr(), buf.cast(), cap, size)
        })
    }
}

impl Drop for Export<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from kvc_cache_export_sequence, released once.
        unsafe { sys::kvc_export_release(self.raw.as_ptr()) }
    }
}

/// Blocks reserved for a transfer into this cache (`kvc_import_t`);
/// dropping an import that is still open aborts it (`kvc_import_destroy`).
#[derive(Debug)]
pub struct Import<'c> {
    raw: NonNull<sys::kvc_import_t>,
    _cache: PhantomData<&'c Cache>,
}

// SAFETY: as for Export.
unsafe impl Send for Import<'_> {}

impl Import<'_> {
    /// What the import covers: write positions `first_block..num_blocks`
    /// (`kvc_import_describe`).
    pub fn describe(&self) -> Result<TransferDesc> {
        let mut d = sized!(sys::kvc_transfer_desc_t);
        // SAFETY: live import, valid struct.
        check(unsafe { sys::kvc_import_describe(self.raw.as_ptr(), &mut d) })?;
        Ok(TransferDesc::from_raw(&d))
    }

    /// The block ids to write in layer group `group`: entry `i` is position
    /// `first_block + i`; -1 where nothing is to be written
    /// (`kvc_import_block_ids`).
    pub fn block_ids(&self, group: u32) -> Result<Vec<i32>> {
        // SAFETY: live import; the buffer is writable for its length.
        fill(|ids, cap, count| unsafe {
            sys::kvc_import_block_ids(self.raw.as_ptr(), group, ids, cap, count)
        })
    }

    /// The blocks are written: publishes them (`kvc_import_complete`).
    /// `blocks_written` must be `num_blocks - first_block`; another count
    /// is refused and the import stays open.
    pub fn complete(&mut self, blocks_written: u64) -> Result<()> {
        // SAFETY: live import.
        check(unsafe { sys::kvc_import_complete(self.raw.as_ptr(), blocks_written) })
    }

    /// Gives every block back, removing the import's sequence
    /// (`kvc_import_abort`).
    pub fn abort(&mut self) -> Result<()> {
        // SAFETY: live import.
        check(unsafe { sys::kvc_import_abort(self.raw.as_ptr()) })
    }
}

impl Drop for Import<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from kvc_cache_import_begin, destroyed once.
        unsafe { sys::kvc_import_destroy(self.raw.as_ptr()) }
    }
}

impl Cache {
    /// Holds the committed full blocks of sequence `id` for a transfer
    /// (`kvc_cache_export_sequence`): `num_tokens` 0 for every committed
    /// full block, else a block-aligned count no larger than that. The
    /// blocks outlive eviction, `reset_reuse` and the sequence's removal
    /// until the export is dropped.
    pub fn export_sequence(&self, id: u64, num_tokens: u64) -> Result<Export<'_>> {
        let mut raw = ptr::null_mut();
        // SAFETY: live cache, valid out pointer.
        check(unsafe { sys::kvc_cache_export_sequence(self.as_ptr(), id, num_tokens, &mut raw) })?;
        Ok(Export {
            raw: NonNull::new(raw).expect("kvc_cache_export_sequence returned KVC_OK and NULL"),
            _cache: PhantomData,
        })
    }

    /// Verifies a peer's key blob against this cache and the receiver's own
    /// `tokens` and `options`, then adds sequence `id` with them, reserving
    /// blocks for the positions this cache lacks (`kvc_cache_import_begin`).
    /// A blob of another prompt, salt, geometry or format is refused with
    /// nothing changed, naming the first block that differs.
    pub fn import_begin(
        &self,
        id: u64,
        tokens: &[i32],
        options: &SequenceOptions<'_>,
        keys: &[u8],
    ) -> Result<Import<'_>> {
        let mut raw = ptr::null_mut();
        let _memory = self.memory_write();
        // SAFETY: live cache; tokens, options and keys valid for the call.
        check(unsafe {
            sys::kvc_cache_import_begin(
                self.as_ptr(),
                id,
                tokens.as_ptr(),
                tokens.len(),
                options.as_raw(),
                keys.as_ptr().cast(),
                keys.len(),
                &mut raw,
            )
        })?;
        Ok(Import {
            raw: NonNull::new(raw).expect("kvc_cache_import_begin returned KVC_OK and NULL"),
            _cache: PhantomData,
        })
    }

    /// The memory backing pool `pool` of rank `rank`, for another process
    /// to map (`kvc_cache_describe_pool_share`). The CPU backend, and memory
    /// the driver would not create shareable, give `Status::Unsupported`
    /// with the reason.
    pub fn describe_pool_share(&self, rank: u32, pool: u32) -> Result<PoolShare> {
        let mut d = sized!(sys::kvc_pool_share_t);
        // SAFETY: live cache, valid out pointer.
        check(unsafe { sys::kvc_cache_describe_pool_share(self.as_ptr(), rank, pool, &mut d) })?;
        Ok(PoolShare {
            device_ordinal: d.device_ordinal,
            rank: d.rank,
            pool: d.pool,
            handle_type: d.handle_type,
            num_chunks: d.num_chunks,
            granularity: d.granularity,
            reserved_bytes: d.reserved_bytes,
            mapped_bytes: d.mapped_bytes,
        })
    }

    /// Exports chunk `chunk` of pool `pool` of rank `rank`
    /// (`kvc_cache_export_pool_chunk`): a new POSIX file descriptor the
    /// caller owns and closes.
    pub fn export_pool_chunk(&self, rank: u32, pool: u32, chunk: u64) -> Result<ShareChunk> {
        let mut c = sized!(sys::kvc_share_chunk_t);
        // SAFETY: live cache, valid out pointer.
        check(unsafe {
            sys::kvc_cache_export_pool_chunk(self.as_ptr(), rank, pool, chunk, &mut c)
        })?;
        Ok(ShareChunk {
            fd: c.fd,
            index: c.index,
            offset: c.offset,
            size: c.size,
        })
    }
}

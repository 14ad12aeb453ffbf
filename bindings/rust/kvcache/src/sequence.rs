//! Sequences on a cache: add a prompt and learn how much of it is cached,
//! extend, commit computed tokens, rewind, fork, remove, pin; probe a
//! prompt without side effects.

use std::marker::PhantomData;

use kvcache_sys as sys;

use crate::cache::{sized, Cache, OnStream};
use crate::error::{check, Error, Result};
use crate::types::Stream;

/// Default eviction priority of a block (`KVC_DEFAULT_PRIORITY`): 0 is
/// evicted first, 100 last.
pub const DEFAULT_PRIORITY: u32 = sys::KVC_DEFAULT_PRIORITY;

/// An extra key (a multimodal item hash, say) covering tokens `[offset,
/// offset + length)` of a sequence (`kvc_extra_key_t`): every block
/// overlapping the range carries it, so equal tokens with a different image
/// never share blocks.
///
/// It has the C layout, so a slice of them is handed to C as it is.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct ExtraKey<'a> {
    raw: sys::kvc_extra_key_t,
    _data: PhantomData<&'a [u8]>,
}

// SAFETY: an ExtraKey is a shared borrow of bytes plus integers.
unsafe impl Send for ExtraKey<'_> {}
// SAFETY: as above.
unsafe impl Sync for ExtraKey<'_> {}

impl<'a> ExtraKey<'a> {
    /// A key `data` over `length` tokens from position `offset`.
    pub fn new(offset: u64, length: u64, data: &'a [u8]) -> ExtraKey<'a> {
        ExtraKey {
            raw: sys::kvc_extra_key_t {
                offset,
                length,
                data: data.as_ptr().cast(),
                size: data.len(),
            },
            _data: PhantomData,
        }
    }

    /// First token position covered.
    pub fn offset(&self) -> u64 {
        self.raw.offset
    }

    /// Tokens covered.
    pub fn length(&self) -> u64 {
        self.raw.length
    }

    /// The key bytes.
    pub fn data(&self) -> &'a [u8] {
        // SAFETY: built from a &'a [u8] in new().
        unsafe { std::slice::from_raw_parts(self.raw.data.cast(), self.raw.size) }
    }
}

/// `RetentionRange::new` end of a range reaching to the end of the sequence
/// (`KVC_RETENTION_OPEN_END`).
pub const RETENTION_OPEN_END: u64 = u64::MAX;

/// A retention range (`kvc_retention_range_t`): prompt tokens `[start,
/// end)` get `priority` for `duration_ms` milliseconds (0: for ever) after
/// their block becomes reusable. A block takes the range holding its first
/// token. It has the C layout, so a slice of them is handed to C as it is.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct RetentionRange {
    raw: sys::kvc_retention_range_t,
}

impl RetentionRange {
    /// Tokens `[start, end)` (`end` may be `RETENTION_OPEN_END`) at
    /// `priority` (0..=100) for `duration_ms` (0: for ever).
    pub fn new(start: u64, end: u64, priority: u32, duration_ms: u64) -> RetentionRange {
        RetentionRange {
            raw: sys::kvc_retention_range_t {
                start,
                end,
                priority,
                reserved: 0,
                duration_ms,
            },
        }
    }

    /// First token position.
    pub fn start(&self) -> u64 {
        self.raw.start
    }

    /// One past the last token, or `RETENTION_OPEN_END`.
    pub fn end(&self) -> u64 {
        self.raw.end
    }

    /// Eviction priority.
    pub fn priority(&self) -> u32 {
        self.raw.priority
    }

    /// How long the priority lasts; 0 for ever.
    pub fn duration_ms(&self) -> u64 {
        self.raw.duration_ms
    }
}

/// Options of adding or probing a sequence (`kvc_sequence_options_t`): its
/// scope (salt, LoRA id, extra keys; only sequences with equal scopes share
/// blocks) and the eviction priorities of its blocks. `Default` gives the
/// library's defaults: no salt, no LoRA, no extra keys, priorities 35.
///
/// An absent salt differs from an empty one (`salt(b"")`); no LoRA differs
/// from LoRA id 0.
#[derive(Clone, Copy, Debug)]
pub struct SequenceOptions<'a> {
    raw: sys::kvc_sequence_options_t,
    _borrows: PhantomData<&'a [u8]>,
}

// SAFETY: the options hold shared borrows of bytes and extra keys plus
// integers.
unsafe impl Send for SequenceOptions<'_> {}
// SAFETY: as above.
unsafe impl Sync for SequenceOptions<'_> {}

impl Default for SequenceOptions<'_> {
    fn default() -> Self {
        let mut raw = sized!(sys::kvc_sequence_options_t);
        raw.prompt_priority = DEFAULT_PRIORITY;
        raw.decode_priority = DEFAULT_PRIORITY;
        SequenceOptions {
            raw,
            _borrows: PhantomData,
        }
    }
}

impl<'a> SequenceOptions<'a> {
    /// The defaults.
    pub fn new() -> SequenceOptions<'a> {
        SequenceOptions::default()
    }

    /// Cache salt bytes (tenant isolation); `b""` is a salt too.
    pub fn salt(mut self, salt: &'a [u8]) -> Self {
        self.raw.salt = salt.as_ptr().cast();
        self.raw.salt_size = salt.len();
        self
    }

    /// LoRA adapter id.
    pub fn lora(mut self, lora_id: u64) -> Self {
        self.raw.has_lora = true;
        self.raw.lora_id = lora_id;
        self
    }

    /// Extra keys (multimodal hashes) with the token ranges they cover.
    pub fn extra_keys(mut self, keys: &'a [ExtraKey<'a>]) -> Self {
        self.raw.extra_keys = keys.as_ptr().cast();
        self.raw.num_extra_keys = keys.len();
        self
    }

    /// Eviction priority of prompt blocks, 0..=100 (checked by the
    /// library).
    pub fn prompt_priority(mut self, priority: u32) -> Self {
        self.raw.prompt_priority = priority;
        self
    }

    /// Eviction priority of blocks holding only generated tokens, 0..=100.
    pub fn decode_priority(mut self, priority: u32) -> Self {
        self.raw.decode_priority = priority;
        self
    }

    /// Retention ranges over the prompt, in token order; prompt blocks
    /// outside every range take the prompt priority.
    pub fn retention_ranges(mut self, ranges: &'a [RetentionRange]) -> Self {
        self.raw.retention_ranges = ranges.as_ptr().cast();
        self.raw.num_retention_ranges = ranges.len();
        self
    }

    /// How long the decode priority lasts after a generated block becomes
    /// reusable; 0 (default) for ever.
    pub fn decode_duration_ms(mut self, duration_ms: u64) -> Self {
        self.raw.decode_duration_ms = duration_ms;
        self
    }

    /// The C struct, valid while the borrowed salt and keys are.
    pub fn as_raw(&self) -> &sys::kvc_sequence_options_t {
        &self.raw
    }
}

/// State of one sequence (`kvc_sequence_desc_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequenceDesc {
    /// Priority of its prompt blocks.
    pub prompt_priority: u32,
    /// Priority of its generated blocks.
    pub decode_priority: u32,
    /// Current length in tokens.
    pub num_tokens: u64,
    /// Length of the prompt given at add.
    pub prompt_tokens: u64,
    /// Prompt tokens reused at add.
    pub cached_tokens: u64,
    /// Tokens committed as computed.
    pub committed_tokens: u64,
    /// Block positions (blocks per layer group).
    pub num_blocks: u64,
}

impl OnStream<'_> {
    /// Adds sequence `id` with its prompt and reuses its cached prefix
    /// (`kvc_sequence_add`); returns the prompt tokens already cached, which
    /// the caller skips computing (never the last one). A partially matched
    /// block copied for this sequence is copied on this stream.
    pub fn add_sequence(
        &self,
        id: u64,
        tokens: &[i32],
        options: &SequenceOptions<'_>,
    ) -> Result<u64> {
        let mut cached = 0;
        let _memory = self.cache.memory_write();
        // SAFETY: live cache; tokens and options (with what they borrow)
        // are valid for the call; the stream was vouched for.
        check(unsafe {
            sys::kvc_sequence_add(
                self.cache.as_ptr(),
                id,
                tokens.as_ptr(),
                tokens.len(),
                &options.raw,
                self.stream.as_raw(),
                &mut cached,
            )
        })?;
        Ok(cached)
    }

    /// Appends tokens to sequence `id`, allocating blocks as needed; a
    /// shared partial tail is copied on this stream first
    /// (`kvc_sequence_extend`).
    pub fn extend(&self, id: u64, tokens: &[i32]) -> Result<()> {
        let _memory = self.cache.memory_write();
        // SAFETY: live cache; tokens valid for the call; stream vouched for.
        check(unsafe {
            sys::kvc_sequence_extend(
                self.cache.as_ptr(),
                id,
                tokens.as_ptr(),
                tokens.len(),
                self.stream.as_raw(),
            )
        })
    }
}

impl Cache {
    /// [`OnStream::add_sequence`] on the default stream.
    pub fn add_sequence(
        &self,
        id: u64,
        tokens: &[i32],
        options: &SequenceOptions<'_>,
    ) -> Result<u64> {
        self.on(Stream::DEFAULT).add_sequence(id, tokens, options)
    }

    /// [`OnStream::extend`] on the default stream.
    pub fn extend(&self, id: u64, tokens: &[i32]) -> Result<()> {
        self.on(Stream::DEFAULT).extend(id, tokens)
    }

    /// Declares the KV of the first `num_computed` tokens of sequence `id`
    /// written: full blocks among them become reusable (a block shared with
    /// a fork sibling once this sequence holds it alone); committing fewer
    /// tokens than before keeps the committed count
    /// (`kvc_sequence_commit`).
    pub fn commit(&self, id: u64, num_computed: u64) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_sequence_commit(self.as_ptr(), id, num_computed) })
    }

    /// Drops the last `num_tokens` tokens of sequence `id` (rejected draft
    /// tokens) (`kvc_sequence_rewind`).
    pub fn rewind(&self, id: u64, num_tokens: u64) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_sequence_rewind(self.as_ptr(), id, num_tokens) })
    }

    /// Creates sequence `child` sharing every block of `parent`
    /// (`kvc_sequence_fork`).
    pub fn fork(&self, parent: u64, child: u64) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_sequence_fork(self.as_ptr(), parent, child) })
    }

    /// Removes sequence `id`; its committed blocks stay cached for reuse
    /// (`kvc_sequence_remove`).
    pub fn remove(&self, id: u64) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_sequence_remove(self.as_ptr(), id) })
    }

    /// Pins the published blocks of sequence `id` (its committed full
    /// blocks, which outlive it in the tree) against eviction, also after
    /// it is removed, until [`Cache::unpin`] (`kvc_sequence_pin`).
    pub fn pin(&self, id: u64) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_sequence_pin(self.as_ptr(), id) })
    }

    /// Releases the blocks pinned under `id` (`kvc_sequence_unpin`).
    pub fn unpin(&self, id: u64) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_sequence_unpin(self.as_ptr(), id) })
    }

    /// State of sequence `id` (`kvc_sequence_describe`).
    pub fn describe_sequence(&self, id: u64) -> Result<SequenceDesc> {
        let mut d = sized!(sys::kvc_sequence_desc_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_sequence_describe(self.as_ptr(), id, &mut d) })?;
        Ok(SequenceDesc {
            prompt_priority: d.prompt_priority,
            decode_priority: d.decode_priority,
            num_tokens: d.num_tokens,
            prompt_tokens: d.prompt_tokens,
            cached_tokens: d.cached_tokens,
            committed_tokens: d.committed_tokens,
            num_blocks: d.num_blocks,
        })
    }

    /// Writes the block ids of sequence `id` in layer group `group` into
    /// `ids` and returns how many there are (`kvc_sequence_block_ids`).
    /// When `ids` is too short nothing is written and the error is
    /// `Status::BufferTooSmall`.
    pub fn block_ids_into(&self, id: u64, group: u32, ids: &mut [i32]) -> Result<usize> {
        let mut count = 0;
        // SAFETY: live cache; ids is writable for its length.
        check(unsafe {
            sys::kvc_sequence_block_ids(
                self.as_ptr(),
                id,
                group,
                ids.as_mut_ptr(),
                ids.len(),
                &mut count,
            )
        })?;
        Ok(count)
    }

    /// The block ids of sequence `id` in layer group `group`, in token
    /// order (`kvc_sequence_block_ids`).
    pub fn block_ids(&self, id: u64, group: u32) -> Result<Vec<i32>> {
        let mut ids = Vec::new();
        loop {
            let mut count = 0;
            // SAFETY: live cache; ids is writable for its length.
            let status = unsafe {
                sys::kvc_sequence_block_ids(
                    self.as_ptr(),
                    id,
                    group,
                    ids.as_mut_ptr(),
                    ids.len(),
                    &mut count,
                )
            };
            match status {
                sys::KVC_OK => {
                    ids.truncate(count);
                    return Ok(ids);
                }
                // Another thread may grow the sequence between the calls.
                sys::KVC_ERR_BUFFER_TOO_SMALL if count > ids.len() => ids.resize(count, 0),
                _ => return Err(Error::last(status)),
            }
        }
    }

    /// Blocks per layer group that `num_tokens` more tokens of sequence
    /// `id` need, including a copy of a shared tail
    /// (`kvc_sequence_blocks_needed`).
    pub fn blocks_needed(&self, id: u64, num_tokens: u64) -> Result<u64> {
        let mut out = 0;
        // SAFETY: live cache, valid out pointer.
        check(unsafe { sys::kvc_sequence_blocks_needed(self.as_ptr(), id, num_tokens, &mut out) })?;
        Ok(out)
    }

    /// How many tokens of this prompt [`Cache::add_sequence`] would find
    /// cached with these options, changing nothing (`kvc_cache_probe`).
    /// It looks at the primary and host tiers only: an add on a cache with
    /// a disk or remote tier may find more (the blocks it loads from them).
    pub fn probe(&self, tokens: &[i32], options: &SequenceOptions<'_>) -> Result<u64> {
        let mut cached = 0;
        // SAFETY: live cache; tokens and options valid for the call.
        check(unsafe {
            sys::kvc_cache_probe(
                self.as_ptr(),
                tokens.as_ptr(),
                tokens.len(),
                &options.raw,
                &mut cached,
            )
        })?;
        Ok(cached)
    }
}

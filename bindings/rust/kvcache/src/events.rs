//! KV events for routers (`include/kvcache/events.h`): the stream of what a
//! cache stores, removes, moves between tiers and reprioritizes, drained as
//! [`Event`] values; the [`Snapshot`] a consumer resynchronizes from after
//! [`Event::Lost`]; and the portable block hashes any process computes from
//! tokens alone ([`Config::block_hashes`]).

use kvcache_sys as sys;

use crate::cache::{sized, Cache};
use crate::config::Config;
use crate::error::{check, Error, Result, Status};
use crate::sequence::SequenceOptions;

/// `kvc_event_t::token_offset` of an event without token ids
/// (`KVC_EVENT_NO_TOKENS`).
pub const EVENT_NO_TOKENS: u64 = u64::MAX;

/// Where a cached block lives (`kvc_tier_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// The cache's device (or CPU) pools (`KVC_TIER_PRIMARY`).
    Primary,
    /// The host tier (`KVC_TIER_HOST`).
    Host,
    /// The disk tier (`KVC_TIER_DISK`; see [`crate::Config::set_disk_cache`]):
    /// `Stored` and `Removed` of its records.
    Disk,
    /// A remote store shared by caches (`KVC_TIER_REMOTE`): `Stored` and
    /// `Removed` of this cache's own writes only.
    Remote,
    /// A value this binding does not know (a newer library).
    Other(u32),
}

impl Tier {
    /// The tier of a C value.
    pub fn from_raw(raw: sys::kvc_tier_t) -> Tier {
        match raw {
            sys::KVC_TIER_PRIMARY => Tier::Primary,
            sys::KVC_TIER_HOST => Tier::Host,
            sys::KVC_TIER_DISK => Tier::Disk,
            sys::KVC_TIER_REMOTE => Tier::Remote,
            other => Tier::Other(other),
        }
    }

    /// The C value (`KVC_TIER_*`).
    pub fn raw(self) -> sys::kvc_tier_t {
        match self {
            Tier::Primary => sys::KVC_TIER_PRIMARY,
            Tier::Host => sys::KVC_TIER_HOST,
            Tier::Disk => sys::KVC_TIER_DISK,
            Tier::Remote => sys::KVC_TIER_REMOTE,
            Tier::Other(raw) => raw,
        }
    }
}

/// One event of a cache (`kvc_event_t`). Ids count from 1 without gaps. A
/// consumer that applies every event in id order to an index keyed by
/// (hash, place) holds exactly [`Cache::snapshot`]'s entries (see each
/// variant), where the place is the tree for [`Tier::Primary`] and
/// [`Tier::Host`] (`TierChanged` moves an entry between the two) and the
/// store itself for [`Tier::Disk`] and [`Tier::Remote`]: a block can have a
/// tree entry and a store entry at once. A store's entries are addressed by
/// hash alone (no parent, LoRA id or tokens); the remote tier names only
/// this cache's own writes (include/kvcache/events.h, "Store entries").
/// `groups` is a bit mask of layer groups (bit g: group g).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A block became reusable (commit): the entry for `hash` gains
    /// `groups` (created with the other fields if absent).
    Stored {
        /// Event id.
        id: u64,
        /// The block's portable hash.
        hash: u64,
        /// The previous block's hash, 0 for a first block.
        parent_hash: u64,
        /// Layer groups stored.
        groups: u64,
        /// Always [`Tier::Primary`].
        tier: Tier,
        /// Eviction priority (0..=100).
        priority: u32,
        /// Tokens in the block (fewer than tokens per block for a partial
        /// block).
        num_tokens: u32,
        /// The LoRA id of the block's scope, if any.
        lora: Option<u64>,
        /// The block's token ids, when the drain asked for them.
        tokens: Option<Vec<i32>>,
    },
    /// Blocks left a tier (eviction): the entry for `hash` loses `groups`,
    /// and is erased when none is left.
    Removed {
        /// Event id.
        id: u64,
        /// The block's portable hash.
        hash: u64,
        /// Layer groups removed.
        groups: u64,
        /// The tier the blocks left.
        tier: Tier,
    },
    /// A block moved between tiers: the entry for `hash` moves to `tier`,
    /// holding `groups`.
    TierChanged {
        /// Event id.
        id: u64,
        /// The block's portable hash.
        hash: u64,
        /// Layer groups the block holds in its new tier.
        groups: u64,
        /// The new tier.
        tier: Tier,
        /// Its eviction priority now.
        priority: u32,
    },
    /// A cached block's priority changed: the entry takes `priority`.
    PriorityChanged {
        /// Event id.
        id: u64,
        /// The block's portable hash.
        hash: u64,
        /// The new priority.
        priority: u32,
    },
    /// Every cached block of the tree was dropped (`Cache::reset_reuse`):
    /// erase every tree entry (Primary, Host); store entries stay.
    Cleared {
        /// Event id.
        id: u64,
    },
    /// Events `first_id .. first_id + count` were dropped (the ring was
    /// full): rebuild the index from [`Cache::snapshot`].
    Lost {
        /// The first dropped id.
        first_id: u64,
        /// How many were dropped.
        count: u64,
    },
    /// A kind this binding does not know (a newer library).
    Unknown {
        /// Event id.
        id: u64,
        /// The `kvc_event_kind_t` value.
        kind: u32,
    },
}

impl Event {
    /// The event id (for [`Event::Lost`], the first dropped one).
    pub fn id(&self) -> u64 {
        match *self {
            Event::Stored { id, .. }
            | Event::Removed { id, .. }
            | Event::TierChanged { id, .. }
            | Event::PriorityChanged { id, .. }
            | Event::Cleared { id }
            | Event::Unknown { id, .. } => id,
            Event::Lost { first_id, .. } => first_id,
        }
    }

    /// The newest id this event accounts for.
    fn last_id(&self) -> u64 {
        match *self {
            Event::Lost { first_id, count } if count > 0 => first_id + count - 1,
            _ => self.id(),
        }
    }

    /// The event a C event describes; `tokens` is the buffer of the drain
    /// that wrote it.
    pub fn from_raw(e: &sys::kvc_event_t, tokens: &[i32]) -> Event {
        let tier = Tier::from_raw(e.tier);
        match e.kind {
            sys::KVC_EVENT_STORED => {
                let start = e.token_offset as usize;
                let end = start.saturating_add(e.num_tokens as usize);
                let tokens = (e.token_offset != EVENT_NO_TOKENS && end <= tokens.len())
                    .then(|| tokens[start..end].to_vec());
                Event::Stored {
                    id: e.id,
                    hash: e.hash,
                    parent_hash: e.parent_hash,
                    groups: e.groups,
                    tier,
                    priority: e.priority,
                    num_tokens: e.num_tokens,
                    lora: (e.has_lora != 0).then_some(e.lora_id),
                    tokens,
                }
            }
            sys::KVC_EVENT_REMOVED => Event::Removed {
                id: e.id,
                hash: e.hash,
                groups: e.groups,
                tier,
            },
            sys::KVC_EVENT_TIER_CHANGED => Event::TierChanged {
                id: e.id,
                hash: e.hash,
                groups: e.groups,
                tier,
                priority: e.priority,
            },
            sys::KVC_EVENT_PRIORITY_CHANGED => Event::PriorityChanged {
                id: e.id,
                hash: e.hash,
                priority: e.priority,
            },
            sys::KVC_EVENT_CLEARED => Event::Cleared { id: e.id },
            sys::KVC_EVENT_LOST => Event::Lost {
                first_id: e.id,
                count: e.lost_count,
            },
            kind => Event::Unknown { id: e.id, kind },
        }
    }
}

/// What one [`Cache::drain_events_raw`] call did (`kvc_event_drain_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainResult {
    /// Events written.
    pub events: usize,
    /// Token ids written.
    pub tokens: usize,
    /// Events still pending.
    pub events_pending: u64,
    /// Token ids the pending events carry.
    pub tokens_pending: u64,
    /// Id of the newest event emitted so far (0: none).
    pub last_id: u64,
}

/// One cached block of a [`Snapshot`] (`kvc_snapshot_entry_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SnapshotEntry {
    /// Portable hash.
    pub hash: u64,
    /// The previous block's hash, 0 for a first block.
    pub parent_hash: u64,
    /// Layer groups holding a block here (bit g: group g).
    pub groups: u64,
    /// The LoRA id of the block's scope, if any.
    pub lora: Option<u64>,
    /// Where the block lives.
    pub tier: Tier,
    /// Eviction priority (0..=100).
    pub priority: u32,
    /// Tokens in the block.
    pub num_tokens: u32,
}

impl SnapshotEntry {
    /// The entry of a C entry.
    pub fn from_raw(e: &sys::kvc_snapshot_entry_t) -> SnapshotEntry {
        SnapshotEntry {
            hash: e.hash,
            parent_hash: e.parent_hash,
            groups: e.groups,
            lora: (e.has_lora != 0).then_some(e.lora_id),
            tier: Tier::from_raw(e.tier),
            priority: e.priority,
            num_tokens: e.num_tokens,
        }
    }
}

/// Every cached block (both tiers), parents before children, as of event
/// `event_id`: applying the events with larger ids gives the cache's state
/// at any later moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The newest event emitted before the snapshot (0: none).
    pub event_id: u64,
    /// The cached blocks.
    pub entries: Vec<SnapshotEntry>,
}

/// Most events one drain call takes (80 bytes each).
const DRAIN_CHUNK: usize = 4096;

fn zeroed_event() -> sys::kvc_event_t {
    // SAFETY: kvc_event_t is plain integers; all-zero bytes are valid.
    unsafe { std::mem::zeroed() }
}

fn zeroed_entry() -> sys::kvc_snapshot_entry_t {
    // SAFETY: kvc_snapshot_entry_t is plain integers.
    unsafe { std::mem::zeroed() }
}

impl Cache {
    /// One `kvc_cache_drain_events` call: moves the oldest pending events
    /// into `events` and the token ids of stored events into `tokens`
    /// (`None`: no token ids), stopping before the first event that does
    /// not fit. Empty buffers learn the sizes. Drained events are gone from
    /// the cache. `Status::Unsupported` when events are off.
    pub fn drain_events_raw(
        &self,
        events: &mut [sys::kvc_event_t],
        tokens: Option<&mut [i32]>,
    ) -> Result<DrainResult> {
        let mut r = sized!(sys::kvc_event_drain_t);
        let (tokens_ptr, tokens_len) = match tokens {
            Some(t) => (t.as_mut_ptr(), t.len()),
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: live cache; both buffers are writable for their lengths;
        // r has its struct_size set.
        check(unsafe {
            sys::kvc_cache_drain_events(
                self.as_ptr(),
                events.as_mut_ptr(),
                events.len(),
                tokens_ptr,
                tokens_len,
                &mut r,
            )
        })?;
        Ok(DrainResult {
            events: r.events as usize,
            tokens: r.tokens as usize,
            events_pending: r.events_pending,
            tokens_pending: r.tokens_pending,
            last_id: r.last_id,
        })
    }

    /// Moves every pending event, in id order, into a vector: drains until
    /// nothing is pending or until the newest event emitted when the call
    /// began is drained (so a producer on another thread cannot keep it
    /// looping). With `with_tokens`, [`Event::Stored`] carries its token
    /// ids. When events were dropped, the first is an [`Event::Lost`].
    pub fn drain_events(&self, with_tokens: bool) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        self.drain_events_into(&mut out, with_tokens)?;
        Ok(out)
    }

    /// [`Cache::drain_events`] appending to `out`; returns how many events
    /// were appended.
    pub fn drain_events_into(&self, out: &mut Vec<Event>, with_tokens: bool) -> Result<usize> {
        let first = out.len();
        let sizes = self.drain_events_raw(&mut [], None)?;
        let target = sizes.last_id;
        let (mut pending, mut tokens_pending) = (sizes.events_pending, sizes.tokens_pending);
        let mut events = vec![zeroed_event(); (pending as usize).min(DRAIN_CHUNK)];
        let mut tokens = Vec::new();
        while pending > 0 {
            if with_tokens {
                tokens.resize(tokens_pending as usize, 0);
            }
            let r = self.drain_events_raw(&mut events, with_tokens.then_some(&mut tokens[..]))?;
            out.extend(
                events[..r.events]
                    .iter()
                    .map(|e| Event::from_raw(e, &tokens)),
            );
            if out.len() > first && out[out.len() - 1].last_id() >= target {
                break;
            }
            if r.events == 0 && (r.tokens_pending as usize) <= tokens.len() && r.events_pending > 0
            {
                return Err(Error::new(
                    Status::Internal,
                    "kvc_cache_drain_events wrote nothing with room for the pending tokens",
                ));
            }
            pending = r.events_pending;
            tokens_pending = r.tokens_pending;
        }
        Ok(out.len() - first)
    }

    /// Every cached block as of an event id (`kvc_cache_snapshot`).
    /// `Status::Unsupported` when events are off.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let mut entries: Vec<sys::kvc_snapshot_entry_t> = Vec::new();
        loop {
            let (mut count, mut event_id) = (0, 0);
            // SAFETY: live cache; entries writable for its length; valid
            // out pointers.
            let status = unsafe {
                sys::kvc_cache_snapshot(
                    self.as_ptr(),
                    entries.as_mut_ptr(),
                    entries.len(),
                    &mut count,
                    &mut event_id,
                )
            };
            match status {
                sys::KVC_OK if count <= entries.len() => {
                    return Ok(Snapshot {
                        event_id,
                        entries: entries[..count]
                            .iter()
                            .map(SnapshotEntry::from_raw)
                            .collect(),
                    })
                }
                // The first call learns the size; another thread may grow
                // the cache between the calls.
                sys::KVC_OK | sys::KVC_ERR_BUFFER_TOO_SMALL => {
                    entries.resize(count, zeroed_entry())
                }
                _ => return Err(Error::last(status)),
            }
        }
    }
}

impl Config {
    /// The portable hashes of the full blocks of a prompt under `options`
    /// (its salt, LoRA id and extra keys), from this config alone (its
    /// tokens per block and event hash seed): what [`Event::Stored`] of a
    /// cache built from an equal config reports for them
    /// (`kvc_block_hashes`). Needs no cache and no device.
    pub fn block_hashes(&self, tokens: &[i32], options: &SequenceOptions<'_>) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        loop {
            let mut count = 0;
            // SAFETY: live config; tokens, options and out valid for the
            // call.
            let status = unsafe {
                sys::kvc_block_hashes(
                    self.as_ptr(),
                    tokens.as_ptr(),
                    tokens.len(),
                    options.as_raw(),
                    out.as_mut_ptr(),
                    out.len(),
                    &mut count,
                )
            };
            match status {
                sys::KVC_OK if count <= out.len() => {
                    out.truncate(count);
                    return Ok(out);
                }
                // The first call (capacity 0) learns the count.
                sys::KVC_OK | sys::KVC_ERR_BUFFER_TOO_SMALL => out.resize(count, 0),
                _ => return Err(Error::last(status)),
            }
        }
    }

    /// [`Config::block_hashes`] into `hashes`; returns how many there are.
    /// When `hashes` is too short nothing is written and the error is
    /// `Status::BufferTooSmall`.
    pub fn block_hashes_into(
        &self,
        tokens: &[i32],
        options: &SequenceOptions<'_>,
        hashes: &mut [u64],
    ) -> Result<usize> {
        let mut count = 0;
        // SAFETY: live config; tokens, options and hashes valid for the
        // call.
        check(unsafe {
            sys::kvc_block_hashes(
                self.as_ptr(),
                tokens.as_ptr(),
                tokens.len(),
                options.as_raw(),
                hashes.as_mut_ptr(),
                hashes.len(),
                &mut count,
            )
        })?;
        Ok(count)
    }
}

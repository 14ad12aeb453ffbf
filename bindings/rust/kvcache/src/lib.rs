//! Safe Rust API of kvcache, the KV-cache system of an LLM inference engine
//! (`libkvcache.so`), over the raw bindings of [`kvcache_sys`].
//!
//! - [`Config`] / [`ConfigBuilder`]: the model shape, dtype, layout, device
//!   and memory budget of a cache.
//! - [`Cache`]: created from a config and destroyed on drop; describes its
//!   groups, pools and per-layer tensor views; holds sequences
//!   ([`Cache::add_sequence`] returns the prompt tokens already cached),
//!   writes batch tables into slices ([`Cache::block_table`],
//!   [`Cache::slot_mapping`], ...), reports [`Stats`] (and per layer
//!   group, [`GroupStats`]), and runs kernels
//!   (safe on CPU caches, `unsafe` with device pointers).
//! - [`StatefulCache`]: the stateful contiguous mode (OpenVINO's): per-layer
//!   buffers for a fixed batch, in-place append, beam search through a beam
//!   table, indirect decode attention, row export/import.
//! - Events for KV-aware routers: [`Cache::drain_events`] returns
//!   [`Event`] values (stored, removed, tier and priority changes, cleared,
//!   and [`Event::Lost`] when the ring overflowed), [`Cache::snapshot`]
//!   lists every cached block to resynchronize from, and
//!   [`Config::block_hashes`] computes the portable block hashes of a
//!   prompt without a cache.
//! - Every failure is an [`Error`] carrying the C status and the library's
//!   message, read inside the failing call.
//!
//! Threading follows the C contract: a [`Cache`] is `Send + Sync` (every
//! call on a cache is thread safe); a [`Config`] is `Send` only (the C
//! config is not synchronized), so this does not compile:
//!
//! ```compile_fail
//! fn shared<T: Sync>() {}
//! shared::<kvcache::Config>();
//! ```
//!
//! ```no_run
//! use kvcache::{Cache, Config, SequenceOptions};
//!
//! # fn main() -> kvcache::Result<()> {
//! let config = Config::builder()
//!     .num_layers(2)
//!     .kv_heads(2)
//!     .head_dim(64)
//!     .tokens_per_block(4)
//!     .max_tokens(1024)
//!     .build()?;
//! let cache = Cache::new(&config)?;
//! let prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9];
//! let cached = cache.add_sequence(1, &prompt, &SequenceOptions::default())?;
//! assert_eq!(cached, 0);
//! let slots = cache.slot_mapping(0, &[1])?;
//! assert_eq!(slots.slots.len(), prompt.len());
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod batch;
#[cfg(test)]
mod c_init_tests;
mod cache;
mod config;
mod error;
mod events;
mod kernels;
mod kv_resource;
mod remote_tier;
mod resize;
mod sequence;
mod state;
mod stateful;
mod stateful_args;
mod tiers;
mod transfer;
mod types;
mod version;

pub use kvcache_sys as sys;

pub use batch::{BlockTable, CsrTable, SlotMapping};
pub use cache::{Cache, CacheDesc, GroupDesc, GroupStats, LayerView, OnStream, PoolDesc, Stats};
pub use config::{Config, ConfigBuilder};
pub use error::{Error, Result, Status};
pub use events::{DrainResult, Event, Snapshot, SnapshotEntry, Tier, EVENT_NO_TOKENS};
pub use kernels::{
    BlockTables, Decode, Prefill, RawDecodeArgs, RawPrefillArgs, RawStoreArgs, StoreKv,
    StoreStrides, TableFormat,
};
pub use kv_resource::{KvResource, KvResourceDesc, KvResourceReason};
pub use resize::{ResizeInputs, ResizePlan};
pub use sequence::{
    ExtraKey, RetentionRange, SequenceDesc, SequenceOptions, DEFAULT_PRIORITY, RETENTION_OPEN_END,
};
pub use state::{
    ResourceDesc, ResourceKind, ResourceReason, SnapshotStats, STATE_ALL, STATE_SNAPSHOTS_NONE,
};
pub use stateful::{
    GrowthPolicy, RawStatefulAppend, RawStatefulDecode, StatefulCache, StatefulLayerStats,
    StatefulOn, StatefulOptions, StatefulStats, StatefulView,
};
pub use tiers::TierStats;
pub use transfer::{Export, Import, PoolShare, ShareChunk, TransferDesc};
pub use types::{Device, Dtype, Element, Features, Layout, Stream};
pub use version::{
    abi_version, features, version, version_string, HEADER_ABI_VERSION, HEADER_VERSION,
};

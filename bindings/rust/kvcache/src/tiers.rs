//! Tiers below the radix tree (`tiers.h`): the disk tier's setting, the
//! per-tier statistics, and the flush of queued writes.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

use kvcache_sys as sys;

use crate::cache::{sized, Cache};
use crate::config::{Config, ConfigBuilder};
use crate::error::{check, Error, Result, Status};
use crate::events::Tier;

/// Statistics of one tier below the tree (`kvc_tier_stats_t`), from
/// [`Cache::tier_stats`]. Latencies are over the tier's last 1024
/// operations, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierStats {
    /// The tier ([`Tier::Disk`] or [`Tier::Remote`]).
    pub tier: Tier,
    /// Blocks held now.
    pub blocks: u64,
    /// Bytes they take (header and KV).
    pub bytes: u64,
    /// The tier's byte budget.
    pub capacity_bytes: u64,
    /// Lookups the tier answered with a record.
    pub hits: u64,
    /// Lookups of a block the tier does not hold.
    pub misses: u64,
    /// Records refused by the check (torn, corrupted, another block's).
    pub rejected: u64,
    /// Blocks copied into the cache from the tier.
    pub onboarded_blocks: u64,
    /// Their KV bytes.
    pub onboarded_bytes: u64,
    /// Blocks queued for writing (at commit or eviction; not those an add
    /// loaded from this tier).
    pub offered_blocks: u64,
    /// Blocks written.
    pub stored_blocks: u64,
    /// Writes dropped: queue full, no room, a failed write, the tier down.
    pub dropped_blocks: u64,
    /// I/O failures, timeouts, protocol errors.
    pub errors: u64,
    /// Blocks the tier removed to stay in its budget.
    pub evicted_blocks: u64,
    /// Writes waiting now.
    pub queued_blocks: u64,
    /// Lookups (one per run of a prompt's blocks).
    pub load_count: u64,
    /// Median lookup latency.
    pub load_p50_us: u64,
    /// 99th percentile lookup latency.
    pub load_p99_us: u64,
    /// Longest lookup.
    pub load_max_us: u64,
    /// Blocks written (timed).
    pub write_count: u64,
    /// Median write latency.
    pub write_p50_us: u64,
    /// 99th percentile write latency.
    pub write_p99_us: u64,
    /// Longest write.
    pub write_max_us: u64,
}

impl Config {
    /// Turns the disk tier on: slab files under `directory` (which must
    /// exist and be writable when the cache is created), at most `bytes` of
    /// them; `None` with `bytes` 0 turns it off (`kvc_config_set_disk_cache`).
    /// A cache created on a directory a previous cache of the same model
    /// geometry and event hash seed used finds its blocks.
    pub fn set_disk_cache(&mut self, directory: Option<&Path>, bytes: u64) -> Result<()> {
        let dir = match directory {
            Some(d) => Some(
                CString::new(d.as_os_str().to_str().ok_or_else(|| {
                    Error::new(Status::InvalidArgument, "disk cache directory is not UTF-8")
                })?)
                .map_err(|_| {
                    Error::new(
                        Status::InvalidArgument,
                        "disk cache directory contains a NUL byte",
                    )
                })?,
            ),
            None => None,
        };
        let ptr = dir.as_ref().map_or(std::ptr::null(), |d| d.as_ptr());
        // SAFETY: live config, exclusively borrowed; the string lives for the
        // call and C copies it.
        check(unsafe { sys::kvc_config_set_disk_cache(self.as_mut_ptr(), ptr, bytes) })
    }

    /// The disk tier's directory (`None` when off) and byte budget
    /// (`kvc_config_get_disk_cache`).
    pub fn disk_cache(&self) -> Result<(Option<PathBuf>, u64)> {
        let mut dir = std::ptr::null();
        let mut bytes = 0;
        // SAFETY: live config, valid out pointers.
        check(unsafe { sys::kvc_config_get_disk_cache(self.as_ptr(), &mut dir, &mut bytes) })?;
        // SAFETY: the library returns a NUL-terminated string owned by the
        // config, read before any change to it.
        let dir = unsafe { CStr::from_ptr(dir) }
            .to_string_lossy()
            .into_owned();
        Ok(((!dir.is_empty()).then(|| PathBuf::from(dir)), bytes))
    }
}

impl ConfigBuilder {
    /// The disk tier. See [`Config::set_disk_cache`].
    pub fn disk_cache(self, directory: impl AsRef<Path>, bytes: u64) -> ConfigBuilder {
        let directory = directory.as_ref().to_path_buf();
        self.apply(move |c| c.set_disk_cache(Some(&directory), bytes))
    }
}

impl Cache {
    /// Statistics of tier `tier` ([`Tier::Disk`] or [`Tier::Remote`];
    /// `kvc_cache_get_tier_stats`). `Status::NotFound` when the cache has
    /// no such tier.
    pub fn tier_stats(&self, tier: Tier) -> Result<TierStats> {
        let mut s = sized!(sys::kvc_tier_stats_t);
        // SAFETY: live cache, valid out struct with struct_size set.
        check(unsafe { sys::kvc_cache_get_tier_stats(self.as_ptr(), tier.raw(), &mut s) })?;
        Ok(TierStats {
            tier: Tier::from_raw(s.tier),
            blocks: s.blocks,
            bytes: s.bytes,
            capacity_bytes: s.capacity_bytes,
            hits: s.hits,
            misses: s.misses,
            rejected: s.rejected,
            onboarded_blocks: s.onboarded_blocks,
            onboarded_bytes: s.onboarded_bytes,
            offered_blocks: s.offered_blocks,
            stored_blocks: s.stored_blocks,
            dropped_blocks: s.dropped_blocks,
            errors: s.errors,
            evicted_blocks: s.evicted_blocks,
            queued_blocks: s.queued_blocks,
            load_count: s.load_count,
            load_p50_us: s.load_p50_us,
            load_p99_us: s.load_p99_us,
            load_max_us: s.load_max_us,
            write_count: s.write_count,
            write_p50_us: s.write_p50_us,
            write_p99_us: s.write_p99_us,
            write_max_us: s.write_max_us,
        })
    }

    /// Waits until every block queued for writing to the cache's stores is
    /// written or dropped (`kvc_cache_flush_tiers`); dropping the cache
    /// waits the same way.
    pub fn flush_tiers(&self) -> Result<()> {
        // SAFETY: live cache.
        check(unsafe { sys::kvc_cache_flush_tiers(self.as_ptr()) })
    }
}

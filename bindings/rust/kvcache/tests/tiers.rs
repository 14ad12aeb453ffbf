//! The disk tier through the safe API: its setting and errors, blocks
//! evicted to the disk and loaded back, a new cache on the same directory
//! finding them, and the per-tier statistics.

mod common;

use std::path::PathBuf;

use common::tokens;
use kvcache::{Cache, Config, Dtype, SequenceOptions, Status, Tier};

/// A fresh directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("kvc-rust-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(dir: &TempDir) -> Config {
    Config::builder()
        .num_layers(2)
        .kv_heads(2)
        .head_dim(8)
        .dtype(Dtype::F32)
        .tokens_per_block(4)
        .max_tokens(16)
        .partial_reuse(false)
        .disk_cache(&dir.0, 1 << 20)
        .build()
        .expect("config")
}

fn cache_prompt(cache: &Cache, id: u64, t: &[i32]) -> u64 {
    let cached = cache
        .add_sequence(id, t, &SequenceOptions::default())
        .unwrap();
    cache.commit(id, t.len() as u64).unwrap();
    cache.remove(id).unwrap();
    cached
}

#[test]
fn setting_round_trips_and_bad_values_are_refused() {
    let dir = TempDir::new("disk-setting");
    let mut c = Config::new().unwrap();
    assert_eq!(c.disk_cache().unwrap(), (None, 0));
    c.set_disk_cache(Some(&dir.0), 4096).unwrap();
    assert_eq!(c.disk_cache().unwrap(), (Some(dir.0.clone()), 4096));
    let e = c.set_disk_cache(Some(&dir.0), 0).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("disk cache bytes must be > 0"));
    c.set_disk_cache(None, 0).unwrap();
    assert_eq!(c.disk_cache().unwrap(), (None, 0));

    let missing = dir.0.join("missing");
    let mut bad = config(&dir);
    bad.set_disk_cache(Some(&missing), 1 << 20).unwrap();
    let e = Cache::new(&bad).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("cannot be used"), "{}", e.message);

    let cache = Cache::new(&common::config(64)).unwrap();
    assert_eq!(
        cache.tier_stats(Tier::Disk).unwrap_err().status,
        Status::NotFound
    );
    assert_eq!(
        cache.tier_stats(Tier::Host).unwrap_err().status,
        Status::InvalidArgument
    );
    cache.flush_tiers().unwrap();
}

#[test]
fn evicted_blocks_come_back_from_the_disk_and_survive_a_restart() {
    let dir = TempDir::new("disk-round-trip");
    let a = tokens(100, 13); // 3 full blocks + 1 token
    {
        let cache = Cache::new(&config(&dir)).unwrap();
        assert_eq!(cache_prompt(&cache, 1, &a), 0);
        assert_eq!(cache_prompt(&cache, 2, &tokens(500, 16)), 0); // a to the disk
        cache.flush_tiers().unwrap();
        let s = cache.tier_stats(Tier::Disk).unwrap();
        assert_eq!(s.tier, Tier::Disk);
        assert_eq!((s.offered_blocks, s.stored_blocks, s.blocks), (7, 7, 7));
        assert_eq!((s.dropped_blocks, s.errors, s.queued_blocks), (0, 0, 0));
        assert_eq!(s.capacity_bytes, 1 << 20);
        assert_eq!(s.write_count, 7);
        assert!(s.write_p50_us <= s.write_p99_us && s.write_p99_us <= s.write_max_us);
        assert_eq!(cache_prompt(&cache, 3, &a), 12);
        let s = cache.tier_stats(Tier::Disk).unwrap();
        assert_eq!((s.onboarded_blocks, s.hits, s.rejected), (3, 3, 0));
        assert_eq!(s.onboarded_bytes, 3 * 2 * 2 * 4 * 2 * 8 * 4);
        cache.check().unwrap();
    }
    // A new cache on the directory finds them.
    let cache = Cache::new(&config(&dir)).unwrap();
    assert!(cache.tier_stats(Tier::Disk).unwrap().blocks >= 3);
    assert_eq!(cache_prompt(&cache, 1, &a), 12);
}

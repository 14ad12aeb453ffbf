//! The host (secondary) tier: cached blocks evicted from a small cache are
//! offloaded to host memory and onboarded when their prompt comes back; the
//! statistics count both ways.

mod common;

use common::tokens;
use kvcache::{Cache, Config, Dtype, SequenceOptions};

// 2 layers x K,V x 4 tokens x 2 heads x 64 dims x f32: 8 KiB per block set.
const SET_BYTES: u64 = 2 * 2 * 4 * 2 * 64 * 4;

/// A cache of 4 blocks of 4 tokens with a host tier of `host_bytes`; only
/// full blocks are published.
fn host_tier_cache(host_bytes: u64) -> Cache {
    let config: Config = Config::builder()
        .num_layers(2)
        .kv_heads(2)
        .head_dim(64)
        .dtype(Dtype::F32)
        .tokens_per_block(4)
        .max_tokens(16)
        .host_cache_bytes(host_bytes)
        .partial_reuse(false)
        .build()
        .expect("config");
    Cache::new(&config).expect("cache")
}

#[test]
fn evicted_blocks_are_offloaded_and_onboarded_on_a_hit() {
    let cache = host_tier_cache(4 * SET_BYTES + 1);
    assert_eq!(cache.describe().unwrap().host_cache_bytes, 4 * SET_BYTES);
    let opts = SequenceOptions::default();

    let first = tokens(0, 9); // two full blocks and a tail
    cache.add_sequence(1, &first, &opts).unwrap();
    cache.commit(1, 9).unwrap();
    cache.remove(1).unwrap();

    cache.add_sequence(2, &tokens(100, 13), &opts).unwrap(); // all four blocks
    let s = cache.stats().unwrap();
    assert_eq!((s.offloaded_blocks, s.offloaded_bytes), (2, 2 * SET_BYTES));
    assert_eq!(
        (s.host_blocks, s.host_cached_blocks, s.host_free_blocks),
        (4, 2, 2)
    );
    assert_eq!(s.evicted_blocks, 0);
    cache.remove(2).unwrap();

    assert_eq!(cache.add_sequence(3, &first, &opts).unwrap(), 8);
    let s = cache.stats().unwrap();
    assert_eq!((s.onboarded_blocks, s.onboarded_bytes), (2, 2 * SET_BYTES));
    assert_eq!((s.host_cached_blocks, s.reused_blocks), (0, 2));
    cache.check().unwrap();
}

#[test]
fn make_room_evicts_ahead_into_the_host_tier() {
    let cache = host_tier_cache(4 * SET_BYTES);
    let opts = SequenceOptions::default();
    let first = tokens(0, 9); // two full blocks and a tail
    cache.add_sequence(1, &first, &opts).unwrap();
    cache.commit(1, 9).unwrap();
    cache.remove(1).unwrap(); // 2 cached, 2 free

    assert_eq!(cache.make_room(0).unwrap(), 2);
    assert_eq!(cache.make_room(4).unwrap(), 4);
    let s = cache.stats().unwrap();
    assert_eq!(
        (s.free_blocks, s.cached_blocks, s.offloaded_blocks),
        (4, 0, 2)
    );
    assert_eq!(cache.make_room(100).unwrap(), 4); // nothing cached left: no error
    assert_eq!(cache.add_sequence(2, &first, &opts).unwrap(), 8); // onboarded
    assert_eq!(cache.stats().unwrap().onboarded_blocks, 2);
    cache.check().unwrap();
}

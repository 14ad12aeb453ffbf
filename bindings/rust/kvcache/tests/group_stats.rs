//! Per-layer-group statistics: a full and a windowed group sharing one
//! pool, through a prompt's add, commit, removal and reuse; errors.

use kvcache::{Cache, Config, Dtype, GroupStats, SequenceOptions, Status};

/// 2 layers with windows {0, 32}: group 0 full, group 1 windowed, one pool
/// of 128 blocks of 16 tokens.
fn windowed_cache() -> Cache {
    let config = Config::builder()
        .num_layers(2)
        .attention_windows(&[0, 32])
        .kv_heads(2)
        .head_dim(8)
        .dtype(Dtype::F32)
        .tokens_per_block(16)
        .max_tokens(1024)
        .build()
        .unwrap();
    Cache::new(&config).unwrap()
}

/// (in use, cached, reused, missed, evicted, released) of a group.
fn counts(s: GroupStats) -> (u64, u64, u64, u64, u64, u64) {
    (
        s.in_use_blocks,
        s.cached_blocks,
        s.reused_blocks,
        s.missed_blocks,
        s.evicted_blocks,
        s.released_blocks,
    )
}

/// The groups' blocks add up to the cache's; the pool's free blocks are
/// the cache's.
fn check_sums(cache: &Cache, free: u64) {
    let t = cache.stats().unwrap();
    let (g0, g1) = (cache.group_stats(0).unwrap(), cache.group_stats(1).unwrap());
    assert_eq!((g0.pool, g1.pool), (0, 0));
    assert_eq!(t.free_blocks, free);
    assert_eq!((g0.pool_free_blocks, g1.pool_free_blocks), (free, free));
    assert_eq!(g0.in_use_blocks + g1.in_use_blocks, t.in_use_blocks);
    assert_eq!(g0.cached_blocks + g1.cached_blocks, t.cached_blocks);
}

#[test]
fn a_windowed_group_releases_what_left_its_window() {
    let cache = windowed_cache();
    assert_eq!(cache.describe().unwrap().num_groups, 2);
    assert_eq!(cache.describe().unwrap().num_pools, 1);
    let prompt: Vec<i32> = (1000..1128).collect();
    let options = SequenceOptions::default();

    assert_eq!(cache.add_sequence(1, &prompt, &options).unwrap(), 0);
    assert_eq!(counts(cache.group_stats(0).unwrap()), (8, 0, 0, 8, 0, 0));
    assert_eq!(counts(cache.group_stats(1).unwrap()), (8, 0, 0, 8, 0, 0));
    check_sums(&cache, 112);

    // Token 128 attends to tokens 97..=128: blocks 6 and 7 stay, 0..=5 are
    // released and stay cached.
    cache.commit(1, 128).unwrap();
    assert_eq!(counts(cache.group_stats(0).unwrap()), (8, 0, 0, 8, 0, 0));
    assert_eq!(counts(cache.group_stats(1).unwrap()), (2, 6, 0, 8, 0, 6));
    check_sums(&cache, 112);

    cache.remove(1).unwrap();
    assert_eq!(counts(cache.group_stats(0).unwrap()), (0, 8, 0, 8, 0, 0));
    assert_eq!(counts(cache.group_stats(1).unwrap()), (0, 8, 0, 8, 0, 6));
    check_sums(&cache, 112);

    // Reuse: the windowed group reuses only blocks 6 and 7.
    assert_eq!(cache.add_sequence(2, &prompt, &options).unwrap(), 127);
    assert_eq!(counts(cache.group_stats(0).unwrap()), (8, 1, 8, 8, 0, 0));
    assert_eq!(counts(cache.group_stats(1).unwrap()), (2, 7, 2, 8, 0, 6));
    check_sums(&cache, 110);
    cache.check().unwrap();
}

#[test]
fn a_group_out_of_range_is_an_invalid_argument() {
    let cache = windowed_cache();
    let e = cache.group_stats(2).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert_eq!(e.message, "group must be < num_groups (2), got 2");
}

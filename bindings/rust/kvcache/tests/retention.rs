//! Retention: a range's duration running out on the manual clock changes
//! which block is evicted; invalid ranges carry status and message.

mod common;

use common::tokens;
use kvcache::{Cache, RetentionRange, SequenceOptions, Status, RETENTION_OPEN_END};

/// 3 blocks of 4 tokens on the manual clock.
fn manual_cache() -> Cache {
    let mut config = common::config(12);
    config.set_manual_clock(true).unwrap();
    assert!(config.manual_clock().unwrap());
    Cache::new(&config).unwrap()
}

/// Caches a one-block prompt (plus a last token) and removes it.
fn cache_block(cache: &Cache, id: u64, first: i32, options: &SequenceOptions) {
    cache.add_sequence(id, &tokens(first, 5), options).unwrap();
    cache.commit(id, 5).unwrap();
    cache.remove(id).unwrap();
}

/// Prompt A at 80 for 100 ms, then B at 35 released later; after
/// `elapsed` ms a two-block prompt evicts one: (A cached, B cached).
fn kept_after(elapsed: u64) -> (u64, u64) {
    let cache = manual_cache();
    let ranges = [RetentionRange::new(0, RETENTION_OPEN_END, 80, 100)];
    cache_block(
        &cache,
        1,
        0,
        &SequenceOptions::new().retention_ranges(&ranges),
    );
    cache_block(&cache, 2, 100, &SequenceOptions::new());
    cache.advance_clock(elapsed).unwrap();
    cache
        .add_sequence(3, &tokens(200, 8), &SequenceOptions::new())
        .unwrap();
    let none = SequenceOptions::new();
    (
        cache.probe(&tokens(0, 5), &none).unwrap(),
        cache.probe(&tokens(100, 5), &none).unwrap(),
    )
}

#[test]
fn an_expired_priority_changes_the_victim() {
    assert_eq!(kept_after(99), (4, 0));
    assert_eq!(kept_after(100), (0, 4));
}

#[test]
fn invalid_ranges_and_clock_errors() {
    let cache = manual_cache();
    let ranges = [
        RetentionRange::new(0, 64, 80, 0),
        RetentionRange::new(32, 96, 50, 0),
    ];
    assert_eq!((ranges[1].start(), ranges[1].end()), (32, 96));
    assert_eq!((ranges[1].priority(), ranges[1].duration_ms()), (50, 0));
    let options = SequenceOptions::new()
        .retention_ranges(&ranges)
        .decode_duration_ms(5);
    let e = cache.add_sequence(1, &tokens(0, 10), &options).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("[32, 96) overlaps"), "{}", e.message);

    let monotonic = common::cache(16);
    let e = monotonic.advance_clock(1).unwrap_err();
    assert_eq!(e.status, Status::InvalidState);
}

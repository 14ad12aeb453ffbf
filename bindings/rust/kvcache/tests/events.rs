//! KV events: a scripted scenario whose STORED hashes equal
//! `Config::block_hashes` for the same prompt and options (plain, salted,
//! LoRA), eviction (REMOVED), reset (CLEARED), an overflowing ring (LOST)
//! and the snapshot resync, a drain on another thread, and bad input.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use common::tokens;
use kvcache::{
    Cache, Config, Dtype, Event, ExtraKey, SequenceOptions, Snapshot, SnapshotEntry, Status, Tier,
    DEFAULT_PRIORITY,
};

/// A config of 16 blocks of 4 tokens with an event ring of `ring` events.
fn config(ring: u32) -> Config {
    Config::builder()
        .num_layers(2)
        .kv_heads(2)
        .head_dim(64)
        .dtype(Dtype::F32)
        .tokens_per_block(4)
        .max_tokens(64)
        .partial_reuse(false)
        .event_buffer_size(ring)
        .build()
        .expect("test config")
}

/// A router's view of a cache, fed only by events and snapshots.
#[derive(Default, Debug, PartialEq)]
struct Index(HashMap<u64, SnapshotEntry>);

impl Index {
    fn from_snapshot(s: &Snapshot) -> Index {
        Index(s.entries.iter().map(|e| (e.hash, *e)).collect())
    }

    fn apply(&mut self, events: &[Event]) {
        for e in events {
            match e {
                Event::Stored {
                    hash,
                    parent_hash,
                    groups,
                    tier,
                    priority,
                    num_tokens,
                    lora,
                    ..
                } => {
                    self.0
                        .entry(*hash)
                        .or_insert(SnapshotEntry {
                            hash: *hash,
                            parent_hash: *parent_hash,
                            groups: 0,
                            lora: *lora,
                            tier: *tier,
                            priority: *priority,
                            num_tokens: *num_tokens,
                        })
                        .groups |= groups;
                }
                Event::Removed {
                    id, hash, groups, ..
                } => {
                    let entry = self
                        .0
                        .get_mut(hash)
                        .unwrap_or_else(|| panic!("event {id} removes {hash:#x}, not indexed"));
                    entry.groups &= !groups;
                    if entry.groups == 0 {
                        self.0.remove(hash);
                    }
                }
                Event::TierChanged {
                    hash,
                    groups,
                    tier,
                    priority,
                    ..
                } => {
                    let entry = self
                        .0
                        .get_mut(hash)
                        .expect("tier change of an indexed block");
                    entry.tier = *tier;
                    entry.groups = *groups;
                    entry.priority = *priority;
                }
                Event::PriorityChanged { hash, priority, .. } => {
                    self.0.get_mut(hash).expect("indexed block").priority = *priority;
                }
                Event::Cleared { .. } => self.0.clear(),
                Event::Lost { .. } | Event::Unknown { .. } => panic!("unexpected {e:?}"),
            }
        }
    }

    fn check(&self, cache: &Cache) {
        let s = cache.snapshot().unwrap();
        assert_eq!(s.entries.len(), self.0.len());
        assert_eq!(*self, Index::from_snapshot(&s));
    }
}

#[test]
fn scripted_scenario() {
    let config = config(1024);
    let cache = Cache::new(&config).unwrap();
    let mut index = Index::default();
    let prompt = tokens(100, 12); // 3 full blocks
    let salt = b"tenant-a";
    let keys: [SequenceOptions; 3] = [
        SequenceOptions::new(),
        SequenceOptions::new().salt(salt),
        SequenceOptions::new().lora(7),
    ];
    let mut next_id = 1;
    for (seq, options) in keys.iter().enumerate() {
        let seq = seq as u64 + 1;
        cache.add_sequence(seq, &prompt, options).unwrap();
        cache.commit(seq, prompt.len() as u64).unwrap();
        let events = cache.drain_events(true).unwrap();
        let want = config.block_hashes(&prompt, options).unwrap();
        assert_eq!(want.len(), 3);
        let lora = (seq == 3).then_some(7);
        let expected: Vec<Event> = (0..3)
            .map(|b| Event::Stored {
                id: next_id + b as u64,
                hash: want[b],
                parent_hash: if b == 0 { 0 } else { want[b - 1] },
                groups: 1,
                tier: Tier::Primary,
                priority: DEFAULT_PRIORITY,
                num_tokens: 4,
                lora,
                tokens: Some(prompt[4 * b..4 * b + 4].to_vec()),
            })
            .collect();
        assert_eq!(events, expected);
        next_id += 3;
        index.apply(&events);
        index.check(&cache);
    }
    // Scopes hash apart; two salts too.
    let plain = config.block_hashes(&prompt, &keys[0]).unwrap();
    let salted = config.block_hashes(&prompt, &keys[1]).unwrap();
    let lora = config.block_hashes(&prompt, &keys[2]).unwrap();
    let other = config
        .block_hashes(&prompt, &SequenceOptions::new().salt(b"tenant-b"))
        .unwrap();
    assert!(plain[0] != salted[0] && plain[0] != lora[0] && salted[0] != lora[0]);
    assert_ne!(other[0], salted[0]);

    // Without tokens, STORED carries none.
    for seq in 1..=3 {
        cache.remove(seq).unwrap();
    }
    cache.add_sequence(4, &tokens(500, 4), &keys[0]).unwrap();
    cache.commit(4, 4).unwrap();
    let events = cache.drain_events(false).unwrap();
    assert!(
        matches!(events[..], [Event::Stored { id, tokens: None, .. }] if id == next_id),
        "{events:?}"
    );
    next_id += 1;
    index.apply(&events);
    cache.remove(4).unwrap();

    // Eviction: 16 blocks for one sequence evict the 10 cached ones.
    cache.add_sequence(5, &tokens(1000, 64), &keys[0]).unwrap();
    let events = cache.drain_events(true).unwrap();
    let ids: Vec<u64> = events.iter().map(Event::id).collect();
    assert_eq!(ids, (next_id..next_id + 10).collect::<Vec<_>>());
    assert!(events.iter().all(|e| matches!(
        e,
        Event::Removed {
            groups: 1,
            tier: Tier::Primary,
            ..
        }
    )));
    index.apply(&events);
    index.check(&cache);
    assert!(index.0.is_empty());
    cache.commit(5, 64).unwrap();
    index.apply(&cache.drain_events(false).unwrap());
    index.check(&cache);
    assert_eq!(index.0.len(), 16);
    cache.remove(5).unwrap();

    // reset_reuse: one CLEARED event; the snapshot is empty as of it.
    cache.reset_reuse().unwrap();
    let events = cache.drain_events(true).unwrap();
    assert!(matches!(events[..], [Event::Cleared { .. }]), "{events:?}");
    index.apply(&events);
    index.check(&cache);
    let s = cache.snapshot().unwrap();
    assert_eq!(s.event_id, events[0].id());
    assert!(s.entries.is_empty());
    assert!(cache.drain_events(true).unwrap().is_empty());
}

#[test]
fn lost_events_then_snapshot_resync() {
    let config = config(4);
    let cache = Cache::new(&config).unwrap();
    let prompt = tokens(7, 40); // 10 blocks: 10 STORED events, 6 dropped
    cache
        .add_sequence(1, &prompt, &SequenceOptions::new())
        .unwrap();
    cache.commit(1, 40).unwrap();
    let events = cache.drain_events(true).unwrap();
    assert_eq!(
        events[0],
        Event::Lost {
            first_id: 1,
            count: 6
        }
    );
    let want = config
        .block_hashes(&prompt, &SequenceOptions::new())
        .unwrap();
    let stored: Vec<(u64, u64)> = events[1..]
        .iter()
        .map(|e| match e {
            Event::Stored { id, hash, .. } => (*id, *hash),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        stored,
        (6..10).map(|b| (b as u64 + 1, want[b])).collect::<Vec<_>>()
    );

    // The snapshot as of its event id, parents before children.
    let s = cache.snapshot().unwrap();
    assert_eq!(s.event_id, 10);
    let hashes: Vec<(u64, u64)> = s.entries.iter().map(|e| (e.hash, e.parent_hash)).collect();
    let chain: Vec<(u64, u64)> = (0..10)
        .map(|b| (want[b], if b == 0 { 0 } else { want[b - 1] }))
        .collect();
    assert_eq!(hashes, chain);
    let mut index = Index::from_snapshot(&s);
    cache.remove(1).unwrap();
    cache
        .add_sequence(2, &tokens(900, 32), &SequenceOptions::new())
        .unwrap(); // evicts 2
    let events = cache.drain_events(false).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].id(), s.event_id + 1);
    index.apply(&events);
    index.check(&cache);
    cache.commit(2, 12).unwrap(); // 3 STORED fit the ring
    index.apply(&cache.drain_events(false).unwrap());
    index.check(&cache);
}

#[test]
fn events_off_and_bad_input() {
    let off = common::cache(64);
    assert_eq!(
        off.drain_events(true).unwrap_err().status,
        Status::Unsupported
    );
    assert_eq!(off.snapshot().unwrap_err().status, Status::Unsupported);

    let mut config = common::config(64);
    let bad = [ExtraKey::new(0, 0, b"x")];
    let e = config
        .block_hashes(&tokens(0, 8), &SequenceOptions::new().extra_keys(&bad))
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(!e.message.is_empty());
    let none = SequenceOptions::new();
    assert_eq!(config.block_hashes(&tokens(0, 7), &none).unwrap().len(), 1);
    assert!(config.block_hashes(&[], &none).unwrap().is_empty());
    let mut short = [0u64; 1];
    let e = config
        .block_hashes_into(&tokens(0, 8), &none, &mut short)
        .unwrap_err();
    assert_eq!(e.status, Status::BufferTooSmall);
    assert_eq!(short, [0]);

    // The seed changes every hash; extra keys scope the blocks they cover.
    let a = config.block_hashes(&tokens(0, 8), &none).unwrap();
    config.set_event_hash_seed(42).unwrap();
    let b = config.block_hashes(&tokens(0, 8), &none).unwrap();
    assert!(a[0] != b[0] && a[1] != b[1]);
    let image = [ExtraKey::new(4, 2, b"image")];
    let k = config
        .block_hashes(&tokens(0, 8), &SequenceOptions::new().extra_keys(&image))
        .unwrap();
    assert_eq!(k[0], b[0]);
    assert_ne!(k[1], b[1]);
}

#[test]
fn drain_on_another_thread() {
    let cache = Cache::new(&config(1 << 16)).unwrap();
    let stop = AtomicBool::new(false);
    let drained = std::thread::scope(|s| {
        let drainer = s.spawn(|| {
            let mut all = Vec::new();
            while !stop.load(Ordering::Acquire) {
                cache.drain_events_into(&mut all, true).unwrap();
            }
            all
        });
        let workers: Vec<_> = (0..2u64)
            .map(|w| {
                let cache = &cache;
                s.spawn(move || {
                    for i in 0..50u64 {
                        let id = w * 1000 + i;
                        let prompt = tokens((i % 7 * 8) as i32, 8 + 4 * (i % 3) as usize);
                        match cache.add_sequence(id, &prompt, &SequenceOptions::new()) {
                            Ok(_) => {}
                            Err(e) if e.status == Status::OutOfBlocks => continue,
                            Err(e) => panic!("{e}"),
                        }
                        cache.commit(id, 8).unwrap();
                        cache.remove(id).unwrap();
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        drainer.join().unwrap()
    });
    let mut all = drained;
    cache.drain_events_into(&mut all, true).unwrap();
    let ids: Vec<u64> = all.iter().map(Event::id).collect();
    assert_eq!(ids, (1..=all.len() as u64).collect::<Vec<_>>());
    let mut index = Index::default();
    index.apply(&all);
    index.check(&cache);
}

//! Sequences: prefix reuse counts, salt and LoRA isolation, all or nothing
//! when blocks run out, errors with status and message, fork, rewind, pins.

mod common;

use common::tokens;
use kvcache::{Cache, Config, Dtype, ExtraKey, SequenceOptions, Status, Stream};

fn defaults() -> SequenceOptions<'static> {
    SequenceOptions::default()
}

#[test]
fn a_committed_prefix_is_reused_in_whole_blocks() {
    let cache = common::cache(64);
    let prompt = tokens(100, 10); // blocks [0..4) [4..8) [8..10)
    assert_eq!(cache.probe(&prompt, &defaults()).unwrap(), 0);
    assert_eq!(cache.add_sequence(1, &prompt, &defaults()).unwrap(), 0);
    // Nothing is reusable before the KV is committed.
    assert_eq!(cache.probe(&prompt, &defaults()).unwrap(), 0);
    cache.commit(1, 10).unwrap();
    // The two full blocks are; the partial third is not.
    assert_eq!(cache.probe(&prompt, &defaults()).unwrap(), 8);
    assert_eq!(cache.add_sequence(2, &prompt, &defaults()).unwrap(), 8);
    let d = cache.describe_sequence(2).unwrap();
    assert_eq!(
        (d.num_tokens, d.prompt_tokens, d.cached_tokens),
        (10, 10, 8)
    );
    // The reused tokens' KV is already written: they count as committed.
    assert_eq!((d.committed_tokens, d.num_blocks), (8, 3));
    assert_eq!(
        (d.prompt_priority, d.decode_priority),
        (kvcache::DEFAULT_PRIORITY, kvcache::DEFAULT_PRIORITY)
    );

    // Sequence 2 shares the first two blocks and owns its third.
    let a = cache.block_ids(1, 0).unwrap();
    let b = cache.block_ids(2, 0).unwrap();
    assert_eq!(a.len(), 3);
    assert_eq!(a[..2], b[..2]);
    assert_ne!(a[2], b[2]);

    let s = cache.stats().unwrap();
    assert_eq!(s.num_blocks, 16);
    assert_eq!(
        (s.in_use_blocks, s.cached_blocks, s.free_blocks),
        (4, 0, 12)
    );
    assert_eq!((s.reused_blocks, s.missed_blocks), (2, 4));
    assert!((s.hit_rate - 2.0 / 6.0).abs() < 1e-12);
    assert_eq!(s.num_sequences, 2);

    // Removed sequences leave their committed blocks cached.
    cache.remove(1).unwrap();
    cache.remove(2).unwrap();
    let s = cache.stats().unwrap();
    assert_eq!((s.in_use_blocks, s.cached_blocks), (0, 2));
    assert_eq!(
        s.free_blocks + s.cached_blocks + s.in_use_blocks,
        s.num_blocks
    );
    assert_eq!(cache.add_sequence(3, &prompt, &defaults()).unwrap(), 8);
    cache.check().unwrap();
}

#[test]
fn the_last_prompt_token_is_always_recomputed() {
    let cache = common::cache(64);
    let prompt = tokens(7, 8); // exactly two blocks
    cache.add_sequence(1, &prompt, &defaults()).unwrap();
    cache.commit(1, 8).unwrap();
    let cached = cache.add_sequence(2, &prompt, &defaults()).unwrap();
    assert!(cached < 8, "cached {cached} of an 8-token prompt");
    assert_eq!(cached, cache.describe_sequence(2).unwrap().cached_tokens);
}

#[test]
fn salts_lora_ids_and_extra_keys_isolate_scopes() {
    let cache = common::cache(128);
    let prompt = tokens(1, 9);
    let tenant_a = SequenceOptions::new().salt(b"tenant-a");
    cache.add_sequence(1, &prompt, &tenant_a).unwrap();
    cache.commit(1, 9).unwrap();

    assert_eq!(cache.probe(&prompt, &tenant_a).unwrap(), 8);
    assert_eq!(
        cache
            .probe(&prompt, &SequenceOptions::new().salt(b"tenant-b"))
            .unwrap(),
        0
    );
    assert_eq!(cache.probe(&prompt, &defaults()).unwrap(), 0);

    // Absent salt != empty salt.
    cache.add_sequence(2, &prompt, &defaults()).unwrap();
    cache.commit(2, 9).unwrap();
    assert_eq!(cache.probe(&prompt, &defaults()).unwrap(), 8);
    assert_eq!(
        cache
            .probe(&prompt, &SequenceOptions::new().salt(b""))
            .unwrap(),
        0
    );

    // No LoRA != LoRA 0; LoRA 0 != LoRA 1.
    let lora0 = SequenceOptions::new().lora(0);
    assert_eq!(cache.probe(&prompt, &lora0).unwrap(), 0);
    cache.add_sequence(3, &prompt, &lora0).unwrap();
    cache.commit(3, 9).unwrap();
    assert_eq!(cache.probe(&prompt, &lora0).unwrap(), 8);
    assert_eq!(
        cache
            .probe(&prompt, &SequenceOptions::new().lora(1))
            .unwrap(),
        0
    );

    // An image hash over tokens [4, 8) keys the second block only.
    let image = [ExtraKey::new(4, 4, b"image-1")];
    let other = [ExtraKey::new(4, 4, b"image-2")];
    let with_image = SequenceOptions::new().extra_keys(&image);
    assert_eq!(image[0].data(), b"image-1");
    assert_eq!((image[0].offset(), image[0].length()), (4, 4));
    assert_eq!(cache.probe(&prompt, &with_image).unwrap(), 4);
    cache.add_sequence(4, &prompt, &with_image).unwrap();
    cache.commit(4, 9).unwrap();
    assert_eq!(cache.probe(&prompt, &with_image).unwrap(), 8);
    assert_eq!(
        cache
            .probe(&prompt, &SequenceOptions::new().extra_keys(&other))
            .unwrap(),
        4
    );
    cache.check().unwrap();
}

#[test]
fn running_out_of_blocks_changes_nothing() {
    let cache = common::cache(16); // 4 blocks
    cache.add_sequence(1, &tokens(0, 12), &defaults()).unwrap(); // 3 blocks
    let before = cache.stats().unwrap();
    let seq_before = cache.describe_sequence(1).unwrap();
    let ids_before = cache.block_ids(1, 0).unwrap();

    let e = cache
        .add_sequence(2, &tokens(50, 8), &defaults())
        .unwrap_err();
    assert_eq!(e.status, Status::OutOfBlocks);
    assert!(!e.message.is_empty());
    assert_eq!(cache.stats().unwrap(), before);
    assert_eq!(
        cache.describe_sequence(2).unwrap_err().status,
        Status::NotFound
    );

    // 12 + 5 tokens need 5 blocks: two more than sequence 1 has, one free.
    assert_eq!(cache.blocks_needed(1, 5).unwrap(), 2);
    let e = cache.extend(1, &tokens(12, 5)).unwrap_err();
    assert_eq!(e.status, Status::OutOfBlocks);
    assert_eq!(cache.stats().unwrap(), before);
    assert_eq!(cache.describe_sequence(1).unwrap(), seq_before);
    assert_eq!(cache.block_ids(1, 0).unwrap(), ids_before);

    let e = cache.batch_extend(&[1], &[99]).map(|_| ());
    assert!(e.is_ok(), "one more token fits the partial block");
    cache.check().unwrap();
}

#[test]
fn eviction_makes_room_from_cached_blocks() {
    let cache = common::cache(16); // 4 blocks
    cache.add_sequence(1, &tokens(0, 12), &defaults()).unwrap();
    cache.commit(1, 12).unwrap();
    cache.remove(1).unwrap();
    assert_eq!(cache.stats().unwrap().cached_blocks, 3);
    // 16 new tokens need all four blocks: the three cached ones go.
    cache
        .add_sequence(2, &tokens(500, 16), &defaults())
        .unwrap();
    let s = cache.stats().unwrap();
    assert_eq!((s.in_use_blocks, s.cached_blocks, s.free_blocks), (4, 0, 0));
    assert_eq!(s.evicted_blocks, 3);
    assert_eq!(cache.probe(&tokens(0, 12), &defaults()).unwrap(), 0);
}

#[test]
fn errors_carry_status_and_message() {
    let cache = common::cache(64);
    cache.add_sequence(7, &tokens(0, 5), &defaults()).unwrap();

    let e = cache
        .add_sequence(7, &tokens(0, 5), &defaults())
        .unwrap_err();
    assert_eq!(e.status, Status::AlreadyExists);
    assert!(e.message.contains('7'), "{}", e.message);

    let e = cache.extend(8, &[1]).unwrap_err();
    assert_eq!(e.status, Status::NotFound);
    assert!(e.message.contains('8'), "{}", e.message);

    let e = cache.add_sequence(9, &[], &defaults()).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(!e.message.is_empty());

    let e = cache.commit(7, 6).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains('6'), "{}", e.message);

    let e = cache.rewind(7, 6).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);

    let e = cache
        .add_sequence(9, &[1, 2], &SequenceOptions::new().prompt_priority(101))
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("101"), "{}", e.message);

    let e = cache.remove(42).unwrap_err();
    assert_eq!(e.status, Status::NotFound);
    assert_eq!(e.status.name(), "KVC_ERR_NOT_FOUND");
    assert_eq!(e.status.code(), kvcache::sys::KVC_ERR_NOT_FOUND);

    let e = cache.unpin(7).unwrap_err();
    assert_eq!(e.status, Status::NotFound);

    // reset_reuse is refused while blocks are in use.
    let e = cache.reset_reuse().unwrap_err();
    assert_eq!(e.status, Status::InvalidState);
}

#[test]
fn each_thread_reads_its_own_message() {
    let cache = common::cache(64);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let cache = &cache;
            s.spawn(move || {
                for _ in 0..200 {
                    let e = cache.remove(1000 + t).unwrap_err();
                    assert_eq!(e.status, Status::NotFound);
                    assert!(e.message.contains(&(1000 + t).to_string()), "{}", e.message);
                }
            });
        }
    });
}

#[test]
fn fork_rewind_and_pins() {
    let cache = common::cache(64);
    cache.add_sequence(1, &tokens(0, 6), &defaults()).unwrap();
    cache.fork(1, 2).unwrap();
    assert_eq!(
        cache.block_ids(1, 0).unwrap(),
        cache.block_ids(2, 0).unwrap()
    );
    assert_eq!(cache.fork(1, 2).unwrap_err().status, Status::AlreadyExists);
    assert_eq!(cache.fork(5, 6).unwrap_err().status, Status::NotFound);

    // Writing the shared partial tail copies it first.
    cache.extend(2, &[60]).unwrap();
    let (a, b) = (
        cache.block_ids(1, 0).unwrap(),
        cache.block_ids(2, 0).unwrap(),
    );
    assert_eq!(a[0], b[0]);
    assert_ne!(a[1], b[1]);

    // Rewinding into the first block frees the second.
    cache.rewind(2, 4).unwrap();
    let d = cache.describe_sequence(2).unwrap();
    assert_eq!((d.num_tokens, d.num_blocks), (3, 1));

    cache.commit(1, 6).unwrap();
    cache.pin(1).unwrap();
    assert_eq!(cache.pin(1).unwrap_err().status, Status::AlreadyExists);
    cache.remove(1).unwrap();
    cache.remove(2).unwrap();
    let s = cache.stats().unwrap();
    assert_eq!(s.num_pinned, 1);
    assert_eq!(s.num_sequences, 0);
    cache.unpin(1).unwrap();
    assert_eq!(cache.stats().unwrap().num_pinned, 0);
    cache.reset_reuse().unwrap();
    let s = cache.stats().unwrap();
    assert_eq!((s.cached_blocks, s.free_blocks), (0, 16));
    cache.check().unwrap();
}

#[test]
fn block_ids_into_reports_short_buffers() {
    let cache = common::cache(64);
    cache.add_sequence(1, &tokens(0, 9), &defaults()).unwrap();
    let mut ids = [0i32; 2];
    let e = cache.block_ids_into(1, 0, &mut ids).unwrap_err();
    assert_eq!(e.status, Status::BufferTooSmall);
    let mut ids = [0i32; 8];
    assert_eq!(cache.block_ids_into(1, 0, &mut ids).unwrap(), 3);
    assert_eq!(ids[..3], cache.block_ids(1, 0).unwrap()[..]);
}

#[test]
fn partial_reuse_matches_token_by_token() {
    let config = Config::builder()
        .num_layers(1)
        .kv_heads(1)
        .head_dim(64)
        .dtype(Dtype::F32)
        .tokens_per_block(4)
        .max_tokens(64)
        .build()
        .unwrap();
    let cache = Cache::new(&config).unwrap();
    let prompt = tokens(0, 7);
    cache.add_sequence(1, &prompt, &defaults()).unwrap();
    cache.commit(1, 7).unwrap();
    cache.remove(1).unwrap();
    // With partial reuse the committed tail [4, 7) is published on remove;
    // a prompt sharing 6 tokens reuses them all (its 7th differs).
    let mut other = tokens(0, 6);
    other.push(1000);
    other.push(1001);
    assert_eq!(cache.probe(&other, &defaults()).unwrap(), 6);
    assert_eq!(cache.add_sequence(2, &other, &defaults()).unwrap(), 6);
    cache.check().unwrap();
}

#[test]
fn many_threads_share_one_cache() {
    let cache = common::cache(1024);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let cache = &cache;
            s.spawn(move || {
                let prompt = tokens(0, 20);
                for i in 0..50u64 {
                    let id = t * 1000 + i;
                    cache.add_sequence(id, &prompt, &defaults()).unwrap();
                    cache.extend(id, &[1, 2, 3]).unwrap();
                    cache.commit(id, 23).unwrap();
                    cache.remove(id).unwrap();
                }
            });
        }
    });
    let s = cache.stats().unwrap();
    assert_eq!(s.num_sequences, 0);
    assert_eq!(s.in_use_blocks, 0);
    cache.check().unwrap();
}

#[test]
fn calls_on_a_stream_behave_as_on_the_default_one_on_a_cpu_cache() {
    let cache = common::cache(64);
    // SAFETY: NULL is the default stream.
    let stream = unsafe { Stream::from_raw(std::ptr::null_mut()) };
    assert_eq!(stream, Stream::DEFAULT);
    assert_eq!(Stream::default().as_raw(), std::ptr::null_mut());
    let on = cache.on(stream);
    assert_eq!(on.stream(), Stream::DEFAULT);
    assert_eq!(on.add_sequence(1, &tokens(0, 5), &defaults()).unwrap(), 0);
    on.extend(1, &[5, 6]).unwrap();
    on.batch_extend(&[1], &[7]).unwrap();
    assert_eq!(on.cache().describe_sequence(1).unwrap().num_tokens, 8);
    let blocks = cache.block_ids(1, 0).unwrap();
    on.copy_blocks(0, &[blocks[0]], &[10], None).unwrap();
    assert_eq!(on.async_error().unwrap(), None);
    let f = kvcache::features();
    assert_eq!(f.cuda_device(), f.cuda_device() && f.cuda_compiled());
}

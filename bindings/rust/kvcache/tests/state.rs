//! State resources (`state.h`): a Nemotron-H-like config described (n_groups
//! met and not), slots through add/fork/remove and a refusal, fork copying
//! the state bit for bit, bad input; state snapshots: publish, reuse
//! restoring the published bytes, rewind to a snapshot, the counters.

use kvcache::{
    Cache, Config, Dtype, ResourceKind, ResourceReason, SequenceOptions, Status,
    STATE_SNAPSHOTS_NONE,
};

fn config(slots: u32) -> Config {
    let mut c = Config::builder()
        .num_layers(1)
        .kv_heads(1)
        .head_dim(8)
        .primary_bytes(1 << 20)
        .build()
        .unwrap();
    // Mamba-2 heads 2 x 4, d_state 8, n_groups 1: conv_dim 4 * 2 + 2 * 1 * 8 = 24.
    assert_eq!(c.add_ssm_state(2, 4, 8, Dtype::F32).unwrap(), 0);
    assert_eq!(c.add_conv_state(24, 4, Dtype::F32).unwrap(), 1);
    assert_eq!(c.add_conv_state(17, 4, Dtype::F32).unwrap(), 2);
    assert_eq!(c.add_generic_state(100, 512).unwrap(), 3);
    assert_eq!(c.add_unpaged_resource(16, 32).unwrap(), 4);
    c.set_max_state_slots(slots).unwrap();
    assert_eq!(c.max_state_slots().unwrap(), slots);
    assert_eq!(c.num_resources().unwrap(), 5);
    c
}

#[test]
fn describe_slots_and_fork_copy() {
    let cache = Cache::new(&config(2)).unwrap();
    let d = cache.describe().unwrap();
    assert_eq!((d.num_resources, d.num_state_slots), (5, 2));
    let conv = cache.describe_resource(1).unwrap();
    assert_eq!(conv.kind, ResourceKind::Conv);
    assert!(conv.managed);
    assert_eq!(conv.n_groups, 1);
    assert_eq!(conv.dtype, Some(Dtype::F32));
    let bad = cache.describe_resource(2).unwrap();
    assert!(!bad.managed);
    assert_eq!(bad.reason, ResourceReason::NGroups);
    assert!(
        bad.reason_text.contains("no integer n_groups"),
        "{}",
        bad.reason_text
    );
    let ssm = cache.describe_resource(0).unwrap();
    assert_eq!(ssm.strides, [4 * 8 * 4, 8 * 4, 4]);
    assert_eq!(cache.describe_resource(3).unwrap().dtype, None);

    let opts = SequenceOptions::default();
    assert_eq!(cache.add_sequence(1, &[1, 2, 3], &opts).unwrap(), 0);
    let s1 = cache.state_slots_all(&[1]).unwrap();
    for r in 0..5u32 {
        let d = cache.describe_resource(r).unwrap();
        // SAFETY: the CPU slot of sequence 1, slot_bytes long.
        let p =
            unsafe { (d.base as *mut u8).add(s1[r as usize] as usize * d.slot_stride as usize) };
        for b in 0..d.slot_bytes as usize {
            unsafe { *p.add(b) = (b * 13 + r as usize) as u8 };
        }
    }
    cache.fork(1, 2).unwrap();
    let s2 = cache.state_slots_all(&[2]).unwrap();
    for r in 0..5u32 {
        let d = cache.describe_resource(r).unwrap();
        assert_eq!(d.slots_used, 2);
        let at = |s: i32| unsafe {
            std::slice::from_raw_parts(
                (d.base as *const u8).add(s as usize * d.slot_stride as usize),
                d.slot_bytes as usize,
            )
        };
        assert_eq!(at(s1[r as usize]), at(s2[r as usize]));
    }
    let e = cache.add_sequence(3, &[1], &opts).unwrap_err();
    assert_eq!(e.status, Status::OutOfBlocks);
    assert!(e.message.contains("no free state slot"), "{}", e.message);
    assert_eq!(cache.describe_resource(0).unwrap().slots_used, 2);
    cache.remove(1).unwrap();
    assert_eq!(cache.state_slots(&[2], 0).unwrap(), vec![1]);
    assert_eq!(cache.describe_resource(0).unwrap().slots_used, 1);
    cache.check().unwrap();
    let e = cache.rewind(2, 1).unwrap_err();
    assert_eq!(e.status, Status::InvalidState);
}

#[test]
fn bad_input_is_refused_with_its_message() {
    let mut c = Config::new().unwrap();
    let e = c.add_ssm_state(0, 4, 8, Dtype::F32).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(
        e.message.contains("num_heads must be > 0, got 0"),
        "{}",
        e.message
    );
    let e = c.add_generic_state(8, 3).unwrap_err();
    assert!(e.message.contains("power of two"), "{}", e.message);
    assert_eq!(c.num_resources().unwrap(), 0);
    let cache = Cache::new(&config(2)).unwrap();
    let e = cache.describe_resource(5).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    let e = cache.state_slots(&[7], 0).unwrap_err();
    assert_eq!(e.status, Status::NotFound);
}

/// Writes `seed`'s pattern into every slot of sequence `id`, or checks it.
fn pattern(cache: &Cache, id: u64, seed: u8, write: bool) -> bool {
    let slots = cache.state_slots_all(&[id]).unwrap();
    let mut same = true;
    for (r, &slot) in slots.iter().enumerate() {
        let d = cache.describe_resource(r as u32).unwrap();
        // SAFETY: the CPU slot of sequence id, slot_bytes long, while the
        // cache lives and no call runs.
        let p = unsafe {
            std::slice::from_raw_parts_mut(
                (d.base as *mut u8).add(slot as usize * d.slot_stride as usize),
                d.slot_bytes as usize,
            )
        };
        for (b, v) in p.iter_mut().enumerate() {
            let want = (b as u8)
                .wrapping_mul(7)
                .wrapping_add(seed)
                .wrapping_add(r as u8);
            if write {
                *v = want;
            } else {
                same &= *v == want;
            }
        }
    }
    same
}

#[test]
fn snapshots_publish_reuse_and_rewind() {
    let mut c = config(4);
    c.set_tokens_per_block(4).unwrap();
    assert_eq!(c.max_state_snapshots().unwrap(), 0);
    c.set_max_state_snapshots(3).unwrap();
    assert_eq!(c.max_state_snapshots().unwrap(), 3);
    let cache = Cache::new(&c).unwrap();
    let opts = SequenceOptions::default();
    let tokens: Vec<i32> = (100..112).collect();
    assert_eq!(cache.add_sequence(1, &tokens[..10], &opts).unwrap(), 0);
    pattern(&cache, 1, 8, true);
    cache.commit(1, 8).unwrap();
    cache.publish_state(1, 8).unwrap();
    let e = cache.publish_state(1, 6).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(
        e.message.contains("position 6 is not a positive multiple"),
        "{}",
        e.message
    );
    // Speculative decoding: drafts run, then the state goes back to 8.
    cache.extend(1, &tokens[10..12]).unwrap();
    pattern(&cache, 1, 99, true);
    let e = cache.rewind(1, 3).unwrap_err();
    assert_eq!(e.status, Status::InvalidState);
    cache.rewind(1, 4).unwrap();
    assert!(pattern(&cache, 1, 8, false));
    cache.remove(1).unwrap();
    // A new prompt reuses 8 tokens and gets the published bytes.
    assert_eq!(cache.add_sequence(2, &tokens, &opts).unwrap(), 8);
    assert!(pattern(&cache, 2, 8, false));
    let s = cache.snapshot_stats().unwrap();
    assert_eq!((s.num_slots, s.slots_used, s.published), (3, 1, 1));
    assert_eq!((s.hits, s.hit_tokens, s.restores), (1, 8, 1));
    assert!(s.bytes_per_snapshot > 0 && s.bytes >= 3 * s.bytes_per_snapshot);
    assert_eq!((s.evicted, s.dropped), (0, 0));
    cache.check().unwrap();

    let mut c = config(2);
    c.set_max_state_snapshots(STATE_SNAPSHOTS_NONE).unwrap();
    let cache = Cache::new(&c).unwrap();
    assert_eq!(cache.snapshot_stats().unwrap().num_slots, 0);
}

/// With a host tier, a quarter of its bytes holds host snapshots: a full
/// device pool moves its victim there, and a reuse restores it bit for bit.
#[test]
fn snapshots_offload_to_the_host() {
    let mut c = config(4);
    c.set_tokens_per_block(4).unwrap();
    c.set_max_state_snapshots(1).unwrap();
    // One slot of every resource is 2304 bytes: a quarter of 11264 holds one.
    c.set_host_cache_bytes(11264).unwrap();
    let cache = Cache::new(&c).unwrap();
    let opts = SequenceOptions::default();
    let a: Vec<i32> = (1..11).collect();
    let b: Vec<i32> = (11..21).collect();
    for (i, p) in [&a, &b].iter().enumerate() {
        let id = i as u64 + 1;
        assert_eq!(cache.add_sequence(id, p, &opts).unwrap(), 0);
        pattern(&cache, id, 8 + i as u8, true);
        cache.commit(id, 8).unwrap();
        cache.publish_state(id, 8).unwrap(); // b's moves a's snapshot to the host
        cache.remove(id).unwrap();
    }
    assert_eq!(cache.add_sequence(3, &a, &opts).unwrap(), 8);
    assert!(pattern(&cache, 3, 8, false));
    let s = cache.snapshot_stats().unwrap();
    assert_eq!((s.host_num_slots, s.host_slots_used), (1, 1));
    assert_eq!(s.host_bytes, s.bytes / u64::from(s.num_slots));
    assert_eq!(
        (s.offloaded, s.onboarded, s.host_evicted, s.evicted),
        (1, 1, 0, 0)
    );
    cache.check().unwrap();
}

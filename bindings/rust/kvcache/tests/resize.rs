//! Resizing the primary pools in place: the plan follows AutoDeploy's
//! formula, a grow keeps the pool's address and the blocks in use, a shrink
//! over a block in use is refused with nothing changed.

mod common;

use kvcache::{Cache, Config, Dtype, ResizeInputs, SequenceOptions, Status};

// [layer 2][kv 2][tokens 4][heads 2][dim 64] f32.
const BLOCK: u64 = 2 * 2 * 4 * 2 * 64 * 4;

fn cache(blocks: u64, max_blocks: u64) -> Cache {
    let config = Config::builder()
        .num_layers(2)
        .kv_heads(2)
        .head_dim(64)
        .dtype(Dtype::F32)
        .tokens_per_block(common::TPB)
        .primary_bytes(blocks * BLOCK)
        .max_primary_bytes(max_blocks * BLOCK)
        .build()
        .unwrap();
    assert_eq!(config.max_primary_bytes().unwrap(), max_blocks * BLOCK);
    Cache::new(&config).unwrap()
}

#[test]
fn the_plan_follows_the_formula_and_changes_nothing() {
    let cache = cache(16, 1000);
    let inputs = ResizeInputs {
        free_gpu_memory_fraction: 0.5,
        free_bytes: 4_000_000,
        non_paged_bytes: 1_000_000,
        forward_bytes: 1_000_000,
    };
    let plan = cache.plan_resize(&inputs).unwrap();
    assert_eq!(plan.mem_for_paged, 1_000_000);
    assert_eq!(plan.free_bytes, 4_000_000);
    assert_eq!(plan.primary_bytes, 1_000_000);
    assert_eq!(plan.max_primary_bytes, 1000 * BLOCK);
    assert_eq!(plan.blocks_per_group, 1_000_000 / BLOCK);
    assert_eq!(plan.pool_blocks, vec![1_000_000 / BLOCK]);
    assert_eq!(plan.num_blocks, 1_000_000 / BLOCK);
    assert_eq!(plan.token_capacity, 1_000_000 / BLOCK * 4);
    assert_eq!(plan.total_bytes, 1_000_000 / BLOCK * BLOCK);
    assert_eq!(cache.describe().unwrap().num_blocks, 16);
    let bad = ResizeInputs {
        free_gpu_memory_fraction: 1.5,
        ..inputs
    };
    let e = cache.plan_resize(&bad).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e
        .message
        .contains("free_gpu_memory_fraction must be in (0, 1]"));
    // The CPU backend reports no free memory.
    let e = cache.plan_resize(&ResizeInputs::default()).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
}

#[test]
fn grow_and_shrink_in_place() {
    let mut cache = cache(8, 64);
    let opts = SequenceOptions::default();
    cache
        .add_sequence(1, &common::tokens(0, 16), &opts)
        .unwrap();
    let ids = cache.block_ids(1, 0).unwrap();
    let base = cache.pool(0).unwrap().base;
    let view = cache.layer_view(1).unwrap();

    cache.resize(64 * BLOCK).unwrap();
    let d = cache.describe().unwrap();
    assert_eq!(d.num_blocks, 64);
    assert_eq!(d.primary_bytes, 64 * BLOCK);
    assert_eq!(cache.pool(0).unwrap().base, base);
    let view2 = cache.layer_view(1).unwrap();
    assert_eq!(view2.base, view.base);
    assert_eq!(view2.num_blocks, 64);
    assert_eq!(cache.block_ids(1, 0).unwrap(), ids);
    assert_eq!(cache.stats().unwrap().num_blocks, 64);

    // Sequence 1 holds blocks 0..3: a shrink to 2 blocks would cut one.
    let e = cache.resize(2 * BLOCK).unwrap_err();
    assert_eq!(e.status, Status::OutOfBlocks);
    assert!(e.message.contains("is in use"), "{}", e.message);
    assert_eq!(cache.describe().unwrap().num_blocks, 64);
    cache.resize(4 * BLOCK).unwrap();
    assert_eq!(cache.describe().unwrap().num_blocks, 4);
    assert_eq!(cache.pool(0).unwrap().base, base);
    let e = cache.resize(65 * BLOCK).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
}

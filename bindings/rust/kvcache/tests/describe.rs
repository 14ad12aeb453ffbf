//! Describing a cache: summary, groups, pools, per-layer tensor views.

mod common;

use kvcache::{Cache, Config, Device, Dtype, Layout, Status};

#[test]
fn a_cpu_cache_describes_its_memory() {
    let cache = common::cache(64);
    let d = cache.describe().unwrap();
    assert_eq!(d.device, Device::Cpu);
    assert_eq!(d.dtype, Dtype::F32);
    assert_eq!(d.layout, Layout::Nhd);
    assert_eq!(d.num_layers, 2);
    assert_eq!(d.num_groups, 1);
    assert_eq!(d.num_pools, 1);
    assert_eq!(d.tokens_per_block, common::TPB);
    assert_eq!(d.kv_factor, 2);
    // 64 tokens of 4 per block; a block holds both layers.
    assert_eq!(d.num_blocks, 16);
    assert_eq!(d.token_capacity, 64);
    // [layer 2][kv 2][tokens 4][heads 2][dim 64] f32 per block.
    let block_bytes = 2 * 2 * 4 * 2 * 64 * 4;
    assert_eq!(d.primary_bytes, 16 * block_bytes);
    assert_eq!(d.device_free_bytes, 0);
    assert_eq!(cache.device(), Device::Cpu);

    let g = cache.group(0).unwrap();
    assert_eq!(
        (g.window, g.kv_heads, g.head_dim, g.num_layers, g.pool),
        (0, 2, 64, 2, 0)
    );
    assert_eq!(g.block_bytes, block_bytes);
    assert_eq!(g.bytes_per_token, block_bytes / 4);

    let p = cache.pool(0).unwrap();
    assert_eq!(p.num_groups, 1);
    assert_eq!(p.block_bytes, block_bytes);
    assert_eq!(p.num_blocks, 16);
    assert_eq!(p.bytes, 16 * block_bytes);
    assert!(!p.base.is_null());
}

#[test]
fn layer_views_are_strided_tensors_inside_the_pool() {
    let cache = common::cache(64);
    let pool = cache.pool(0).unwrap();
    for layer in 0..2u32 {
        let v = cache.layer_view(layer).unwrap();
        assert_eq!((v.group, v.pool), (0, 0));
        assert_eq!((v.kv_heads, v.head_dim, v.tokens_per_block), (2, 64, 4));
        assert_eq!((v.kv_factor, v.elem_size), (2, 4));
        assert_eq!(v.dtype, Dtype::F32);
        assert_eq!(v.num_blocks, 16);
        assert_eq!(v.block_stride, pool.block_bytes);
        // NHD: [tokens][heads][dim] per (layer, kv) slab.
        assert_eq!(v.head_stride, 64 * 4);
        assert_eq!(v.token_stride, 2 * 64 * 4);
        assert_eq!(v.kv_stride, 4 * 2 * 64 * 4);
        let offset = v.base as usize - pool.base as usize;
        assert_eq!(offset as u64, u64::from(layer) * 2 * v.kv_stride);
    }
}

#[test]
fn hnd_views_put_heads_outside_tokens() {
    let config = Config::builder()
        .num_layers(1)
        .kv_heads(2)
        .head_dim(64)
        .dtype(Dtype::F16)
        .layout(Layout::Hnd)
        .tokens_per_block(8)
        .max_tokens(64)
        .build()
        .unwrap();
    let cache = Cache::new(&config).unwrap();
    let v = cache.layer_view(0).unwrap();
    assert_eq!(v.layout, Layout::Hnd);
    assert_eq!(v.elem_size, 2);
    assert_eq!(v.token_stride, 64 * 2);
    assert_eq!(v.head_stride, 8 * 64 * 2);
}

#[test]
fn windows_and_head_counts_make_groups() {
    let config = Config::builder()
        .num_layers(4)
        .kv_heads_per_layer(&[8, 8, 2, 2])
        .head_dim(64)
        .attention_windows(&[0, 128])
        .max_tokens(256)
        .build()
        .unwrap();
    let cache = Cache::new(&config).unwrap();
    let d = cache.describe().unwrap();
    assert_eq!(d.num_groups, 4);
    let mut shapes: Vec<_> = (0..d.num_groups)
        .map(|g| {
            let g = cache.group(g).unwrap();
            (g.window, g.kv_heads, g.num_layers)
        })
        .collect();
    shapes.sort_unstable();
    assert_eq!(shapes, [(0, 2, 1), (0, 8, 1), (128, 2, 1), (128, 8, 1)]);
    for layer in 0..4 {
        let v = cache.layer_view(layer).unwrap();
        let g = cache.group(v.group).unwrap();
        assert_eq!(g.kv_heads, v.kv_heads);
    }
}

#[test]
fn out_of_range_indices_are_errors_with_messages() {
    let cache = common::cache(64);
    let e = cache.group(1).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains('1'), "{}", e.message);
    let e = cache.pool(5).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains('5'), "{}", e.message);
    let e = cache.layer_view(2).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("layer"), "{}", e.message);
}

#[test]
fn a_cuda_cache_without_cuda_fails_with_a_device_error() {
    if kvcache::features().cuda_device() {
        return; // This machine can create one; nothing to check here.
    }
    let mut config = common::config(64);
    config.set_device(Device::Cuda(0)).unwrap();
    let e = Cache::new(&config).unwrap_err();
    assert_eq!(e.status, Status::Device);
    assert!(!e.message.is_empty());
}

#[test]
fn caches_are_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Cache>();
    let cache = common::cache(64);
    let blocks = std::thread::scope(|s| {
        let a = s.spawn(|| cache.describe().unwrap().num_blocks);
        let b = s.spawn(|| cache.stats().unwrap().num_blocks);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(blocks, (16, 16));
}

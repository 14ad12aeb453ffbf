//! Paged KV resources (`kv_resource.h`): a mixed config described (managed
//! and local with their reasons), each layer's view with its own geometry,
//! the global setters refused after a resource, bad input.

use kvcache::{Cache, Config, Dtype, KvResource, KvResourceReason, Layout, Status};

#[test]
fn mixed_describe_and_views() {
    let mut c = Config::new().unwrap();
    let bf16 = KvResource::new(&[0, 2], 8, 128);
    assert_eq!(
        (bf16.dtype, bf16.kv_factor, bf16.layout),
        (Dtype::Bf16, 2, Layout::Nhd)
    );
    assert_eq!(c.add_kv_resource(&bf16).unwrap(), 0);
    let mut fp8 = KvResource::new(&[1], 4, 64);
    fp8.dtype = Dtype::Fp8E4m3;
    fp8.window = 32;
    assert_eq!(c.add_kv_resource(&fp8).unwrap(), 1);
    c.set_max_tokens(256).unwrap();
    assert_eq!(
        c.set_num_layers(4).unwrap_err().status,
        Status::InvalidState
    );
    let cache = Cache::new(&c).unwrap();
    let d = cache.describe().unwrap();
    assert_eq!((d.num_kv_resources, d.num_layers, d.num_groups), (2, 3, 2));
    let a = cache.describe_kv_resource(0).unwrap();
    assert!(a.managed);
    assert_eq!(a.reason, KvResourceReason::Managed);
    assert_eq!((a.num_layers, a.kv_heads, a.head_dim), (2, 8, 128));
    assert_eq!(a.block_bytes, 2 * 2 * 16 * 8 * 128 * 2);
    let b = cache.describe_kv_resource(1).unwrap();
    assert!(!b.managed);
    assert_eq!(b.reason, KvResourceReason::HeadDimDiffers);
    assert!(b.reason_text.contains("head_dim"));
    assert_eq!((b.managed_with, b.window, b.dtype), (1, 32, Dtype::Fp8E4m3));
    assert_eq!((b.kv_factor, b.layout), (2, Layout::Nhd));
    assert_ne!(a.pool, b.pool);
    assert_ne!(a.group, b.group);
    assert_eq!(b.block_bytes, 2 * 16 * 4 * 64);
    assert_eq!(
        cache.describe_kv_resource(2).unwrap_err().status,
        Status::InvalidArgument
    );
}

#[test]
fn bad_input() {
    let mut c = Config::new().unwrap();
    let e = c
        .add_kv_resource(&KvResource::new(&[], 8, 128))
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(
        e.message.contains("num_layers must be > 0"),
        "{}",
        e.message
    );
    let e = c
        .add_kv_resource(&KvResource::new(&[1, 0], 8, 128))
        .unwrap_err();
    assert!(e.message.contains("ascending"), "{}", e.message);
    c.add_kv_resource(&KvResource::new(&[0], 8, 128)).unwrap();
    let e = c
        .add_kv_resource(&KvResource::new(&[0], 8, 64))
        .unwrap_err();
    assert!(e.message.contains("already has"), "{}", e.message);
    let mut g = Config::new().unwrap();
    g.set_head_dim(64).unwrap();
    let e = g
        .add_kv_resource(&KvResource::new(&[0], 8, 64))
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidState);
}

//! Config: setters, getters, validation errors with their messages, the
//! builder.

mod common;

use kvcache::{Cache, Config, Device, Dtype, Layout, Status};

#[test]
fn defaults_are_the_documented_ones() {
    let c = Config::new().unwrap();
    assert_eq!(c.num_layers().unwrap(), 0);
    assert_eq!(c.head_dim().unwrap(), 0);
    assert_eq!(c.dtype().unwrap(), Dtype::Bf16);
    assert_eq!(c.kv_factor().unwrap(), 2);
    assert_eq!(c.layout().unwrap(), Layout::Nhd);
    assert_eq!(c.tokens_per_block().unwrap(), 16);
    assert_eq!(c.device().unwrap(), Device::Cpu);
    assert_eq!(c.primary_bytes().unwrap(), 0);
    assert_eq!(c.max_tokens().unwrap(), 0);
    assert_eq!(c.free_gpu_memory_fraction().unwrap(), 0.9);
    assert_eq!(c.host_cache_bytes().unwrap(), 0);
    assert_eq!(c.secondary_offload_min_priority().unwrap(), 35);
    assert!(c.block_reuse().unwrap());
    assert!(c.partial_reuse().unwrap());
    assert!(c.copy_on_partial_reuse().unwrap());
    assert_eq!(c.event_buffer_size().unwrap(), 0);
    assert_eq!(c.event_hash_seed().unwrap(), 0);
}

#[test]
fn setters_round_trip() {
    let mut c = Config::new().unwrap();
    c.set_num_layers(4).unwrap();
    c.set_kv_heads_per_layer(&[8, 8, 4, 4]).unwrap();
    c.set_head_dim(128).unwrap();
    c.set_dtype(Dtype::F16).unwrap();
    c.set_kv_factor(1).unwrap();
    c.set_layout(Layout::Hnd).unwrap();
    c.set_tokens_per_block(32).unwrap();
    c.set_attention_windows(&[0, 256]).unwrap();
    c.set_primary_bytes(1 << 20).unwrap();
    c.set_max_tokens(4096).unwrap();
    c.set_free_gpu_memory_fraction(0.5).unwrap();
    c.set_host_cache_bytes(1 << 22).unwrap();
    c.set_secondary_offload_min_priority(50).unwrap();
    c.set_block_reuse(false).unwrap();
    c.set_partial_reuse(false).unwrap();
    c.set_copy_on_partial_reuse(false).unwrap();
    let e = c.set_event_buffer_size((1 << 24) + 1).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    c.set_event_buffer_size(64).unwrap();
    c.set_event_hash_seed(0xfeed_face_1234_5678).unwrap();
    assert_eq!(c.num_layers().unwrap(), 4);
    assert_eq!(
        (0..4).map(|l| c.kv_heads(l).unwrap()).collect::<Vec<_>>(),
        [8, 8, 4, 4]
    );
    assert_eq!(c.head_dim().unwrap(), 128);
    assert_eq!(c.dtype().unwrap(), Dtype::F16);
    assert_eq!(c.kv_factor().unwrap(), 1);
    assert_eq!(c.layout().unwrap(), Layout::Hnd);
    assert_eq!(c.tokens_per_block().unwrap(), 32);
    assert_eq!(
        (0..4)
            .map(|l| c.attention_window(l).unwrap())
            .collect::<Vec<_>>(),
        [0, 256, 0, 256]
    );
    assert_eq!(c.primary_bytes().unwrap(), 1 << 20);
    assert_eq!(c.max_tokens().unwrap(), 4096);
    assert_eq!(c.free_gpu_memory_fraction().unwrap(), 0.5);
    assert_eq!(c.host_cache_bytes().unwrap(), 1 << 22);
    assert_eq!(c.secondary_offload_min_priority().unwrap(), 50);
    assert!(!c.block_reuse().unwrap());
    assert!(!c.partial_reuse().unwrap());
    assert!(!c.copy_on_partial_reuse().unwrap());
    assert_eq!(c.event_buffer_size().unwrap(), 64);
    assert_eq!(c.event_hash_seed().unwrap(), 0xfeed_face_1234_5678);
    c.validate().unwrap();

    c.set_device(Device::Cuda(3)).unwrap();
    assert_eq!(c.device().unwrap(), Device::Cuda(3));
}

#[test]
fn a_rejected_setting_names_the_value_and_changes_nothing() {
    let mut c = Config::new().unwrap();
    let e = c.set_tokens_per_block(12).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("tokens_per_block"), "{}", e.message);
    assert!(e.message.contains("12"), "{}", e.message);
    assert_eq!(c.tokens_per_block().unwrap(), 16);
    assert_eq!(
        e.to_string(),
        format!("KVC_ERR_INVALID_ARGUMENT: {}", e.message)
    );

    let e = c.set_free_gpu_memory_fraction(1.5).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("1.5"), "{}", e.message);
    assert_eq!(c.free_gpu_memory_fraction().unwrap(), 0.9);
}

#[test]
fn validation_checks_the_settings_together() {
    let e = Config::builder().build().unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("layers"), "{}", e.message);

    // Per-layer heads must match the number of layers.
    let e = Config::builder()
        .num_layers(3)
        .kv_heads_per_layer(&[8, 8])
        .head_dim(64)
        .max_tokens(64)
        .build()
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("kv_heads"), "{}", e.message);

    // Cache::new validates too: a budget too small for one block is refused.
    let mut c = Config::builder()
        .num_layers(1)
        .kv_heads(1)
        .head_dim(64)
        .build_unvalidated()
        .unwrap();
    c.set_primary_bytes(100).unwrap();
    let e = Cache::new(&c).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(
        e.message.contains("too small for one block"),
        "{}",
        e.message
    );
    // With no bound at all a CPU cache takes 1 GiB.
    c.set_primary_bytes(0).unwrap();
    let cache = Cache::new(&c).unwrap();
    assert!(cache.describe().unwrap().primary_bytes <= 1 << 30);
}

#[test]
fn the_builder_keeps_the_first_error() {
    let e = Config::builder()
        .num_layers(2)
        .tokens_per_block(3)
        .kv_factor(7)
        .build()
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("tokens_per_block"), "{}", e.message);
    assert!(e.message.contains('3'), "{}", e.message);
}

#[test]
fn clones_are_independent() {
    let mut a = common::config(64);
    let b = a.try_clone().unwrap();
    a.set_head_dim(128).unwrap();
    assert_eq!(b.head_dim().unwrap(), 64);
    assert_eq!(a.head_dim().unwrap(), 128);
    // A cache keeps its own copy: the config may go first.
    let cache = Cache::new(&b).unwrap();
    drop(b);
    assert_eq!(cache.describe().unwrap().num_layers, 2);
}

#[test]
fn configs_move_between_threads() {
    let c = common::config(64);
    let layers = std::thread::spawn(move || c.num_layers().unwrap())
        .join()
        .unwrap();
    assert_eq!(layers, 2);
}

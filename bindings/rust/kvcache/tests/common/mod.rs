//! Helpers shared by the integration tests.
#![allow(dead_code)]

use kvcache::{Cache, Config, Dtype};

/// Tokens per block of the test caches.
pub const TPB: u32 = 4;

/// A CPU config: 2 layers, 2 kv heads, head dim 64, f32, 4 tokens per
/// block, room for `max_tokens` tokens per layer; partial reuse off so that
/// reuse counts are whole blocks.
pub fn config(max_tokens: u64) -> Config {
    Config::builder()
        .num_layers(2)
        .kv_heads(2)
        .head_dim(64)
        .dtype(Dtype::F32)
        .tokens_per_block(TPB)
        .max_tokens(max_tokens)
        .partial_reuse(false)
        .build()
        .expect("test config")
}

/// A cache of `config(max_tokens)`.
pub fn cache(max_tokens: u64) -> Cache {
    Cache::new(&config(max_tokens)).expect("test cache")
}

/// Tokens `start, start + 1, ..` (`n` of them).
pub fn tokens(start: i32, n: usize) -> Vec<i32> {
    (0..n as i32).map(|i| start + i).collect()
}

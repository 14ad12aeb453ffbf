// src/main.rs
//! The user program of tests/outside in Rust (see program.c, the reference
//! whose output this must print byte for byte).

use kvcache::{Cache, Config, Device, Dtype, SequenceOptions};

fn main() -> Result<(), kvcache::Error> {
    let config = Config::builder()
        .num_layers(32)
        .kv_heads(8)
        .head_dim(128)
        .dtype(Dtype::Bf16)
        .tokens_per_block(16)
        .device(Device::Cpu)
        .max_tokens(4096)
        .build()?;
    let cache = Cache::new(&config)?;
    drop(config);
    let d = cache.describe()?;
    println!(
        "cache: {} layers in {} group, {} tokens per block, {} blocks, {} bytes",
        d.num_layers, d.num_groups, d.tokens_per_block, d.num_blocks, d.primary_bytes
    );

    let first: Vec<i32> = (0..1000).map(|i| 1000 + i).collect();
    let second: Vec<i32> = (0..1000)
        .map(|i| if i < 512 { first[i as usize] } else { 5000 + i })
        .collect();
    let none = SequenceOptions::new();
    let cached = cache.add_sequence(1, &first, &none)?;
    println!("request 1: 1000 prompt tokens, {cached} cached");
    cache.commit(1, 1000)?;
    let cached = cache.add_sequence(2, &second, &none)?;
    println!("request 2: 1000 prompt tokens, {cached} cached");
    cache.commit(2, 1000)?;

    let ids = [1u64, 2];
    let prompt = cache.slot_mapping(0, &ids)?;
    let cached_slots = prompt.slots.iter().filter(|&&s| s == -1).count();
    println!(
        "prompt slots: {}, {} of them cached",
        prompt.slots.len(),
        cached_slots
    );
    let mut decode_slots = 0;
    for step in 0..10 {
        cache.batch_extend(&ids, &[7000 + step, 8000 + step])?;
        decode_slots += cache.slot_mapping(0, &ids)?.slots.len();
    }
    let lengths = cache.sequence_lengths(&ids)?;
    println!(
        "decode: 10 steps of 2 sequences, {decode_slots} slots, lengths {} {}",
        lengths[0], lengths[1]
    );

    let s = cache.stats()?;
    println!(
        "stats: {} reused blocks, {} missed blocks, {} in use, {} sequences",
        s.reused_blocks, s.missed_blocks, s.in_use_blocks, s.num_sequences
    );

    match cache.extend(99, &[1]) {
        Err(e) => println!("error: status {}: {}", e.status.code(), e.message),
        Ok(()) => panic!("extending sequence 99 succeeded"),
    }

    cache.remove(1)?;
    cache.remove(2)?;
    let s = cache.stats()?;
    println!(
        "removed: {} sequences, {} cached blocks",
        s.num_sequences, s.cached_blocks
    );
    drop(cache);
    println!("closed");
    Ok(())
}

//! One serving step with the kvcache crate on a CPU cache: two requests
//! share a system prompt; the second finds it cached. For each step the
//! engine asks for the slot mapping, stores the new tokens' K/V (here
//! synthetic), commits them, and runs decode attention through the block
//! tables.
//!
//! Run with `cargo run` when `pkg-config kvcache` finds the library (set
//! `KVCACHE_BUILD_DIR` to a build folder, or `PKG_CONFIG_PATH` to the
//! folder of an installed kvcache.pc); cargo finds it at run time too.

use std::process::ExitCode;

use kvcache::{BlockTables, Cache, Config, Decode, Dtype, SequenceOptions, StoreKv};

const LAYERS: u32 = 2;
const KV_HEADS: u32 = 2;
const Q_HEADS: u32 = 8;
const HEAD_DIM: u32 = 64;
const TOKENS_PER_BLOCK: u32 = 16;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kvcache example failed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    println!("kvcache {} (Rust binding)", kvcache::version_string());
    let config = Config::builder()
        .num_layers(LAYERS)
        .kv_heads(KV_HEADS)
        .head_dim(HEAD_DIM)
        .dtype(Dtype::F32)
        .tokens_per_block(TOKENS_PER_BLOCK)
        .max_tokens(4096)
        .build()?;
    let cache = Cache::new(&config)?;
    let d = cache.describe()?;
    println!(
        "cache: {} blocks of {} tokens, {} token capacity, {} bytes",
        d.num_blocks, d.tokens_per_block, d.token_capacity, d.primary_bytes
    );

    // Both requests start with the same 40-token system prompt.
    let system: Vec<i32> = (1000..1040).collect();
    let options = SequenceOptions::new().salt(b"tenant-1");
    let mut served = Vec::new();
    for (id, question) in [(1u64, 7), (2u64, 9)] {
        let prompt: Vec<i32> = system
            .iter()
            .copied()
            .chain((0..question).map(|t| 5000 + t))
            .collect();
        let predicted = cache.probe(&prompt, &options)?;
        let cached = cache.add_sequence(id, &prompt, &options)?;
        if cached != predicted {
            return Err(format!("probe said {predicted}, add found {cached}").into());
        }
        println!(
            "request {id}: prefix reuse: {cached} of {} prompt tokens cached",
            prompt.len()
        );
        prefill(&cache, id, prompt.len())?;
        served.push((id, cached));
    }
    // The first request computed everything; the second reused the two full
    // blocks of the system prompt.
    if served != [(1, 0), (2, 32)] {
        return Err(format!("unexpected reuse {served:?}").into());
    }

    // One decode step for both.
    let ids = [1u64, 2];
    cache.batch_extend(&ids, &[42, 43])?;
    let slots = cache.slot_mapping(0, &ids)?;
    store(&cache, &slots.slots)?;
    let lengths = cache.sequence_lengths(&ids)?;
    let tables = cache.block_table_csr(0, &ids)?;
    let max_len = *lengths.iter().max().unwrap_or(&1) as u32;
    let query = vec![0.01f32; ids.len() * (Q_HEADS * HEAD_DIM) as usize];
    let mut out = vec![0.0f32; query.len()];
    for layer in 0..LAYERS {
        let csr = BlockTables::Csr {
            indptr: &tables.indptr,
            indices: &tables.indices,
        };
        let args = Decode::new(layer, Q_HEADS, Dtype::F32, &query, &lengths, csr, max_len);
        cache.decode_attention(&args, &mut out)?;
    }
    println!(
        "decode step: lengths {lengths:?}, CSR indptr {:?}, out[0] = {:.4}",
        tables.indptr, out[0]
    );
    for (id, len) in ids.iter().zip(&lengths) {
        cache.commit(*id, *len as u64)?;
        cache.remove(*id)?;
    }

    let s = cache.stats()?;
    println!(
        "stats: {} free, {} cached, {} in use; hit rate {:.2} ({} reused, {} missed)",
        s.free_blocks,
        s.cached_blocks,
        s.in_use_blocks,
        s.hit_rate,
        s.reused_blocks,
        s.missed_blocks
    );
    cache.check()?;

    // Errors carry the library's status and message.
    match cache.remove(99) {
        Err(e) => println!("removing an unknown sequence: {e}"),
        Ok(()) => return Err("removing an unknown sequence succeeded".into()),
    }
    Ok(())
}

/// Computes the prompt of sequence `id` (here: synthetic K/V) and commits
/// it, so that later requests can reuse its blocks.
fn prefill(cache: &Cache, id: u64, len: usize) -> kvcache::Result<()> {
    let slots = cache.slot_mapping(0, &[id])?;
    store(cache, &slots.slots)?;
    cache.commit(id, len as u64)
}

/// Stores K/V for every slot that is not -1, in every layer.
fn store(cache: &Cache, slots: &[i64]) -> kvcache::Result<()> {
    let row = (KV_HEADS * HEAD_DIM) as usize;
    let key: Vec<f32> = (0..slots.len() * row)
        .map(|i| (i % 7) as f32 * 0.1)
        .collect();
    let value: Vec<f32> = (0..slots.len() * row)
        .map(|i| (i % 5) as f32 * 0.2)
        .collect();
    for layer in 0..LAYERS {
        cache.store_kv(&StoreKv::new(layer, Dtype::F32, &key, Some(&value), slots))?;
    }
    Ok(())
}

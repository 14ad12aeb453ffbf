//! A beam search loop on the stateful cache (OpenVINO's stateful mode) with
//! random K/V: a prompt in every beam, then per step a reorder by the
//! surviving beams (no K/V moves, only beam table entries), one new token
//! per beam and layer appended in place, and decode attention reading each
//! beam's history through the beam table. At the end the beams are
//! compacted and the decode output must not change.
//!
//! Run with `cargo run --bin beam_search` (see main.rs for the library).

use std::process::ExitCode;

use kvcache::{Config, Dtype, StatefulCache, StatefulOptions};

const LAYERS: u32 = 4;
const KV_HEADS: u32 = 2;
const Q_HEADS: u32 = 8;
const HEAD_DIM: u32 = 64;
const BEAMS: u32 = 4;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("beam search example failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// xorshift: random K/V and beam choices without a crate.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn values(&mut self, n: u32) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }
}

fn append_all(cache: &StatefulCache, rng: &mut Rng, tokens: u32) -> kvcache::Result<()> {
    for layer in 0..LAYERS {
        let n = BEAMS * KV_HEADS * tokens * HEAD_DIM;
        let (k, v) = (rng.values(n), rng.values(n));
        cache.append(layer, tokens, Dtype::F32, &k, Some(&v), None)?;
    }
    Ok(())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::builder()
        .num_layers(LAYERS)
        .kv_heads(KV_HEADS)
        .head_dim(HEAD_DIM)
        .dtype(Dtype::F32)
        // A stateful cache reads the model spec only: no paged memory bound.
        .build_unvalidated()?;
    let mut options = StatefulOptions::new(BEAMS);
    options.growth_step = 32;
    let cache = StatefulCache::new(&config, &options)?;
    let mut rng = Rng(2024);

    append_all(&cache, &mut rng, 20)?; // the prompt, in every beam
    let query = rng.values(BEAMS * Q_HEADS * HEAD_DIM);
    let mut out = vec![0f32; query.len()];
    let mut gathered = 0u64; // positions a gather of every beam would copy
    for step in 0..100 {
        // The two best beams survive, each forked in two.
        let best = [(rng.next() % 4) as i32, (rng.next() % 4) as i32];
        let beam_idx = [best[0], best[0], best[1], best[1]];
        cache.reorder(&beam_idx)?;
        gathered += u64::from(BEAMS) * u64::from(cache.lengths(0)?[0]);
        append_all(&cache, &mut rng, 1)?;
        for layer in 0..LAYERS {
            cache.decode(layer, Q_HEADS, Dtype::F32, &query, &mut out)?;
        }
        if step % 25 == 0 {
            println!(
                "step {step}: beams from {beam_idx:?}, lengths {:?}",
                cache.lengths(0)?
            );
        }
    }
    let stats = cache.stats()?;
    println!(
        "{} reorders moved {} table entries (a gather would have copied {} positions per layer); \
         {} bytes held, peak {}, {} layer growths",
        stats.reorders,
        stats.table_entries_copied,
        gathered,
        stats.bytes_allocated,
        stats.peak_bytes,
        stats.reallocations
    );
    for layer in 0..LAYERS {
        let s = cache.layer_stats(layer)?;
        println!(
            "layer {layer}: capacity {} (offset {}), {} growths",
            s.capacity, s.growth_offset, s.reallocations
        );
    }

    // Compaction gathers the K/V by the table: the same attention after it.
    let before = out.clone();
    cache.compact()?;
    cache.decode(LAYERS - 1, Q_HEADS, Dtype::F32, &query, &mut out)?;
    if out != before {
        return Err("decode after compaction differs from decode through the beam table".into());
    }
    let state = cache.export_row(0)?;
    println!(
        "beam 0 saved: {} bytes; compaction kept the output",
        state.len()
    );
    Ok(())
}

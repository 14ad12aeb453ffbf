//! Per-call overhead of the safe kvcache crate against the same calls made
//! from C, in one process: for each call, the C loop (c/baseline.c), the
//! same loop through the raw kvcache-sys bindings, and through the safe
//! kvcache API run in alternation (rotating which goes first) for several
//! rounds; the table reports the median nanoseconds per call of each and
//! the safe API's overhead over C.
//!
//! `KVCB_ROUNDS` and `KVCB_ITERS` override the rounds (default 9) and the
//! iterations per round of the cheapest call (default 2,000,000).

use std::hint::black_box;
use std::time::Instant;

use kvcache::{Cache, Config, Dtype, SequenceOptions, Status};
use kvcache_sys as sys;

extern "C" {
    fn kvcb_c_describe(cache: *const sys::kvc_cache_t, iters: u64) -> f64;
    fn kvcb_c_sequence_describe(cache: *const sys::kvc_cache_t, id: u64, iters: u64) -> f64;
    fn kvcb_c_not_found(cache: *const sys::kvc_cache_t, id: u64, iters: u64) -> f64;
    fn kvcb_c_probe(
        cache: *const sys::kvc_cache_t,
        tokens: *const i32,
        n: usize,
        iters: u64,
    ) -> f64;
}

/// Nanoseconds per call of `iters` calls of `f`.
fn time(iters: u64, mut f: impl FnMut()) -> f64 {
    let t0 = Instant::now();
    for _ in 0..iters {
        f();
    }
    t0.elapsed().as_nanos() as f64 / iters as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

struct Row {
    call: &'static str,
    c: f64,
    sys: f64,
    safe: f64,
}

/// Runs the three variants of one call for `rounds` rounds, alternating.
fn measure(
    call: &'static str,
    rounds: usize,
    iters: u64,
    mut c: impl FnMut(u64) -> f64,
    mut sys: impl FnMut(u64) -> f64,
    mut safe: impl FnMut(u64) -> f64,
) -> Row {
    // Warm up caches, branch predictors and the allocator.
    c(iters / 10 + 1);
    sys(iters / 10 + 1);
    safe(iters / 10 + 1);
    let (mut cs, mut ss, mut rs) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Rotate the order so that no variant always runs first.
        for k in 0..3 {
            match (round + k) % 3 {
                0 => {
                    let t = c(iters);
                    assert!(t >= 0.0, "{call}: the C loop saw an unexpected status");
                    cs.push(t);
                }
                1 => ss.push(sys(iters)),
                _ => rs.push(safe(iters)),
            }
        }
    }
    Row {
        call,
        c: median(cs),
        sys: median(ss),
        safe: median(rs),
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

fn main() -> kvcache::Result<()> {
    let rounds = env_or("KVCB_ROUNDS", 9) as usize;
    let iters = env_or("KVCB_ITERS", 2_000_000);

    let config = Config::builder()
        .num_layers(4)
        .kv_heads(8)
        .head_dim(128)
        .dtype(Dtype::Bf16)
        .tokens_per_block(16)
        .max_tokens(1024)
        .build()?;
    let cache = Cache::new(&config)?;
    let raw = cache.as_ptr();
    let prompt: Vec<i32> = (0..64).collect();
    let options = SequenceOptions::default();
    cache.add_sequence(1, &prompt, &options)?;
    cache.commit(1, 64)?;

    let mut rows = Vec::new();
    rows.push(measure(
        "describe a cache (kvc_cache_describe)",
        rounds,
        iters,
        // SAFETY: raw is the live cache.
        |n| unsafe { kvcb_c_describe(raw, n) },
        |n| {
            time(n, || {
                let mut d = unsafe { std::mem::zeroed::<sys::kvc_cache_desc_t>() };
                d.struct_size = std::mem::size_of::<sys::kvc_cache_desc_t>() as u32;
                // SAFETY: live cache, valid out struct.
                assert_eq!(unsafe { sys::kvc_cache_describe(raw, &mut d) }, 0);
                black_box(d.num_blocks);
            })
        },
        |n| {
            time(n, || {
                black_box(cache.describe().unwrap().num_blocks);
            })
        },
    ));
    rows.push(measure(
        "describe a sequence (kvc_sequence_describe)",
        rounds,
        iters,
        // SAFETY: raw is the live cache.
        |n| unsafe { kvcb_c_sequence_describe(raw, 1, n) },
        |n| {
            time(n, || {
                let mut d = unsafe { std::mem::zeroed::<sys::kvc_sequence_desc_t>() };
                d.struct_size = std::mem::size_of::<sys::kvc_sequence_desc_t>() as u32;
                // SAFETY: live cache, valid out struct.
                assert_eq!(unsafe { sys::kvc_sequence_describe(raw, 1, &mut d) }, 0);
                black_box(d.num_tokens);
            })
        },
        |n| {
            time(n, || {
                black_box(cache.describe_sequence(1).unwrap().num_tokens);
            })
        },
    ));
    rows.push(measure(
        "failing call: unknown sequence (NOT_FOUND + message)",
        rounds,
        iters / 100,
        // SAFETY: raw is the live cache.
        |n| unsafe { kvcb_c_not_found(raw, 99, n) },
        |n| {
            time(n, || {
                let mut d = unsafe { std::mem::zeroed::<sys::kvc_sequence_desc_t>() };
                d.struct_size = std::mem::size_of::<sys::kvc_sequence_desc_t>() as u32;
                // SAFETY: live cache, valid out struct.
                let s = unsafe { sys::kvc_sequence_describe(raw, 99, &mut d) };
                assert_eq!(s, sys::KVC_ERR_NOT_FOUND);
                // SAFETY: never NULL.
                black_box(unsafe { *sys::kvc_last_error_message() });
            })
        },
        |n| {
            time(n, || {
                let e = cache.describe_sequence(99).unwrap_err();
                assert_eq!(e.status, Status::NotFound);
                black_box(e);
            })
        },
    ));
    rows.push(measure(
        "probe a cached 64-token prompt (kvc_cache_probe)",
        rounds,
        iters / 8,
        // SAFETY: raw is the live cache; prompt holds its length.
        |n| unsafe { kvcb_c_probe(raw, prompt.as_ptr(), prompt.len(), n) },
        |n| {
            time(n, || {
                let mut cached = 0;
                let mut o = unsafe { std::mem::zeroed::<sys::kvc_sequence_options_t>() };
                o.struct_size = std::mem::size_of::<sys::kvc_sequence_options_t>() as u32;
                o.prompt_priority = sys::KVC_DEFAULT_PRIORITY;
                o.decode_priority = sys::KVC_DEFAULT_PRIORITY;
                // SAFETY: live cache; prompt holds its length.
                let s = unsafe {
                    sys::kvc_cache_probe(raw, prompt.as_ptr(), prompt.len(), &o, &mut cached)
                };
                assert_eq!(s, 0);
                black_box(cached);
            })
        },
        |n| {
            time(n, || {
                black_box(cache.probe(&prompt, &options).unwrap());
            })
        },
    ));

    println!(
        "kvcache {} Rust binding: per-call overhead against C",
        kvcache::version_string()
    );
    println!(
        "{} rounds, median ns per call; {}; {}; {}",
        rounds,
        cpu_model(),
        env!("BENCH_RUSTC"),
        env!("BENCH_CC")
    );
    println!();
    println!("| call | C (ns) | kvcache-sys (ns) | kvcache safe (ns) | safe - C (ns) | safe / C |");
    println!("|---|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:+.1} | {:.2} |",
            r.call,
            r.c,
            r.sys,
            r.safe,
            r.safe - r.c,
            r.safe / r.c
        );
    }
    Ok(())
}

//! The stateful mode through the safe API on a CPU cache: beam search with
//! random beam indices against a naive reference of each beam's history,
//! decode through the beam table equal to decode after compaction, export
//! and import, and errors with status and message.

use kvcache::{Config, Dtype, GrowthPolicy, Layout, StatefulCache, StatefulOptions, Status};

const B: u32 = 4;
const H: u32 = 2;
const D: u32 = 64;

fn config(layers: u32) -> Config {
    Config::builder()
        .num_layers(layers)
        .kv_heads(H)
        .head_dim(D)
        .dtype(Dtype::F32)
        // The paged memory bounds do not apply to a stateful cache.
        .build_unvalidated()
        .expect("config")
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }
}

/// Row r's history in HND order: history[r][kv][h] = positions x D floats.
type History = Vec<Vec<Vec<Vec<f32>>>>;

fn append(c: &StatefulCache, hist: &mut History, rng: &mut Rng, n: u32) {
    let k = rng.f32s((B * H * n * D) as usize);
    let v = rng.f32s((B * H * n * D) as usize);
    c.append(0, n, Dtype::F32, &k, Some(&v), None).unwrap();
    for r in 0..B as usize {
        for (kv, src) in [&k, &v].into_iter().enumerate() {
            for h in 0..H as usize {
                let at = (r * H as usize + h) * (n * D) as usize;
                hist[r][kv][h].extend_from_slice(&src[at..at + (n * D) as usize]);
            }
        }
    }
}

/// Reads row r's K/V through the view and its beam table.
fn read_row(c: &StatefulCache, r: usize) -> Vec<Vec<Vec<f32>>> {
    let v = c.view(0).unwrap();
    let len = c.lengths(0).unwrap()[r] as usize;
    let mut out = vec![vec![Vec::new(); H as usize]; 2];
    for (kv, base) in [v.key, v.value].into_iter().enumerate() {
        for h in 0..H as usize {
            for t in 0..len {
                let src = if v.beam_table.is_null() {
                    r
                } else {
                    // SAFETY: CPU cache: the table is host memory of
                    // batch x stride entries while the cache lives.
                    unsafe { *v.beam_table.add(r * v.beam_table_stride as usize + t) as usize }
                };
                let off = src as u64 * v.row_stride
                    + h as u64 * v.head_stride
                    + t as u64 * v.token_stride;
                // SAFETY: host memory of the layer, inside its capacity.
                let row = unsafe {
                    std::slice::from_raw_parts(
                        base.cast::<u8>().add(off as usize).cast::<f32>(),
                        D as usize,
                    )
                };
                out[kv][h].extend_from_slice(row);
            }
        }
    }
    out
}

#[test]
fn beam_search_reads_every_beam_history_through_the_table() {
    let c = StatefulCache::new(&config(1), &StatefulOptions::new(B)).unwrap();
    let mut hist: History = vec![vec![vec![Vec::new(); H as usize]; 2]; B as usize];
    let mut rng = Rng(42);
    append(&c, &mut hist, &mut rng, 6);
    for _ in 0..40 {
        let idx: Vec<i32> = (0..B).map(|_| (rng.next() % 2) as i32).collect();
        c.reorder(&idx).unwrap();
        hist = idx.iter().map(|&s| hist[s as usize].clone()).collect();
        append(&c, &mut hist, &mut rng, 1);
    }
    for r in 0..B as usize {
        assert_eq!(read_row(&c, r), hist[r], "row {r}");
    }
    let q = rng.f32s((B * 4 * D) as usize);
    let mut indirect = vec![0f32; q.len()];
    c.decode(0, 4, Dtype::F32, &q, &mut indirect).unwrap();
    let s = c.stats().unwrap();
    assert_eq!(s.reorders, 40);
    assert!(s.table_bytes > 0);
    c.compact().unwrap();
    assert!(c.view(0).unwrap().beam_table.is_null());
    let mut gathered = vec![0f32; q.len()];
    c.decode(0, 4, Dtype::F32, &q, &mut gathered).unwrap();
    assert_eq!(indirect, gathered);
    assert_eq!(c.stats().unwrap().compactions, 1);
}

#[test]
fn growth_trim_export_import() {
    let mut o = StatefulOptions::new(B);
    o.growth_step = 8;
    o.layout = Layout::Nhd;
    o.growth_policy = GrowthPolicy::Uniform;
    let c = StatefulCache::new(&config(2), &o).unwrap();
    let mut rng = Rng(7);
    for _ in 0..3 {
        for layer in 0..2 {
            let k = rng.f32s((B * H * 5 * D) as usize);
            c.append(layer, 5, Dtype::F32, &k, Some(&k), Some(&[5, 5, 2, 0]))
                .unwrap();
        }
    }
    assert_eq!(c.lengths(1).unwrap(), vec![15, 15, 6, 0]);
    let ls = c.layer_stats(1).unwrap();
    assert_eq!((ls.capacity, ls.growth_offset, ls.max_length), (16, 0, 15));
    assert!(ls.reallocations >= 1 && ls.bytes > 0 && ls.last_growth_length > 0);
    c.trim(Some(1), 3).unwrap();
    let state = c.export_row(1).unwrap();
    c.import_row(3, &state).unwrap();
    assert_eq!(c.lengths(0).unwrap(), vec![15, 12, 6, 12]);
    assert_eq!(c.export_row(3).unwrap(), state);
    let err = c.import_row(0, &state[..state.len() - 1]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("does not match"), "{}", err.message);
    c.reset(true).unwrap();
    assert_eq!(c.stats().unwrap().kv_bytes, 0);
    assert!(c.async_error().unwrap().is_none());
}

#[test]
fn errors_carry_status_and_message() {
    let c = StatefulCache::new(&config(1), &StatefulOptions::new(B)).unwrap();
    let err = c.reorder(&[0, 1, 5, 0]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(
        err.message.contains("beam_idx[2] = 5 is outside [0, 4)"),
        "{}",
        err.message
    );
    let err = c.trim(None, 1).unwrap_err();
    assert!(err
        .message
        .contains("cannot trim 1 tokens from row 0, which has 0"));
    let err = c.view(3).unwrap_err();
    assert!(err
        .message
        .contains("layer must be < num_layers (1), got 3"));
    let err = c
        .append(0, 1, Dtype::F32, &[0f32; 3], None, None)
        .unwrap_err();
    assert!(
        err.message.contains("append: key has 12 bytes"),
        "{}",
        err.message
    );
    let err = StatefulCache::new(&config(1), &StatefulOptions::new(0)).unwrap_err();
    assert!(err.message.contains("batch must be in 1..1024, got 0"));
    let ws = c
        .decode_workspace_size(&kvcache::RawStatefulDecode {
            q_heads: 2,
            q_dtype: Dtype::F32,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(ws, 0);
}

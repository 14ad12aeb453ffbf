//! Kernels on a CPU cache: store K/V through a slot mapping, decode and
//! prefill attention against a reference, block copies, and the shape
//! checks.

mod common;

use common::{tokens, TPB};
use kvcache::{
    BlockTables, Cache, Decode, Dtype, LayerView, Prefill, RawDecodeArgs, RawPrefillArgs,
    RawStoreArgs, SequenceOptions, Status, StoreKv, StoreStrides,
};

const HEADS: usize = 2;
const DIM: usize = 64;

fn key_of(t: usize, h: usize, d: usize) -> f32 {
    ((t * 31 + h * 7 + d) % 17) as f32 * 0.05 - 0.4
}

fn value_of(t: usize, h: usize, d: usize) -> f32 {
    ((t * 13 + h * 5 + d * 3) % 23) as f32 * 0.1 - 1.0
}

fn tensor(n: usize, f: fn(usize, usize, usize) -> f32) -> Vec<f32> {
    let mut v = Vec::with_capacity(n * HEADS * DIM);
    for t in 0..n {
        for h in 0..HEADS {
            for d in 0..DIM {
                v.push(f(t, h, d));
            }
        }
    }
    v
}

/// Reads element (block, kv, token, head, dim) of a layer through its view.
fn read(view: &LayerView, block: i64, kv: u64, t: u64, h: u64, d: u64) -> f32 {
    let offset = block as u64 * view.block_stride
        + kv * view.kv_stride
        + t * view.token_stride
        + h * view.head_stride
        + d * u64::from(view.elem_size);
    // SAFETY: the view addresses the live cache's host pool and the indices
    // are inside it.
    unsafe {
        view.base
            .cast::<u8>()
            .add(offset as usize)
            .cast::<f32>()
            .read_unaligned()
    }
}

/// A cache holding sequence 1 with `n` tokens whose K/V of layer 1 is
/// stored; returns the cache and its slots.
fn stored(n: usize) -> (Cache, Vec<i64>) {
    let cache = common::cache(64);
    cache
        .add_sequence(1, &tokens(0, n), &SequenceOptions::default())
        .unwrap();
    let slots = cache.slot_mapping(0, &[1]).unwrap().slots;
    let (k, v) = (tensor(n, key_of), tensor(n, value_of));
    cache
        .store_kv(&StoreKv::new(1, Dtype::F32, &k, Some(&v), &slots))
        .unwrap();
    (cache, slots)
}

#[test]
fn store_kv_writes_each_token_into_its_slot() {
    let (cache, slots) = stored(6);
    let view = cache.layer_view(1).unwrap();
    for (t, &slot) in slots.iter().enumerate() {
        let (block, off) = (slot / i64::from(TPB), (slot % i64::from(TPB)) as u64);
        for h in 0..HEADS {
            for d in [0, 1, DIM - 1] {
                assert_eq!(
                    read(&view, block, 0, off, h as u64, d as u64),
                    key_of(t, h, d)
                );
                assert_eq!(
                    read(&view, block, 1, off, h as u64, d as u64),
                    value_of(t, h, d)
                );
            }
        }
    }
}

/// `[batch][heads][n_alloc][dim]` of f(token, head, dim) with token
/// `b * 100 + t`: a model's cache tensors.
fn bhnd(batch: usize, n_alloc: usize, f: fn(usize, usize, usize) -> f32) -> Vec<f32> {
    let mut v = Vec::new();
    for b in 0..batch {
        for h in 0..HEADS {
            for t in 0..n_alloc {
                for d in 0..DIM {
                    v.push(f(b * 100 + t, h, d));
                }
            }
        }
    }
    v
}

#[test]
fn store_kv_strided_reads_a_batch_heads_tokens_dim_view() {
    // Tokens 1..4 of each of 2 sequences of a [2][2][5][64] tensor: no copy.
    let (batch, n_alloc, first, n) = (2, 5, 1, 3);
    let k = bhnd(batch, n_alloc, key_of);
    let v = bhnd(batch, n_alloc, value_of);
    let cache = common::cache(64);
    let slots: Vec<i64> = vec![3, 9, -1, 20, 21, 0];
    let strides = StoreStrides {
        seq_len: n as u32,
        key: [
            (HEADS * n_alloc * DIM) as i64,
            DIM as i64,
            (n_alloc * DIM) as i64,
        ],
        value: [
            (HEADS * n_alloc * DIM) as i64,
            DIM as i64,
            (n_alloc * DIM) as i64,
        ],
    };
    let at = first * DIM;
    cache
        .store_kv_strided(
            &StoreKv::new(1, Dtype::F32, &k[at..], Some(&v[at..]), &slots),
            &strides,
        )
        .unwrap();
    let view = cache.layer_view(1).unwrap();
    for (i, &slot) in slots.iter().enumerate() {
        if slot < 0 {
            continue;
        }
        let token = (i / n) * 100 + first + i % n;
        let (block, off) = (slot / i64::from(TPB), (slot % i64::from(TPB)) as u64);
        for h in 0..HEADS {
            for d in [0, 5, DIM - 1] {
                let (hh, dd) = (h as u64, d as u64);
                assert_eq!(read(&view, block, 0, off, hh, dd), key_of(token, h, d));
                assert_eq!(read(&view, block, 1, off, hh, dd), value_of(token, h, d));
            }
        }
    }
    // A slice too short for what the strides reach, a negative stride, a
    // token count that is not a multiple of seq_len: refused, nothing written.
    let short = cache
        .store_kv_strided(
            &StoreKv::new(1, Dtype::F32, &k[at..at + 1000], Some(&v[at..]), &slots),
            &strides,
        )
        .unwrap_err();
    assert!(short.message.contains("strides reach"), "{short}");
    let negative = StoreStrides {
        key: [0, -(DIM as i64), DIM as i64],
        ..strides
    };
    let err = cache
        .store_kv_strided(
            &StoreKv::new(1, Dtype::F32, &k, Some(&v), &slots),
            &negative,
        )
        .unwrap_err();
    assert!(err.message.contains(">= 0"), "{err}");
    let err = cache
        .store_kv_strided(
            &StoreKv::new(1, Dtype::F32, &k, Some(&v), &slots[..5]),
            &strides,
        )
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    // The raw call takes negative strides: tokens in reverse order.
    let rev = tensor(4, key_of);
    let raw = RawStoreArgs {
        layer: 0,
        num_tokens: 4,
        src_dtype: Dtype::F32,
        key: rev[3 * HEADS * DIM..].as_ptr().cast(),
        value: rev.as_ptr().cast(),
        slot_mapping: [40i64, 41, 42, 43].as_ptr(),
        ..RawStoreArgs::default()
    };
    let back = StoreStrides {
        seq_len: 0,
        key: [0, -((HEADS * DIM) as i64), DIM as i64],
        value: [0, (HEADS * DIM) as i64, DIM as i64],
    };
    // SAFETY: CPU cache; the strides address tokens 3, 2, 1, 0 of `rev`.
    unsafe { cache.store_kv_strided_raw(&raw, &back) }.unwrap();
    let view = cache.layer_view(0).unwrap();
    for t in 0..4u64 {
        let slot = 40 + t as i64;
        let (block, off) = (slot / i64::from(TPB), (slot % i64::from(TPB)) as u64);
        assert_eq!(
            read(&view, block, 0, off, 1, 2),
            key_of(3 - t as usize, 1, 2)
        );
        assert_eq!(read(&view, block, 1, off, 1, 2), key_of(t as usize, 1, 2));
    }
}

#[test]
fn slot_minus_one_is_skipped() {
    let cache = common::cache(64);
    let k = tensor(2, key_of);
    let v = tensor(2, value_of);
    cache
        .store_kv(&StoreKv::new(0, Dtype::F32, &k, Some(&v), &[-1, 5]))
        .unwrap();
    let view = cache.layer_view(0).unwrap();
    assert_eq!(read(&view, 1, 0, 1, 0, 3), key_of(1, 0, 3));
}

fn reference(q: &[f32], q_heads: usize, n: usize) -> Vec<f32> {
    let group = q_heads / HEADS;
    let scale = 1.0 / (DIM as f32).sqrt();
    let mut out = vec![0.0f32; q_heads * DIM];
    for h in 0..q_heads {
        let kvh = h / group;
        let scores: Vec<f32> = (0..n)
            .map(|t| {
                (0..DIM)
                    .map(|d| q[h * DIM + d] * key_of(t, kvh, d))
                    .sum::<f32>()
                    * scale
            })
            .collect();
        let max = scores.iter().cloned().fold(f32::MIN, f32::max);
        let w: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f32 = w.iter().sum();
        for d in 0..DIM {
            out[h * DIM + d] = (0..n).map(|t| w[t] * value_of(t, kvh, d)).sum::<f32>() / sum;
        }
    }
    out
}

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "[{i}] {x} != {y}");
    }
}

#[test]
fn decode_attention_matches_a_reference_with_padded_and_csr_tables() {
    let n = 6;
    let (cache, _) = stored(n);
    let q_heads = 4;
    let query: Vec<f32> = (0..q_heads * DIM)
        .map(|i| ((i % 11) as f32 - 5.0) * 0.03)
        .collect();
    let expected = reference(&query, q_heads, n);
    let blocks = cache.block_ids(1, 0).unwrap();
    let seq_lens = [n as i32];

    let mut out = vec![0.0f32; q_heads * DIM];
    let padded = BlockTables::Padded {
        table: &blocks,
        stride: 2,
    };
    let args = Decode::new(1, q_heads as u32, Dtype::F32, &query, &seq_lens, padded, 8);
    cache.decode_attention(&args, &mut out).unwrap();
    close(&out, &expected);

    let csr = cache.block_table_csr(0, &[1]).unwrap();
    let tables = BlockTables::Csr {
        indptr: &csr.indptr,
        indices: &csr.indices,
    };
    let args = Decode::new(1, q_heads as u32, Dtype::F32, &query, &seq_lens, tables, 8);
    let mut out2 = vec![0.0f32; q_heads * DIM];
    cache.decode_attention(&args, &mut out2).unwrap();
    assert_eq!(out, out2);

    assert_eq!(cache.async_error().unwrap(), None);
}

#[test]
fn prefill_attention_matches_a_reference_causally() {
    // The last 4 of 6 stored tokens are new: row i attends tokens 0..=2+i.
    let n = 6;
    let (cache, _) = stored(n);
    let (q_heads, q_len) = (4, 4);
    let query: Vec<f32> = (0..q_len * q_heads * DIM)
        .map(|i| ((i % 13) as f32 - 6.0) * 0.02)
        .collect();
    let blocks = cache.block_ids(1, 0).unwrap();
    let qo_indptr = [0, q_len as i32];
    let kv_lens = [n as i32];
    let padded = BlockTables::Padded {
        table: &blocks,
        stride: 2,
    };
    let args = Prefill::new(
        1,
        q_heads as u32,
        Dtype::F32,
        &query,
        &qo_indptr,
        &kv_lens,
        padded,
        8,
    );
    let mut out = vec![0.0f32; q_len * q_heads * DIM];
    let mut lse = vec![0.0f32; q_len * q_heads];
    cache
        .prefill_attention(&args, &mut out, Some(&mut lse))
        .unwrap();
    for i in 0..q_len {
        let row = &query[i * q_heads * DIM..(i + 1) * q_heads * DIM];
        close(
            &out[i * q_heads * DIM..(i + 1) * q_heads * DIM],
            &reference(row, q_heads, n - q_len + i + 1),
        );
    }
    assert!(lse.iter().all(|x| x.is_finite()));

    // The same through a CSR table and the raw call, without lse.
    let csr = cache.block_table_csr(0, &[1]).unwrap();
    let mut out2 = vec![0.0f32; out.len()];
    let raw = RawPrefillArgs {
        layer: 1,
        batch: 1,
        total_q: q_len as u32,
        q_heads: q_heads as u32,
        q_dtype: Dtype::F32,
        table_format: kvcache::TableFormat::Csr,
        query: query.as_ptr().cast(),
        out: out2.as_mut_ptr().cast(),
        qo_indptr: qo_indptr.as_ptr(),
        kv_lens: kv_lens.as_ptr(),
        block_table: csr.indices.as_ptr(),
        indptr: csr.indptr.as_ptr(),
        max_kv_len: 8,
        ..RawPrefillArgs::default()
    };
    assert_eq!(cache.prefill_workspace_size(&raw).unwrap(), 0);
    // SAFETY: CPU cache; every pointer names live host memory of the shapes.
    unsafe { cache.prefill_attention_raw(&raw).unwrap() };
    assert_eq!(out, out2);

    // More new tokens than the sequence holds: refused, out untouched.
    let bad_lens = [3];
    let padded = BlockTables::Padded {
        table: &blocks,
        stride: 2,
    };
    let args = Prefill::new(
        1,
        q_heads as u32,
        Dtype::F32,
        &query,
        &qo_indptr,
        &bad_lens,
        padded,
        8,
    );
    let mut untouched = vec![7.0f32; out.len()];
    let e = cache
        .prefill_attention(&args, &mut untouched, None)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(
        e.message.contains("q_len 4 (qo_indptr) above its kv_len 3"),
        "{}",
        e.message
    );
    assert!(untouched.iter().all(|&x| x == 7.0));
}

#[test]
fn kernel_arguments_are_checked_before_anything_runs() {
    let (cache, slots) = stored(3);
    let k = tensor(3, key_of);
    let v = tensor(3, value_of);

    let e = cache
        .store_kv(&StoreKv::new(0, Dtype::F32, &k[1..], Some(&v), &slots))
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("key"), "{}", e.message);

    let e = cache
        .store_kv(&StoreKv::new(0, Dtype::F32, &k, None, &slots))
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("value"), "{}", e.message);

    let e = cache
        .store_kv(&StoreKv::new(0, Dtype::F32, &k, Some(&v), &[0, 1, 64]))
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("64"), "{}", e.message);

    // f32 data in bytes must be aligned for f32.
    let bytes: Vec<u8> = vec![0; 3 * HEADS * DIM * 4 + 1];
    let e = cache
        .store_kv(&StoreKv::new(
            0,
            Dtype::F32,
            &bytes[1..],
            Some(&bytes[1..]),
            &slots,
        ))
        .unwrap_err();
    assert!(e.message.contains("aligned"), "{}", e.message);

    // bf16 data in an f32 cache is refused by the library (as u16 bits).
    let bits = vec![0u16; 3 * HEADS * DIM];
    let e = cache
        .store_kv(&StoreKv::new(0, Dtype::Bf16, &bits, Some(&bits), &slots))
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);

    let e = cache
        .store_kv(&StoreKv::new(2, Dtype::F32, &k, Some(&v), &slots))
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("layer"), "{}", e.message);

    let q = vec![0.0f32; 2 * DIM];
    let mut out = vec![0.0f32; 2 * DIM];
    let lens = [3];
    let table = [0, 1];
    let padded = BlockTables::Padded {
        table: &table,
        stride: 2,
    };
    let e = cache
        .decode_attention(
            &Decode::new(0, 2, Dtype::F32, &q, &lens, padded, 8),
            &mut out[1..],
        )
        .unwrap_err();
    assert!(e.message.contains("out"), "{}", e.message);
    let short = BlockTables::Padded {
        table: &table[..1],
        stride: 2,
    };
    let e = cache
        .decode_attention(
            &Decode::new(0, 2, Dtype::F32, &q, &lens, short, 8),
            &mut out,
        )
        .unwrap_err();
    assert!(e.message.contains("table"), "{}", e.message);
    let csr = BlockTables::Csr {
        indptr: &[0, 3],
        indices: &table,
    };
    let e = cache
        .decode_attention(&Decode::new(0, 2, Dtype::F32, &q, &lens, csr, 8), &mut out)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("indptr"), "{}", e.message);
    // Stride too small for max_seq_len, found by the library.
    let e = cache
        .decode_attention(
            &Decode::new(0, 2, Dtype::F32, &q, &lens, padded, 64),
            &mut out,
        )
        .unwrap_err();
    assert!(e.message.contains("table_stride"), "{}", e.message);
    // A length above max_seq_len, found by the library.
    let e = cache
        .decode_attention(
            &Decode::new(0, 2, Dtype::F32, &q, &[9], padded, 8),
            &mut out,
        )
        .unwrap_err();
    assert!(e.message.contains("seq_lens"), "{}", e.message);
}

#[test]
fn copy_blocks_copies_whole_blocks_and_token_rows() {
    let (cache, _) = stored(8);
    let blocks = cache.block_ids(1, 0).unwrap();
    let view = cache.layer_view(1).unwrap();
    let free: Vec<i32> = (0..16).filter(|b| !blocks.contains(b)).take(2).collect();

    cache
        .copy_blocks(0, &[blocks[0], blocks[1]], &free, Some(&[4, 2]))
        .unwrap();
    for t in 0..4u64 {
        assert_eq!(
            read(&view, free[0].into(), 0, t, 1, 9),
            key_of(t as usize, 1, 9)
        );
    }
    assert_eq!(read(&view, free[1].into(), 1, 1, 0, 2), value_of(5, 0, 2));

    let e = cache
        .copy_blocks(0, &[blocks[0], blocks[1]], &[free[0], free[0]], None)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("destination"), "{}", e.message);
    let e = cache.copy_blocks(0, &[0], &[1, 2], None).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    let e = cache.copy_blocks(0, &[0], &[16], None).unwrap_err();
    assert!(e.message.contains("16"), "{}", e.message);
}

#[test]
fn raw_kernels_take_pointers() {
    let cache = common::cache(64);
    let k = tensor(1, key_of);
    let v = tensor(1, value_of);
    let slot = [4i64]; // block 1, token 0
    let args = RawStoreArgs {
        layer: 0,
        num_tokens: 1,
        src_dtype: Dtype::F32,
        key: k.as_ptr().cast(),
        value: v.as_ptr().cast(),
        slot_mapping: slot.as_ptr(),
        ..RawStoreArgs::default()
    };
    // SAFETY: host pointers on a CPU cache, valid for one token.
    unsafe { cache.store_kv_raw(&args).unwrap() };
    let view = cache.layer_view(0).unwrap();
    assert_eq!(read(&view, 1, 1, 0, 1, 4), value_of(0, 1, 4));

    let q = vec![0.0f32; 2 * DIM];
    let mut out = vec![0.0f32; 2 * DIM];
    let lens = [1i32];
    let table = [1i32];
    let mut d = RawDecodeArgs {
        layer: 0,
        batch: 1,
        q_heads: 2,
        q_dtype: Dtype::F32,
        query: q.as_ptr().cast(),
        out: out.as_mut_ptr().cast(),
        seq_lens: lens.as_ptr(),
        block_table: table.as_ptr(),
        table_stride: 1,
        max_seq_len: 4,
        ..RawDecodeArgs::default()
    };
    assert_eq!(cache.decode_workspace_size(&d).unwrap(), 0);
    // SAFETY: host pointers on a CPU cache, valid for the shapes.
    unsafe { cache.decode_attention_raw(&d).unwrap() };
    // One token: each query head's output is its kv head's value row.
    assert_eq!(out[4], value_of(0, 0, 4));
    assert_eq!(out[DIM + 4], value_of(0, 1, 4));
    d.q_heads = 3;
    // SAFETY: as above; the call fails its checks before reading.
    let e = unsafe { cache.decode_attention_raw(&d).unwrap_err() };
    assert!(e.message.contains("q_heads"), "{}", e.message);
}

#[test]
fn a_reused_prefix_is_read_back_by_decode_attention() {
    // Sequence 1 computes 8 tokens (two full blocks) and commits them.
    let (cache, _) = stored(8);
    cache.commit(1, 8).unwrap();
    cache.remove(1).unwrap();

    // Sequence 2 reuses them and computes only its 9th token.
    let prompt = tokens(0, 9);
    let cached = cache
        .add_sequence(2, &prompt, &SequenceOptions::default())
        .unwrap();
    assert_eq!(cached, 8);
    let slots = cache.slot_mapping(0, &[2]).unwrap().slots;
    assert!(slots[..8].iter().all(|&s| s == -1));
    let all_k = tensor(9, key_of);
    let all_v = tensor(9, value_of);
    let row = HEADS * DIM;
    cache
        .store_kv(&StoreKv::new(
            1,
            Dtype::F32,
            &all_k[8 * row..],
            Some(&all_v[8 * row..]),
            &slots[8..],
        ))
        .unwrap();

    let q_heads = 2;
    let query: Vec<f32> = (0..q_heads * DIM)
        .map(|i| ((i % 13) as f32 - 6.0) * 0.02)
        .collect();
    let lens = cache.sequence_lengths(&[2]).unwrap();
    assert_eq!(lens, [9]);
    let t = cache.block_table(0, &[2], -1).unwrap();
    let tables = BlockTables::Padded {
        table: &t.table,
        stride: t.max_blocks as u32,
    };
    let mut out = vec![0.0f32; q_heads * DIM];
    cache
        .decode_attention(
            &Decode::new(1, q_heads as u32, Dtype::F32, &query, &lens, tables, 12),
            &mut out,
        )
        .unwrap();
    close(&out, &reference(&query, q_heads, 9));
}

//! Tensor parallelism (`Config::set_cpu_ranks`): one cache over 2 CPU
//! ranks, each rank's bytes written with its share of the heads and read
//! back through its own layer view after a reuse.

use kvcache::{Cache, Config, Dtype, SequenceOptions, Status, StoreKv};

const HEADS: u32 = 4;
const DIM: u32 = 2;

fn config(ranks: u32) -> Config {
    let mut c = Config::builder()
        .num_layers(1)
        .kv_heads(HEADS)
        .head_dim(DIM)
        .dtype(Dtype::F32)
        .tokens_per_block(4)
        .max_tokens(64)
        .build_unvalidated()
        .unwrap();
    c.set_cpu_ranks(ranks).unwrap();
    c
}

fn value(token: i32, head: u32, d: u32, rank_kv: u32) -> f32 {
    (token * 100 + (head * 10 + d) as i32) as f32 + rank_kv as f32 * 0.5
}

#[test]
fn two_ranks_split_heads_and_keep_their_bytes_through_reuse() {
    let cache = Cache::new(&config(2)).unwrap();
    let d = cache.describe().unwrap();
    assert_eq!((d.num_ranks, d.max_head_replication), (2, 1));
    let g = cache.group(0).unwrap();
    assert_eq!(
        (g.kv_heads, g.kv_heads_per_rank, g.head_replication),
        (4, 2, 1)
    );
    let tokens: Vec<i32> = (1..=9).collect();
    cache
        .add_sequence(1, &tokens, &SequenceOptions::default())
        .unwrap();
    let slots = cache.slot_mapping(0, &[1]).unwrap().slots;
    for rank in 0..2u32 {
        let v = cache.layer_view_rank(rank, 0).unwrap();
        assert_eq!(
            (v.rank, v.kv_heads, v.first_kv_head, v.total_kv_heads),
            (rank, 2, 2 * rank, 4)
        );
        let mut key = Vec::new();
        let mut val = Vec::new();
        for t in &tokens {
            for h in 0..2 {
                for dd in 0..DIM {
                    key.push(value(*t, v.first_kv_head + h, dd, 0));
                    val.push(value(*t, v.first_kv_head + h, dd, 1));
                }
            }
        }
        let mut args = StoreKv::new(0, Dtype::F32, &key, Some(&val), &slots);
        args.rank = rank;
        cache.store_kv(&args).unwrap();
    }
    cache.commit(1, 9).unwrap();
    cache.remove(1).unwrap();
    let cached = cache
        .add_sequence(2, &tokens, &SequenceOptions::default())
        .unwrap();
    assert_eq!(cached, 8);
    let blocks = cache.block_ids(2, 0).unwrap();
    for rank in 0..2u32 {
        let v = cache.layer_view_rank(rank, 0).unwrap();
        for (pos, t) in tokens.iter().enumerate().take(8) {
            for h in 0..2u32 {
                for dd in 0..DIM {
                    let at = blocks[pos / 4] as u64 * v.block_stride
                        + (pos as u64 % 4) * v.token_stride
                        + h as u64 * v.head_stride
                        + dd as u64 * v.elem_size as u64;
                    // SAFETY: CPU cache alive; `at` lies inside the rank's pool.
                    let have = unsafe { *(v.base.cast::<u8>().add(at as usize) as *const f32) };
                    assert_eq!(have, value(*t, v.first_kv_head + h, dd, 0), "rank {rank}");
                }
            }
        }
    }
    let err = cache.layer_view_rank(2, 0).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
}

#[test]
fn ranks_round_trip_and_bad_input_is_refused() {
    let mut c = config(4);
    assert_eq!(c.ranks().unwrap(), vec![0, 1, 2, 3]);
    let err = c.set_cuda_ranks(&[1, 1]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("both 1"), "{}", err.message);
    assert_eq!(c.ranks().unwrap(), vec![0, 1, 2, 3]);
    let mut three = Config::builder()
        .num_layers(1)
        .kv_heads(3)
        .head_dim(DIM)
        .max_tokens(64)
        .cpu_ranks(2)
        .build_unvalidated()
        .unwrap();
    let err = Cache::new(&three).err().unwrap();
    assert!(
        err.message.contains("3 kv heads, which 2 ranks"),
        "{}",
        err.message
    );
    three.set_cpu_ranks(1).unwrap();
    assert_eq!(three.ranks().unwrap(), vec![0]);
    let _ = Config::builder().cuda_ranks(&[0, 1]);
}

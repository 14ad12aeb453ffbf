//! Batch tables written into slices: padded and CSR block tables, lengths,
//! slot mappings, the decode step.

mod common;

use common::{tokens, TPB};
use kvcache::{SequenceOptions, Status};

fn setup() -> kvcache::Cache {
    let cache = common::cache(64);
    let o = SequenceOptions::default();
    cache.add_sequence(1, &tokens(0, 9), &o).unwrap(); // 3 blocks
    cache.add_sequence(2, &tokens(100, 4), &o).unwrap(); // 1 block
    cache.add_sequence(3, &tokens(200, 5), &o).unwrap(); // 2 blocks
    cache
}

#[test]
fn padded_tables_hold_each_sequences_blocks() {
    let cache = setup();
    let ids = [1, 2, 3];
    let t = cache.block_table(0, &ids, -1).unwrap();
    assert_eq!(t.max_blocks, 3);
    assert_eq!(t.table.len(), 9);
    for (row, id) in ids.iter().enumerate() {
        let blocks = cache.block_ids(*id, 0).unwrap();
        let r = &t.table[row * 3..row * 3 + 3];
        assert_eq!(r[..blocks.len()], blocks[..]);
        assert!(r[blocks.len()..].iter().all(|&b| b == -1));
    }

    let mut small = [0i32; 6];
    let e = cache
        .block_table_into(0, &ids, &mut small, 2, -1)
        .unwrap_err();
    assert_eq!(e.status, Status::BufferTooSmall);
    assert!(e.message.contains('3'), "{}", e.message);

    let mut wide = [7i32; 12];
    assert_eq!(cache.block_table_into(0, &ids, &mut wide, 4, 0).unwrap(), 3);
    assert_eq!(wide[..3], t.table[..3]);
    assert_eq!(wide[3], 0);

    // The slice must hold rows * max_blocks entries.
    let e = cache
        .block_table_into(0, &ids, &mut small, 3, 0)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("table"), "{}", e.message);

    let e = cache.block_table(0, &[1, 99], 0).unwrap_err();
    assert_eq!(e.status, Status::NotFound);
    assert!(e.message.contains("99"), "{}", e.message);
    let e = cache.block_table(5, &[1], 0).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
}

#[test]
fn csr_tables_are_flashinfer_shaped() {
    let cache = setup();
    let ids = [1, 2, 3];
    let t = cache.block_table_csr(0, &ids).unwrap();
    assert_eq!(t.indptr, [0, 3, 4, 6]);
    assert_eq!(t.last_page_len, [1, 4, 1]);
    let mut all = Vec::new();
    for id in ids {
        all.extend(cache.block_ids(id, 0).unwrap());
    }
    assert_eq!(t.indices, all);

    let (mut indptr, mut indices, mut last) = ([0i32; 4], [0i32; 5], [0i32; 3]);
    let e = cache
        .block_table_csr_into(0, &ids, &mut indptr, &mut indices, &mut last)
        .unwrap_err();
    assert_eq!(e.status, Status::BufferTooSmall);
    let mut indices = [0i32; 6];
    assert_eq!(
        cache
            .block_table_csr_into(0, &ids, &mut indptr, &mut indices, &mut last)
            .unwrap(),
        6
    );
    assert_eq!(indices[..], t.indices[..]);
    let e = cache
        .block_table_csr_into(0, &ids, &mut indptr[..3], &mut indices, &mut last)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
}

#[test]
fn lengths_and_slot_mappings_follow_the_sequences() {
    let cache = common::cache(64);
    let o = SequenceOptions::default();
    cache.add_sequence(1, &tokens(0, 9), &o).unwrap();
    cache.commit(1, 9).unwrap();
    // Sequence 2 reuses the first two blocks of sequence 1.
    assert_eq!(cache.add_sequence(2, &tokens(0, 10), &o).unwrap(), 8);
    assert_eq!(cache.sequence_lengths(&[1, 2]).unwrap(), [9, 10]);

    let m = cache.slot_mapping(0, &[2]).unwrap();
    assert_eq!(m.new_tokens, [10]);
    assert_eq!(m.slots.len(), 10);
    assert!(m.slots[..8].iter().all(|&s| s == -1), "{:?}", m.slots);
    let tail = i64::from(cache.block_ids(2, 0).unwrap()[2]) * i64::from(TPB);
    assert_eq!(m.slots[8..], [tail, tail + 1]);

    // The cursor advanced: only tokens added since then come next.
    cache.batch_extend(&[1, 2], &[5, 6]).unwrap();
    assert_eq!(cache.sequence_lengths(&[1, 2]).unwrap(), [10, 11]);
    let mut slots = [0i64; 4];
    let mut new_tokens = [0i32; 2];
    let e = cache
        .slot_mapping_into(0, &[2, 1], &mut slots[..0], Some(&mut new_tokens))
        .unwrap_err();
    assert_eq!(e.status, Status::BufferTooSmall);
    // Sequence 1 never had a mapping: all 10 of its tokens are new.
    let m = cache.slot_mapping(0, &[2, 1]).unwrap();
    assert_eq!(m.new_tokens, [1, 10]);
    assert_eq!(m.slots[0], tail + 2);
    assert_eq!(
        cache
            .slot_mapping_into(0, &[2, 1], &mut slots, Some(&mut new_tokens))
            .unwrap(),
        0
    );
    assert_eq!(new_tokens, [0, 0]);

    let e = cache.batch_extend(&[1, 2], &[5]).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    let e = cache.batch_extend(&[1, 1], &[5, 6]).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    let e = cache.batch_extend(&[1, 77], &[5, 6]).unwrap_err();
    assert_eq!(e.status, Status::NotFound);
    assert!(e.message.contains("77"), "{}", e.message);
    assert_eq!(cache.sequence_lengths(&[1, 2]).unwrap(), [10, 11]);
    let mut lengths = [0i32; 1];
    let e = cache
        .sequence_lengths_into(&[1, 2], &mut lengths)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
}

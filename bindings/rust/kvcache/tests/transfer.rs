//! Block export/import between two caches: bytes copied through the
//! layer views land bit for bit on the receiver and serve its adds; a blob
//! of another prompt or salt is refused with nothing changed; an aborted
//! import gives every block back.

mod common;

use kvcache::{Cache, SequenceOptions, Status};

const BLOCKS: usize = 6;

/// Adds sequence `id`, writes a pattern into every full block, commits.
fn prefill(cache: &Cache, id: u64, tokens: &[i32]) {
    cache
        .add_sequence(id, tokens, &SequenceOptions::default())
        .unwrap();
    let view = cache.layer_view(0).unwrap();
    let bytes = cache.group(0).unwrap().block_bytes as usize;
    for (b, &blk) in cache.block_ids(id, 0).unwrap().iter().enumerate() {
        // SAFETY: a CPU cache's block lies in host memory the cache owns.
        let block = unsafe {
            std::slice::from_raw_parts_mut(
                (view.base as *mut u8).add(blk as usize * view.block_stride as usize),
                bytes,
            )
        };
        for (i, byte) in block.iter_mut().enumerate() {
            *byte = (b * 31 + i * 7) as u8;
        }
    }
    cache.commit(id, tokens.len() as u64).unwrap();
}

fn block(cache: &Cache, id: i32) -> &mut [u8] {
    let view = cache.layer_view(0).unwrap();
    let bytes = cache.group(0).unwrap().block_bytes as usize;
    // SAFETY: a CPU cache's block lies in host memory the cache owns; the
    // tests never hold two slices of one block.
    unsafe {
        std::slice::from_raw_parts_mut(
            (view.base as *mut u8).add(id as usize * view.block_stride as usize),
            bytes,
        )
    }
}

#[test]
fn blocks_move_bit_for_bit_and_serve_the_receivers_adds() {
    let a = common::cache(256);
    let b = common::cache(256);
    let tokens = common::tokens(100, BLOCKS * common::TPB as usize + 1);
    prefill(&a, 1, &tokens);
    let export = a.export_sequence(1, 0).unwrap();
    let desc = export.describe().unwrap();
    assert_eq!(desc.num_blocks, BLOCKS as u64);
    assert_eq!(desc.num_tokens, (BLOCKS as u64) * common::TPB as u64);
    assert_eq!(desc.first_block, 0);
    let keys = export.keys().unwrap();
    assert_eq!(keys.len() as u64, desc.keys_bytes);
    assert_eq!(&keys[..8], b"KVCXFERK");
    let src = export.block_ids(0).unwrap();
    assert_eq!(src.len(), BLOCKS);

    let mut import = b
        .import_begin(7, &tokens, &SequenceOptions::default(), &keys)
        .unwrap();
    let d = import.describe().unwrap();
    assert_eq!(
        (d.seq_id, d.first_block, d.num_blocks),
        (7, 0, BLOCKS as u64)
    );
    let dst = import.block_ids(0).unwrap();
    for (i, &to) in dst.iter().enumerate() {
        block(&b, to).copy_from_slice(block(&a, src[i]));
    }
    let err = import.complete(1).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("expects 6"), "{}", err.message);
    import.complete(dst.len() as u64).unwrap();
    assert_eq!(import.complete(6).unwrap_err().status, Status::InvalidState);
    drop(import);
    drop(export);
    b.remove(7).unwrap();

    let cached = b
        .add_sequence(8, &tokens, &SequenceOptions::default())
        .unwrap();
    assert_eq!(cached, (BLOCKS as u64) * common::TPB as u64);
    for (i, &blk) in b.block_ids(8, 0).unwrap()[..BLOCKS].iter().enumerate() {
        assert_eq!(block(&b, blk), block(&a, src[i]), "block {i}");
    }
}

#[test]
fn another_prompt_or_salt_is_refused_and_an_abort_gives_everything_back() {
    let a = common::cache(256);
    let b = common::cache(256);
    let tokens = common::tokens(5, BLOCKS * common::TPB as usize);
    prefill(&a, 1, &tokens);
    let keys = a.export_sequence(1, 0).unwrap().keys().unwrap();
    let before = b.stats().unwrap();

    let mut other = tokens.clone();
    other[9] += 1;
    let err = b
        .import_begin(7, &other, &SequenceOptions::default(), &keys)
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("block 2 differs"), "{}", err.message);
    let salted = SequenceOptions::default().salt(b"tenant");
    let err = b.import_begin(7, &tokens, &salted, &keys).unwrap_err();
    assert!(
        err.message.contains("another cache salt"),
        "{}",
        err.message
    );
    let err = b
        .import_begin(
            7,
            &tokens,
            &SequenceOptions::default(),
            &keys[..keys.len() - 1],
        )
        .unwrap_err();
    assert!(err.message.contains("truncated"), "{}", err.message);
    assert_eq!(b.stats().unwrap(), before);

    let mut import = b
        .import_begin(7, &tokens, &SequenceOptions::default(), &keys)
        .unwrap();
    assert_eq!(b.stats().unwrap().num_sequences, 1);
    import.abort().unwrap();
    assert_eq!(import.abort().unwrap_err().status, Status::InvalidState);
    assert_eq!(b.stats().unwrap(), before);
}

/// Sharing pool memory with another process is the CUDA backend's
/// (tests/gpu/test_ipc_transfer_gpu.cpp): the CPU backend refuses both
/// calls with the reason; bad indices are named.
#[test]
fn cpu_backend_refuses_to_share_pool_memory() {
    let a = common::cache(256);
    let e = a.describe_pool_share(0, 0).unwrap_err();
    assert_eq!(e.status, Status::Unsupported);
    assert!(
        e.message
            .contains("the cpu device cannot share pool memory with another process"),
        "{}",
        e.message
    );
    let e = a.export_pool_chunk(0, 0, 0).unwrap_err();
    assert_eq!(e.status, Status::Unsupported);
    let e = a.describe_pool_share(1, 0).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(
        e.message.contains("rank must be < num_ranks (1), got 1"),
        "{}",
        e.message
    );
    let e = a.export_pool_chunk(0, 7, 0).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(
        e.message.contains("pool must be < num_pools (1), got 7"),
        "{}",
        e.message
    );
}

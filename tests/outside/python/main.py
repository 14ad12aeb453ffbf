# main.py
"""The user program of tests/outside in Python (see program.c, the
reference whose output this must print byte for byte)."""
import kvcache

with kvcache.Cache(num_layers=32, kv_heads=8, head_dim=128, dtype="bf16", tokens_per_block=16,
                   device="cpu", max_tokens=4096) as cache:
    d = cache.describe()
    print(f"cache: {d.num_layers} layers in {d.num_groups} group, {d.tokens_per_block} tokens "
          f"per block, {d.num_blocks} blocks, {d.primary_bytes} bytes")

    first = [1000 + i for i in range(1000)]
    second = first[:512] + [5000 + i for i in range(512, 1000)]
    print(f"request 1: 1000 prompt tokens, {cache.add_sequence(1, first)} cached")
    cache.commit(1, 1000)
    print(f"request 2: 1000 prompt tokens, {cache.add_sequence(2, second)} cached")
    cache.commit(2, 1000)

    ids = [1, 2]
    slots = list(cache.slot_mapping(ids).slots)
    print(f"prompt slots: {len(slots)}, {slots.count(-1)} of them cached")
    decode_slots = 0
    for step in range(10):
        cache.batch_extend(ids, [7000 + step, 8000 + step])
        decode_slots += len(cache.slot_mapping(ids).slots)
    lengths = list(cache.sequence_lengths(ids))
    print(f"decode: 10 steps of 2 sequences, {decode_slots} slots, "
          f"lengths {lengths[0]} {lengths[1]}")

    s = cache.stats()
    print(f"stats: {s.reused_blocks} reused blocks, {s.missed_blocks} missed blocks, "
          f"{s.in_use_blocks} in use, {s.num_sequences} sequences")

    try:
        cache.extend_sequence(99, [1])
        raise AssertionError("extending sequence 99 succeeded")
    except kvcache.KvCacheError as e:
        if e.status != kvcache.Status.NOT_FOUND:
            raise
        print(f"error: status {int(e.status)}: {e.message}")

    cache.remove_sequence(1)
    cache.remove_sequence(2)
    s = cache.stats()
    print(f"removed: {s.num_sequences} sequences, {s.cached_blocks} cached blocks")
print("closed")

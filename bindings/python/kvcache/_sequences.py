"""Sequences on a cache (sequence.h): add with options, extend, commit,
rewind, fork, remove, pin, describe, block ids, probe."""
import collections
import ctypes

from ._buffers import host_input, host_output, stream_handle
from ._capi import lib, struct
from ._types import DEFAULT_PRIORITY, Status
from .errors import KvCacheError
from .records import read_record

__all__ = ["SequenceCalls", "SequenceOptions", "ExtraKey", "RetentionRange"]

_OPTIONS = struct("kvc_sequence_options_t")
_EXTRA_KEY = struct("kvc_extra_key_t")
_RANGE = struct("kvc_retention_range_t")
_SEQUENCE = read_record("sequence")
_TOKENS = ("i4",)

ExtraKey = collections.namedtuple("ExtraKey", "offset length data")
ExtraKey.__doc__ = ("An extra key (kvc_extra_key_t): bytes `data` (e.g. an image hash) "
                    "covering tokens [offset, offset + length).")
RetentionRange = collections.namedtuple("RetentionRange", "start end priority duration_ms")
RetentionRange.__new__.__defaults__ = (0,)
RetentionRange.__doc__ = ("A retention range (kvc_retention_range_t): prompt tokens [start, "
                          "end) at `priority` for `duration_ms` (0: for ever); end may be "
                          "RETENTION_OPEN_END.")


def _bytes_buffer(data):
    if isinstance(data, str):
        data = data.encode()
    data = bytes(data)
    return ctypes.create_string_buffer(data, len(data)), len(data)


class SequenceOptions:
    """Options of add_sequence() and probe() (kvc_sequence_options_t),
    built once and reusable: the scope (salt, lora_id, extra_keys; only
    sequences of equal scopes share blocks; salt None differs from b"")
    and the retention (priorities, ranges, decode duration)."""

    def __init__(self, salt=None, lora_id=None, extra_keys=(), retention_ranges=(),
                 prompt_priority=DEFAULT_PRIORITY, decode_priority=DEFAULT_PRIORITY,
                 decode_duration_ms=0):
        s = _OPTIONS()
        lib.kvc_sequence_options_init(ctypes.byref(s))
        s.prompt_priority = prompt_priority
        s.decode_priority = decode_priority
        s.decode_duration_ms = decode_duration_ms
        s.has_lora = lora_id is not None
        s.lora_id = lora_id if lora_id is not None else 0
        self._keep = []
        if salt is not None:
            buf, n = _bytes_buffer(salt)
            self._keep.append(buf)
            s.salt = ctypes.addressof(buf)
            s.salt_size = n
        keys = [k if isinstance(k, ExtraKey) else ExtraKey(*k) for k in extra_keys]
        if keys:
            arr = (_EXTRA_KEY * len(keys))()
            for i, k in enumerate(keys):
                buf, n = _bytes_buffer(k.data)
                self._keep.append(buf)
                arr[i].offset = k.offset
                arr[i].length = k.length
                arr[i].data = ctypes.addressof(buf) if n else None
                arr[i].size = n
            self._keep.append(arr)
            s.extra_keys = ctypes.addressof(arr)
            s.num_extra_keys = len(keys)
        ranges = [r if isinstance(r, RetentionRange) else RetentionRange(*r)
                  for r in retention_ranges]
        if ranges:
            arr = (_RANGE * len(ranges))()
            for i, r in enumerate(ranges):
                arr[i].start = r.start
                arr[i].end = r.end
                arr[i].priority = r.priority
                arr[i].duration_ms = r.duration_ms
            self._keep.append(arr)
            s.retention_ranges = ctypes.addressof(arr)
            s.num_retention_ranges = len(ranges)
        # The struct points into these buffers: it keeps them alive, and
        # _ref keeps the struct alive, so a temporary SequenceOptions (option
        # keywords) cannot free them during the call.
        s._keep = self._keep
        self._struct = s
        self._ref = ctypes.byref(s)


def _options(options, kwargs):
    if kwargs:
        if options is not None:
            raise TypeError("pass a SequenceOptions or option keywords, not both")
        return SequenceOptions(**kwargs)._ref
    return None if options is None else options._ref


class SequenceCalls:
    """The sequence calls of Cache (a mixin; see Cache)."""

    def add_sequence(self, id, tokens, options=None, *, stream=None, **option_kwargs):
        """Adds sequence `id` with its prompt `tokens` (int32 buffer or list)
        and returns how many prompt tokens were already cached (the caller
        computes the rest). Options: a SequenceOptions, or its keywords
        (salt=..., lora_id=..., retention_ranges=...). Raises
        KvCacheError(OUT_OF_BLOCKS) when the blocks do not fit: then
        nothing changed (kvc_sequence_add)."""
        op = "kvc_sequence_add"
        ptr, n, keep = host_input(tokens, _TOKENS, "tokens", op)
        cached = ctypes.c_uint64()
        self._call(op, lib.kvc_sequence_add, id, ptr, n, _options(options, option_kwargs),
                   stream_handle(stream, op), ctypes.byref(cached))
        return cached.value

    def probe(self, tokens, options=None, **option_kwargs):
        """Prompt tokens add_sequence() would find cached, with no side
        effect (kvc_cache_probe). It looks at the primary and host tiers
        only: an add on a cache with a disk or remote tier may find more
        (the blocks it loads from them)."""
        op = "kvc_cache_probe"
        ptr, n, keep = host_input(tokens, _TOKENS, "tokens", op)
        cached = ctypes.c_uint64()
        self._call(op, lib.kvc_cache_probe, ptr, n, _options(options, option_kwargs),
                   ctypes.byref(cached))
        return cached.value

    def extend_sequence(self, id, tokens, *, stream=None):
        """Appends tokens to sequence `id` (kvc_sequence_extend)."""
        op = "kvc_sequence_extend"
        ptr, n, keep = host_input(tokens, _TOKENS, "tokens", op)
        self._call(op, lib.kvc_sequence_extend, id, ptr, n, stream_handle(stream, op))

    def commit(self, id, num_computed):
        """Declares the KV of the first num_computed tokens written; their
        full blocks become reusable (kvc_sequence_commit)."""
        self._call("kvc_sequence_commit", lib.kvc_sequence_commit, id, num_computed)

    def rewind(self, id, num_tokens):
        """Drops the last num_tokens tokens (kvc_sequence_rewind)."""
        self._call("kvc_sequence_rewind", lib.kvc_sequence_rewind, id, num_tokens)

    def fork(self, parent, child):
        """Creates `child` sharing every block of `parent` (kvc_sequence_fork)."""
        self._call("kvc_sequence_fork", lib.kvc_sequence_fork, parent, child)

    def remove_sequence(self, id):
        """Removes sequence `id`; its committed blocks stay cached
        (kvc_sequence_remove)."""
        self._call("kvc_sequence_remove", lib.kvc_sequence_remove, id)

    def pin(self, id):
        """Pins the published blocks of `id` (kvc_sequence_pin)."""
        self._call("kvc_sequence_pin", lib.kvc_sequence_pin, id)

    def unpin(self, id):
        """Releases the pin of `id` (kvc_sequence_unpin)."""
        self._call("kvc_sequence_unpin", lib.kvc_sequence_unpin, id)

    def describe_sequence(self, id):
        """SequenceDescription of `id` (kvc_sequence_describe)."""
        s = _SEQUENCE.new()
        self._call("kvc_sequence_describe", lib.kvc_sequence_describe, id, ctypes.byref(s))
        return _SEQUENCE.read(s)

    def block_ids(self, id, group=0, out=None):
        """Block ids of `id` in layer group `group` (-1: released out of the
        window). Into `out` (a writable int32 buffer; returns the count),
        else as a list (kvc_sequence_block_ids)."""
        op = "kvc_sequence_block_ids"
        count = ctypes.c_size_t()
        if out is not None:
            ptr, cap, _ = host_output(out, "i4", "out", op)
            self._call(op, lib.kvc_sequence_block_ids, id, group, ptr, cap, ctypes.byref(count))
            return count.value
        status, message = self._status(op, lib.kvc_sequence_block_ids, id, group, None, 0,
                                       ctypes.byref(count))
        if status not in (0, Status.BUFFER_TOO_SMALL):
            raise KvCacheError(status, message, op)
        arr = (ctypes.c_int32 * count.value)()
        self._call(op, lib.kvc_sequence_block_ids, id, group, arr, count.value, ctypes.byref(count))
        return list(arr)

    def blocks_needed(self, id, num_tokens):
        """Blocks per layer group that num_tokens more tokens of `id` need
        (kvc_sequence_blocks_needed)."""
        out = ctypes.c_uint64()
        self._call("kvc_sequence_blocks_needed", lib.kvc_sequence_blocks_needed, id, num_tokens,
                   ctypes.byref(out))
        return out.value


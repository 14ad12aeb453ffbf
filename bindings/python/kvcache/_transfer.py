"""Moving blocks between caches for disaggregated prefill/decode
(transfer.h): Cache.export_sequence() holds a sequence's committed blocks
and gives their ids and the key blob; Cache.import_begin() verifies a
peer's blob against the receiver's own prompt and names the blocks to
write; Import.complete() publishes them. The caller moves the bytes
(addresses from Cache.layer_view())."""
import ctypes

from ._buffers import host_input
from ._capi import lib
from ._handle import NativeHandle
from ._sequences import _options
from ._types import Status
from .errors import KvCacheError
from .records import read_record

__all__ = ["Export", "Import", "TransferCalls"]

_DESC = read_record("transfer")
_SHARE = read_record("pool_share")
_CHUNK = read_record("share_chunk")
_TOKENS = ("i4",)


def _ids(handle, op, fn, group):
    """Block ids through a capacity-in/count-out call (fn of a handle)."""
    count = ctypes.c_size_t()
    status, message = handle._status(op, fn, group, None, 0, ctypes.byref(count))
    if status not in (0, Status.BUFFER_TOO_SMALL):
        raise KvCacheError(status, message, op)
    arr = (ctypes.c_int32 * count.value)()
    handle._call(op, fn, group, arr, count.value, ctypes.byref(count))
    return list(arr[:count.value])


class Export(NativeHandle):
    """Blocks held for a transfer (kvc_export_t; Cache.export_sequence()):
    eviction, reset_reuse() and the sequence's removal cannot take them
    until close() releases them (kvc_export_release). Send keys() to the
    receiver and copy the bytes of block_ids(). Close it before its cache;
    a cache closed first has released it, and close() then only frees it."""

    _NAME = "Export"
    _DESTROY = lib.kvc_export_release

    def __init__(self, handle, cache):
        self._init_handle()
        self._handle = handle
        self._cache = cache  # kept alive while the export is

    def describe(self):
        """TransferDescription of the export (kvc_export_describe)."""
        s = _DESC.new()
        self._call("kvc_export_describe", lib.kvc_export_describe, ctypes.byref(s))
        return _DESC.read(s)

    def block_ids(self, group=0):
        """The exported block ids of layer group `group`, position 0 first
        (kvc_export_block_ids)."""
        return _ids(self, "kvc_export_block_ids", lib.kvc_export_block_ids, group)

    def keys(self):
        """The key blob to send to the receiver, as bytes (kvc_export_keys;
        the format is documented in transfer.h)."""
        op = "kvc_export_keys"
        size = ctypes.c_size_t()
        status, message = self._status(op, lib.kvc_export_keys, None, 0, ctypes.byref(size))
        if status not in (0, Status.BUFFER_TOO_SMALL):
            raise KvCacheError(status, message, op)
        buf = ctypes.create_string_buffer(size.value)
        self._call(op, lib.kvc_export_keys, buf, size.value, ctypes.byref(size))
        return buf.raw[:size.value]


class Import(NativeHandle):
    """Blocks reserved for a transfer into a cache (kvc_import_t;
    Cache.import_begin()): write the bytes of block_ids(), then complete()
    publishes them or abort() gives them back. close() frees it, aborting
    it if still open (kvc_import_destroy). Close it before its cache."""

    _NAME = "Import"
    _DESTROY = lib.kvc_import_destroy

    def __init__(self, handle, cache):
        self._init_handle()
        self._handle = handle
        self._cache = cache

    def describe(self):
        """TransferDescription of the import: write positions first_block to
        num_blocks - 1 (kvc_import_describe)."""
        s = _DESC.new()
        self._call("kvc_import_describe", lib.kvc_import_describe, ctypes.byref(s))
        return _DESC.read(s)

    def block_ids(self, group=0):
        """The block ids to write in layer group `group`: entry i is position
        first_block + i; -1 where nothing is to be written
        (kvc_import_block_ids)."""
        return _ids(self, "kvc_import_block_ids", lib.kvc_import_block_ids, group)

    def complete(self, blocks_written):
        """The blocks are written: publishes them (kvc_import_complete).
        blocks_written must be num_blocks - first_block; another count is
        refused (KvCacheError(INVALID_ARGUMENT)) and the import stays open."""
        self._call("kvc_import_complete", lib.kvc_import_complete, blocks_written)

    def abort(self):
        """Gives every block back, removing the import's sequence
        (kvc_import_abort)."""
        self._call("kvc_import_abort", lib.kvc_import_abort)


class TransferCalls:
    """The transfer calls of Cache (a mixin; see Cache)."""

    def export_sequence(self, id, num_tokens=0):
        """Holds the committed full blocks of sequence `id` for a transfer
        and returns an Export (kvc_cache_export_sequence): num_tokens 0 for
        every committed full block, else a block-aligned count no larger
        than that."""
        out = ctypes.c_void_p()
        self._call("kvc_cache_export_sequence", lib.kvc_cache_export_sequence, id, num_tokens,
                   ctypes.byref(out))
        return Export(out.value, self)

    def describe_pool_share(self, rank=0, pool=0):
        """PoolShare: the memory backing pool `pool` of rank `rank`, for
        another process to map (kvc_cache_describe_pool_share; CUDA IPC,
        transfer.h). The CPU backend, and memory the driver would not
        create shareable, raise KvCacheError(UNSUPPORTED) saying why."""
        s = _SHARE.new()
        self._call("kvc_cache_describe_pool_share", lib.kvc_cache_describe_pool_share, rank, pool,
                   ctypes.byref(s))
        return _SHARE.read(s)

    def export_pool_chunk(self, chunk, rank=0, pool=0):
        """ShareChunk: chunk `chunk` (< PoolShare.num_chunks) of pool `pool`
        of rank `rank`, exported (kvc_cache_export_pool_chunk). Its fd is a
        new POSIX file descriptor the caller owns: send it (SCM_RIGHTS,
        socket.send_fds) and os.close() it."""
        s = _CHUNK.new()
        self._call("kvc_cache_export_pool_chunk", lib.kvc_cache_export_pool_chunk, rank, pool,
                   chunk, ctypes.byref(s))
        return _CHUNK.read(s)

    def import_begin(self, id, tokens, keys, options=None, **option_kwargs):
        """Verifies a peer's key blob (bytes) against this cache and the
        receiver's own `tokens` and options, then adds sequence `id` with
        them, reserving blocks for the positions this cache lacks; returns
        an Import (kvc_cache_import_begin). A blob of another prompt, salt,
        geometry or format raises KvCacheError(INVALID_ARGUMENT) naming the
        first block that differs, with nothing changed."""
        op = "kvc_cache_import_begin"
        ptr, n, keep = host_input(tokens, _TOKENS, "tokens", op)
        blob = bytes(keys)
        out = ctypes.c_void_p()
        self._call(op, lib.kvc_cache_import_begin, id, ptr, n, _options(options, option_kwargs),
                   blob, len(blob), ctypes.byref(out))
        return Import(out.value, self)

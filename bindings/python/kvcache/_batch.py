"""One scheduling step over a batch (batch.h): the decode step's extend and
the tables attention kernels take, written into caller buffers.

Every table call takes its outputs as writable, C-contiguous host buffers
(NumPy arrays, array.array, bytearray views) and writes nothing when it
fails. Without `out` the binding asks the library for the size first and
allocates NumPy arrays (NumPy is imported then, not before); a serving
loop passes its own buffers, allocated once.
"""
import ctypes

from ._buffers import host_input, host_output, stream_handle
from ._capi import lib
from ._types import Status
from .errors import KvCacheError, invalid
from .records import CsrTable, SlotMapping

__all__ = ["BatchCalls", "DecodeStep"]

_IDS = ("u8", "i8")
_TOKENS = ("i4",)


def _numpy(op):
    try:
        import numpy
    except ImportError:
        raise KvCacheError(Status.UNSUPPORTED, "allocating the result needs NumPy; pass the "
                           "output buffers instead", op) from None
    return numpy


class BatchCalls:
    """The batch calls of Cache (a mixin; see Cache)."""

    def decode_step(self, ids, max_blocks, *, group=0, pad=-1):
        """A DecodeStep over sequences `ids`: buffers allocated and resolved
        once, for a serving loop's per-step bookkeeping (block tables of
        up to `max_blocks` blocks of layer group `group`)."""
        return DecodeStep(self, ids, max_blocks, group, pad)

    def batch_extend(self, ids, tokens, *, stream=None):
        """One decode step: appends tokens[i] to sequence ids[i], all or
        nothing (kvc_batch_extend). ids: uint64 or int64 buffer or list;
        tokens: int32 buffer or list of the same length."""
        op = "kvc_batch_extend"
        iptr, n, ik = host_input(ids, _IDS, "ids", op)
        tptr, m, tk = host_input(tokens, _TOKENS, "tokens", op)
        if n != m:
            raise invalid(op, "ids has %d entries but tokens has %d" % (n, m))
        self._call(op, lib.kvc_batch_extend, iptr, tptr, n, stream_handle(stream, op))

    def block_table(self, ids, out=None, *, group=0, pad=-1):
        """Padded block tables of layer group `group`: row i holds the block
        ids of ids[i], then `pad` (kvc_batch_block_table). Into `out`, a
        writable int32 buffer of shape [>= len(ids), max_blocks] (or 1-D
        with len(ids) * max_blocks entries, max_blocks = its length /
        len(ids)); returns out. Without out: a NumPy array
        [len(ids), longest row]."""
        op = "kvc_batch_block_table"
        iptr, n, ik = host_input(ids, _IDS, "ids", op)
        need = ctypes.c_size_t()
        if out is None:
            status, message = self._status(op, lib.kvc_batch_block_table, group, iptr, n, None, 0,
                                           pad, ctypes.byref(need))
            if status not in (0, Status.BUFFER_TOO_SMALL):
                raise KvCacheError(status, message, op)
            out = _numpy(op).empty((n, need.value), dtype="int32")
        optr, cap, mv = host_output(out, "i4", "out", op)
        if mv.ndim == 2:
            if mv.shape[0] < n:
                raise invalid(op, "out has %d rows for %d sequences" % (mv.shape[0], n))
            max_blocks = mv.shape[1]
        else:
            max_blocks = cap // n if n else 0
        self._call(op, lib.kvc_batch_block_table, group, iptr, n, optr, max_blocks, pad,
                   ctypes.byref(need))
        return out

    def block_table_csr(self, ids, *, group=0, indptr=None, indices=None, last_page_len=None):
        """Block tables in CSR form (kvc_batch_block_table_csr): indptr
        (len(ids) + 1), indices, last_page_len (len(ids)), int32 writable
        buffers; those not given are allocated (NumPy). Returns a CsrTable
        whose num_indices entries of indices are filled."""
        op = "kvc_batch_block_table_csr"
        iptr, n, ik = host_input(ids, _IDS, "ids", op)
        num = ctypes.c_size_t()
        if indptr is None or last_page_len is None or indices is None:
            np = _numpy(op)
            indptr = np.empty(n + 1, dtype="int32") if indptr is None else indptr
            last_page_len = np.empty(n, dtype="int32") if last_page_len is None else last_page_len
        pptr, pcap, _ = host_output(indptr, "i4", "indptr", op)
        lptr, lcap, _ = host_output(last_page_len, "i4", "last_page_len", op)
        if pcap < n + 1:
            raise invalid(op, "indptr has %d entries; %d sequences need %d" % (pcap, n, n + 1))
        if lcap < n:
            raise invalid(op, "last_page_len has %d entries for %d sequences" % (lcap, n))
        if indices is None:
            status, message = self._status(op, lib.kvc_batch_block_table_csr, group, iptr, n,
                                           pptr, None, 0, lptr, ctypes.byref(num))
            if status not in (0, Status.BUFFER_TOO_SMALL):
                raise KvCacheError(status, message, op)
            indices = _numpy(op).empty(num.value, dtype="int32")
        xptr, xcap, _ = host_output(indices, "i4", "indices", op)
        self._call(op, lib.kvc_batch_block_table_csr, group, iptr, n, pptr, xptr, xcap, lptr,
                   ctypes.byref(num))
        return CsrTable(indptr, indices, last_page_len, num.value)

    def sequence_lengths(self, ids, out=None):
        """Lengths of the sequences as int32, into `out` (>= len(ids)
        entries) or a new NumPy array (kvc_batch_sequence_lengths)."""
        op = "kvc_batch_sequence_lengths"
        iptr, n, ik = host_input(ids, _IDS, "ids", op)
        if out is None:
            out = _numpy(op).empty(n, dtype="int32")
        optr, cap, _ = host_output(out, "i4", "out", op)
        if cap < n:
            raise invalid(op, "out has %d entries for %d sequences" % (cap, n))
        self._call(op, lib.kvc_batch_sequence_lengths, iptr, n, optr)
        return out

    def slot_mapping(self, ids, out=None, *, group=0, new_tokens=None):
        """Slots of the tokens added to each sequence since the last call
        for `group` (-1 for tokens cached at add), in sequence order, and
        advances the cursors (kvc_batch_slot_mapping). Into `out` (int64;
        too small: KvCacheError(BUFFER_TOO_SMALL), nothing advances) or a
        new NumPy array of the exact size. new_tokens: an int32 buffer of
        len(ids) for the count per sequence, or True to allocate one.
        Returns SlotMapping(slots, num_slots, new_tokens)."""
        op = "kvc_batch_slot_mapping"
        iptr, n, ik = host_input(ids, _IDS, "ids", op)
        num = ctypes.c_size_t()
        if new_tokens is True:
            new_tokens = _numpy(op).empty(n, dtype="int32")
        nptr = None
        if new_tokens is not None:
            nptr, ncap, _ = host_output(new_tokens, "i4", "new_tokens", op)
            if ncap < n:
                raise invalid(op, "new_tokens has %d entries for %d sequences" % (ncap, n))
        if out is None:
            status, message = self._status(op, lib.kvc_batch_slot_mapping, group, iptr, n, None,
                                           0, ctypes.byref(num), None)
            if status == 0:  # nothing new: the cursors are where they were
                empty = _numpy(op).empty(0, dtype="int64")
                if new_tokens is not None:
                    self._call(op, lib.kvc_batch_slot_mapping, group, iptr, n, None, 0,
                               ctypes.byref(num), nptr)
                return SlotMapping(empty, 0, new_tokens)
            if status != Status.BUFFER_TOO_SMALL:
                raise KvCacheError(status, message, op)
            out = _numpy(op).empty(num.value, dtype="int64")
        optr, cap, _ = host_output(out, "i8", "out", op)
        self._call(op, lib.kvc_batch_slot_mapping, group, iptr, n, optr, cap, ctypes.byref(num), nptr)
        return SlotMapping(out, num.value, new_tokens)


class DecodeStep:
    """The bookkeeping of a decode step over a fixed batch, with its buffers
    and their addresses resolved once (Cache.decode_step()): run() makes the
    four batch calls into them, so a serving loop pays the ctypes calls and
    little else. After run(): slots (int64, one new slot per sequence),
    table (int32 [batch, max_blocks], padded with `pad`) and lengths (int32)
    hold the step's tables. Write the step's tokens into `tokens` (or pass
    them to run()). Make a new DecodeStep when the batch changes."""

    def __init__(self, cache, ids, max_blocks, group=0, pad=-1):
        np = _numpy("kvcache.Cache.decode_step")
        self.cache = cache
        self.ids = np.array(ids, dtype=np.uint64)
        n = len(self.ids)
        self.tokens = np.zeros(n, dtype=np.int32)
        self.slots = np.empty(n, dtype=np.int64)
        self.table = np.full((n, max_blocks), pad, dtype=np.int32)
        self.lengths = np.empty(n, dtype=np.int32)
        self.group, self.pad, self.max_blocks, self.count = group, pad, max_blocks, n
        self._tokens_per_block = cache.description.tokens_per_block
        self._num, self._need = ctypes.c_size_t(), ctypes.c_size_t()
        self._num_ref, self._need_ref = ctypes.byref(self._num), ctypes.byref(self._need)
        self._addr = [a.ctypes.data if a.size else None
                      for a in (self.ids, self.tokens, self.slots, self.table, self.lengths)]

    def run(self, tokens=None, stream=None):
        """kvc_batch_extend with `tokens` (or the `tokens` buffer), then
        kvc_batch_slot_mapping, kvc_batch_block_table and
        kvc_batch_sequence_lengths into this step's buffers. The calls are
        made in that order; one that fails (KvCacheError) leaves the ones
        before it done (a table too small: the tokens were appended).
        Size max_blocks for the longest sequence the batch will reach."""
        if tokens is not None:
            self.tokens[:] = tokens
        ids, toks, slots, table, lengths = self._addr
        n, call = self.count, self.cache._call
        call("kvc_batch_extend", lib.kvc_batch_extend, ids, toks, n,
             stream_handle(stream, "kvc_batch_extend"))
        call("kvc_batch_slot_mapping", lib.kvc_batch_slot_mapping, self.group, ids, n, slots, n,
             self._num_ref, None)
        call("kvc_batch_block_table", lib.kvc_batch_block_table, self.group, ids, n, table,
             self.max_blocks, self.pad, self._need_ref)
        call("kvc_batch_sequence_lengths", lib.kvc_batch_sequence_lengths, ids, n, lengths)

    def commit_full_blocks(self):
        """Commits the sequences whose last block the step filled (their
        lengths a multiple of tokens_per_block): publishing blocks as they
        fill, a commit per sequence every tokens_per_block steps."""
        full = (self.lengths % self._tokens_per_block == 0).nonzero()[0]
        commit, call = lib.kvc_sequence_commit, self.cache._call
        for i in full.tolist():
            call("kvc_sequence_commit", commit, int(self.ids[i]), int(self.lengths[i]))

"""StatefulCache: the stateful contiguous mode (kvc_stateful_t, OpenVINO's
stateful KV cache; include/kvcache/stateful.h): per layer one K/V buffer
for a fixed batch of rows, in-place append with staggered growth, beam
search through a beam table (no K/V moved), indirect decode attention,
compaction, trim, reset, and row export/import.

Tensors are host memory on a CPU cache (NumPy arrays, any buffer) and
device memory on a CUDA cache (torch/CuPy tensors through data_ptr(),
__cuda_array_interface__ or __dlpack__, or int addresses), as for Cache.
Small host arrays (row_tokens, beam_idx) are host memory on both.
"""
import ctypes

from ._buffers import host_input, host_output, stream_handle, tensor, _address
from ._capi import lib, struct
from ._handle import NativeHandle
from ._kernels import _dtype, _itemsize
from ._types import (ALL_ROWS, DTYPE_SIZE, DeviceKind, DType, Layout, Status, device_of,
                     dtype_of, growth_policy_of, layout_of)
from .config import Config
from .errors import KvCacheError, check, invalid
from .records import read_record

__all__ = ["StatefulCache"]

_OPTIONS = struct("kvc_stateful_options_t")
_APPEND_ARGS = struct("kvc_stateful_append_args_t")
_DECODE_ARGS = struct("kvc_stateful_decode_args_t")
_VIEW, _STATS, _LAYER_STATS = (read_record(k) for k in
                               ("stateful_view", "stateful_stats", "stateful_layer_stats"))
_message = lib.kvc_last_error_message

# NumPy element types of layer_arrays(): bf16 and fp8 as their bits.
_NUMPY_TYPES = {DType.F32: "float32", DType.F16: "float16", DType.BF16: "uint16",
                DType.FP8_E4M3: "uint8"}


def _raw_or(convert, value):
    """None -> 0 (the library's default); an int goes to the library as it
    is (it checks the range and names the value); anything else is
    converted ('hnd', 'uniform')."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return convert(value)


class StatefulCache(NativeHandle):
    """A stateful contiguous KV cache: StatefulCache(config, batch=4, ...)
    or StatefulCache(batch=4, num_layers=..., kv_heads=..., head_dim=...,
    dtype=..., device=...) (a Config is made from those settings and
    freed; of it only the model spec and the device are read).

    Options (keywords; 0 or None takes the library's default):
    batch (rows: beams or requests, 1..1024, required), layout ('hnd', the
    default as OpenVINO's, or 'nhd': the layout of the rows' buffers, not
    Config.layout), growth_step (tokens a growth adds, 128),
    growth_policy ('staggered', the default, or 'uniform'), max_length
    (longest row, 2**30), initial_length (tokens per row allocated at
    creation).

    A context manager; close() is idempotent and waits for calls other
    threads have in flight; later calls raise KvCacheError(INVALID_STATE).
    Every failing call raises KvCacheError(status, message, op) with the
    library's message and changes nothing (lengths, table, buffers,
    statistics). Work enqueued on a CUDA stream must be finished before
    close().
    """
    _NAME = "StatefulCache"
    _DESTROY = lib.kvc_stateful_destroy

    def __init__(self, config=None, *, batch, layout=None, growth_step=0, growth_policy=None,
                 max_length=0, initial_length=0, **settings):
        self._init_handle()
        o = _OPTIONS()
        lib.kvc_stateful_options_init(ctypes.byref(o))
        o.batch = batch
        o.layout = _raw_or(layout_of, layout)
        o.growth_step = growth_step
        o.growth_policy = _raw_or(growth_policy_of, growth_policy)
        o.max_length = max_length
        o.initial_length = initial_length
        if config is None:
            with Config(**settings) as cfg:
                self._create(cfg, o)
        else:
            if settings:
                raise TypeError("pass a Config or settings, not both")
            self._create(config, o)
        self.batch = o.batch
        views = [self.view(i) for i in range(self.num_layers)]
        # Layer shapes for the binding's own argument checks.
        self.kv_heads = [v.kv_heads for v in views]
        self.head_dim = views[0].head_dim
        self.dtype = views[0].dtype
        self.layout = views[0].layout

    def _create(self, config, options):
        op = "kvc_stateful_create"
        kind, ordinal = device_of(config.device)
        self.device = ("cpu", 0) if kind == DeviceKind.CPU else ("cuda", ordinal)
        self.num_layers = config.num_layers
        self.kv_factor = config.kv_factor
        out = ctypes.c_void_p()
        check(lib.kvc_stateful_create(config._use(op), ctypes.byref(options), ctypes.byref(out)),
              op)
        self._handle = out.value

    def _heads(self, layer):
        """The layer's kv heads for the binding's checks; None when out of
        range (the C call then says so)."""
        return self.kv_heads[layer] if 0 <= layer < self.num_layers else None

    # -- views and lengths -----------------------------------------------------
    def view(self, layer):
        """StatefulView of layer `layer` (kvc_stateful_layer_view): its
        addresses, byte strides, capacity, lengths and beam table."""
        s = _VIEW.new()
        self._call("kvc_stateful_layer_view", lib.kvc_stateful_layer_view, layer, ctypes.byref(s))
        return _VIEW.read(s)

    def lengths(self, layer=0, out=None):
        """The rows' lengths in layer `layer` (kvc_stateful_get_lengths): a
        list of ints, or written into `out` (a writable uint32 buffer of at
        least batch entries), which is returned."""
        op = "kvc_stateful_get_lengths"
        if out is None:
            arr = (ctypes.c_uint32 * self.batch)()
            self._call(op, lib.kvc_stateful_get_lengths, layer, arr, self.batch)
            return list(arr)
        ptr, cap, _ = host_output(out, "u4", "out", op)
        self._call(op, lib.kvc_stateful_get_lengths, layer, ptr, cap)
        return out

    def layer_arrays(self, layer):
        """(K, V) of layer `layer` of a CPU cache as NumPy arrays over the
        cache's own memory, [batch, kv_heads, capacity, head_dim] (HND) or
        [batch, capacity, kv_heads, head_dim] (NHD), float32 / float16, or
        the bits of bf16 (uint16) and fp8 (uint8); V is K when kv_factor
        is 1. Positions past a row's length, and with a beam table the
        positions a row reads from other rows, hold whatever is there.
        Valid until the next append, import_row, compact or reset (those
        may move the layer): read them, do not keep them. For tests and
        debugging; a CUDA cache's layers are device memory (use view())."""
        op = "kvcache.StatefulCache.layer_arrays"
        if self.device != ("cpu", 0):
            raise KvCacheError(Status.UNSUPPORTED, "the layers are device memory on cuda:%d; "
                               "read them through view()" % self.device[1], op)
        import numpy
        v = self.view(layer)
        es = DTYPE_SIZE[v.dtype]
        if v.layout == Layout.HND:
            shape = (v.batch, v.kv_heads, v.capacity, v.head_dim)
            strides = (v.row_stride, v.head_stride, v.token_stride)
        else:
            shape = (v.batch, v.capacity, v.kv_heads, v.head_dim)
            strides = (v.row_stride, v.token_stride, v.head_stride)
        dense = (shape[1] * shape[2] * shape[3] * es, shape[2] * shape[3] * es, shape[3] * es)
        dtype = numpy.dtype(_NUMPY_TYPES[v.dtype])
        n = shape[0] * dense[0]
        if n == 0:
            empty = numpy.zeros(shape, dtype)
            return empty, empty
        if strides != dense:
            raise KvCacheError(Status.INTERNAL, "layer %d has byte strides %s, not the dense %s "
                               "of its shape %s" % (layer, strides, dense, shape), op)

        def array(address):
            return numpy.frombuffer((ctypes.c_char * n).from_address(address), dtype).reshape(shape)

        k = array(v.key)
        return k, (k if v.value == v.key else array(v.value))

    # -- append ----------------------------------------------------------------
    def append(self, layer, key, value=None, *, row_tokens=None, src_dtype=None, k_scale=1.0,
               v_scale=1.0, stream=None, num_tokens=None):
        """Appends the K/V of new tokens of one layer at each row's length,
        in place, growing the layer first when a row would pass its
        capacity (kvc_stateful_append).

        key, value: contiguous [batch, tokens, kv_heads, head_dim] (NHD) or
        [batch, kv_heads, tokens, head_dim] (HND), the cache's layout;
        value None when kv_factor is 1. row_tokens: uint32 (or int32)
        buffer or list of batch entries: row r appends its first
        row_tokens[r] tokens (all when None). src_dtype defaults to the
        tensors' dtype (give it for bf16 or fp8 bits in uint16 / uint8
        arrays); an fp8 cache also takes f32/f16/bf16, stored as x /
        k_scale and x / v_scale. For int addresses give num_tokens and
        src_dtype."""
        op = "kvc_stateful_append"
        dev = self.device
        k = tensor(key, "key", op, dev)
        v = tensor(value, "value", op, dev) if value is not None else None
        if k.shape is None:
            if num_tokens is None or src_dtype is None:
                raise invalid(op, "key is an int address: give num_tokens and src_dtype")
            dtype = dtype_of(src_dtype, "src_dtype")
            n = num_tokens
        else:
            dtype = _dtype(k, src_dtype, "key", "src_dtype", op)
            n = self._kv_tokens(k, "key", layer, op)
            if v is not None and v.shape is not None:
                if v.shape != k.shape:
                    raise invalid(op, "value has shape %s but key has shape %s"
                                  % (v.shape, k.shape))
                _dtype(v, dtype, "value", "the key's dtype", op)
                if not v.contiguous():
                    raise invalid(op, "value must be contiguous, got strides %s" % (v.strides,))
            if num_tokens is not None and num_tokens != n:
                raise invalid(op, "num_tokens is %d but key holds %d tokens per row"
                              % (num_tokens, n))
        rptr, rows, _keep = host_input(row_tokens, ("u4", "i4"), "row_tokens", op)
        if row_tokens is not None and rows != self.batch:
            raise invalid(op, "row_tokens has %d entries, the cache has batch %d"
                          % (rows, self.batch))
        a = _APPEND_ARGS()
        lib.kvc_stateful_append_args_init(ctypes.byref(a))
        a.layer = layer
        a.num_tokens = n
        a.src_dtype = dtype
        a.key = k.ptr
        a.value = v.ptr if v is not None else None
        a.row_tokens = rptr
        a.k_scale = k_scale
        a.v_scale = v_scale
        self._call(op, lib.kvc_stateful_append, ctypes.byref(a), stream_handle(stream, op))

    def _kv_tokens(self, t, name, layer, op):
        """Tokens per row of a K or V tensor, its shape checked against the
        batch, the layout and the layer."""
        nhd = self.layout == Layout.NHD
        form = "[batch, tokens, kv_heads, head_dim]" if nhd else "[batch, kv_heads, tokens, head_dim]"
        if len(t.shape) != 4:
            raise invalid(op, "%s must be %s (the cache is %s), got shape %s"
                          % (name, form, self.layout.name, t.shape))
        batch, n, heads, dim = (t.shape if nhd else
                                (t.shape[0], t.shape[2], t.shape[1], t.shape[3]))
        want = self._heads(layer)
        if batch != self.batch or dim != self.head_dim or (want is not None and heads != want):
            raise invalid(op, "%s has shape %s: %s is expected with batch %d, kv_heads %s and "
                          "head_dim %d" % (name, t.shape, form, self.batch,
                                           want if want is not None else "?", self.head_dim))
        if not t.contiguous():
            raise invalid(op, "%s must be contiguous, got strides %s" % (name, t.strides))
        return n

    # -- beam search -------------------------------------------------------------
    def reorder(self, beam_idx, *, stream=None):
        """Row b continues the history of row beam_idx[b] (OpenVINO's
        beam_idx); only beam table entries change, no K/V moves
        (kvc_stateful_reorder). beam_idx: int32 buffer or list of batch
        entries in [0, batch). Call it between steps (every layer of the
        same length)."""
        op = "kvc_stateful_reorder"
        ptr, n, _keep = host_input(beam_idx, ("i4",), "beam_idx", op)
        self._call(op, lib.kvc_stateful_reorder, ptr, n, stream_handle(stream, op))

    def compact(self, *, stream=None):
        """Gathers every layer's K/V by the beam table so that each row's
        buffer holds its own history, and drops the table
        (kvc_stateful_compact). Without a table it does nothing."""
        op = "kvc_stateful_compact"
        self._call(op, lib.kvc_stateful_compact, stream_handle(stream, op))

    # -- trim, reset, export, import -----------------------------------------------
    def trim(self, row, num_tokens, *, stream=None):
        """Drops the last num_tokens tokens of row `row` (None or ALL_ROWS:
        every row) in every layer; capacity is kept (kvc_stateful_trim)."""
        op = "kvc_stateful_trim"
        self._call(op, lib.kvc_stateful_trim, ALL_ROWS if row is None else row, num_tokens,
                   stream_handle(stream, op))

    def reset(self, release_memory=False, *, stream=None):
        """Empties every row of every layer and drops the beam table; with
        release_memory the buffers are freed too (kvc_stateful_reset)."""
        op = "kvc_stateful_reset"
        self._call(op, lib.kvc_stateful_reset, bool(release_memory), stream_handle(stream, op))

    def export_row(self, row, out=None, *, stream=None):
        """Row `row`'s state (every layer's K/V of its length, read through
        the beam table) as host bytes that only import_row() of a cache of
        the same geometry reads (kvc_stateful_export_row). Without `out`
        returns a bytearray; with `out` (a writable buffer) writes into it
        and returns the bytes written (BUFFER_TOO_SMALL names the size
        needed). Waits for the copy."""
        op = "kvc_stateful_export_row"
        handle = stream_handle(stream, op)
        size = ctypes.c_uint64()
        if out is not None:
            mv = _writable_bytes(out, "out", op)
            self._call(op, lib.kvc_stateful_export_row, row, _address(mv), mv.nbytes,
                       ctypes.byref(size), handle)
            return size.value
        status, message = self._status(op, lib.kvc_stateful_export_row, row, None, 0,
                                       ctypes.byref(size), handle)
        if status not in (0, Status.BUFFER_TOO_SMALL):
            raise KvCacheError(status, message, op)
        buf = bytearray(size.value)
        if size.value:
            self._call(op, lib.kvc_stateful_export_row, row, _address(memoryview(buf)),
                       size.value, ctypes.byref(size), handle)
        return buf

    def import_row(self, row, state, *, stream=None):
        """Restores a state from export_row() into row `row`, replacing its
        history in every layer (kvc_stateful_import_row). state: bytes,
        bytearray or any C-contiguous buffer."""
        op = "kvc_stateful_import_row"
        try:
            mv = memoryview(state)
        except TypeError:
            raise invalid(op, "state must be a buffer (bytes, bytearray, a NumPy array), got %s"
                          % type(state).__name__) from None
        if not mv.c_contiguous:
            raise invalid(op, "state must be C-contiguous")
        self._call(op, lib.kvc_stateful_import_row, row, _address(mv), mv.nbytes,
                   stream_handle(stream, op))

    # -- indirect decode attention ---------------------------------------------------
    def _default_q_dtype(self):
        return DType.BF16 if self.dtype == DType.FP8_E4M3 else self.dtype

    def _decode_args(self, layer, q_heads, q_dtype, max_seq_len):
        a = _DECODE_ARGS()
        lib.kvc_stateful_decode_args_init(ctypes.byref(a))
        a.layer = layer
        a.q_heads = q_heads
        a.q_dtype = q_dtype
        a.max_seq_len = max_seq_len
        return a

    def decode_workspace_size(self, layer, q_heads, *, q_dtype=None, max_seq_len=0):
        """Workspace bytes decode() needs for this layer, query heads and
        dtype, planned for rows up to max_seq_len (0: the longest row
        now); 0 on a CPU cache (kvc_stateful_decode_workspace_size)."""
        op = "kvc_stateful_decode_workspace_size"
        q_dtype = self._default_q_dtype() if q_dtype is None else dtype_of(q_dtype, "q_dtype")
        a = self._decode_args(layer, q_heads, q_dtype, max_seq_len)
        out = ctypes.c_uint64()
        self._call(op, lib.kvc_stateful_decode_workspace_size, ctypes.byref(a),
                   ctypes.byref(out))
        return out.value

    def decode(self, layer, query, out, *, softmax_scale=0.0, k_scale=1.0, v_scale=1.0,
               max_seq_len=0, workspace=None, workspace_bytes=None, q_dtype=None,
               q_heads=None, stream=None):
        """Decode attention of one layer for every row, one query token per
        row, K/V read through the beam table (kvc_stateful_decode).

        query, out: contiguous [batch, q_heads, head_dim] of one dtype (the
        cache's; f16 or bf16 on an fp8 cache); softmax_scale 0 is
        1/sqrt(head_dim); workspace: at least decode_workspace_size()
        bytes (CUDA). For int addresses give q_heads and q_dtype (and
        workspace_bytes)."""
        op = "kvc_stateful_decode"
        dev = self.device
        q = tensor(query, "query", op, dev)
        o = tensor(out, "out", op, dev)
        ws = tensor(workspace, "workspace", op, dev) if workspace is not None else None
        if q.shape is not None:
            if len(q.shape) != 3 or q.shape[0] != self.batch or q.shape[2] != self.head_dim:
                raise invalid(op, "query must be [batch, q_heads, head_dim] with batch %d and "
                              "head_dim %d, got shape %s" % (self.batch, self.head_dim, q.shape))
            if not q.contiguous():
                raise invalid(op, "query must be contiguous, got strides %s" % (q.strides,))
            q_dtype = _dtype(q, q_dtype, "query", "q_dtype", op)
            if q_heads is not None and q_heads != q.shape[1]:
                raise invalid(op, "q_heads is %d but query has %d heads" % (q_heads, q.shape[1]))
            q_heads = q.shape[1]
        elif q_heads is None or q_dtype is None:
            raise invalid(op, "query is an int address: give q_heads and q_dtype")
        else:
            q_dtype = dtype_of(q_dtype, "q_dtype")
        if o.shape is not None:
            if q.shape is not None and o.shape != q.shape:
                raise invalid(op, "out has shape %s but query has shape %s" % (o.shape, q.shape))
            if not o.contiguous():
                raise invalid(op, "out must be contiguous, got strides %s" % (o.strides,))
            _dtype(o, q_dtype, "out", "the query's dtype", op)
        if ws is not None and workspace_bytes is None:
            if ws.shape is None:
                raise invalid(op, "workspace is an int address: give workspace_bytes")
            workspace_bytes = ws.numel() * _itemsize(ws.fmt)
        a = self._decode_args(layer, q_heads, q_dtype, max_seq_len)
        a.query = q.ptr
        a.out = o.ptr
        a.softmax_scale = softmax_scale
        a.k_scale = k_scale
        a.v_scale = v_scale
        a.workspace = ws.ptr if ws is not None else None
        a.workspace_bytes = workspace_bytes or 0
        self._call(op, lib.kvc_stateful_decode, ctypes.byref(a), stream_handle(stream, op))

    def async_error(self, stream=None):
        """Waits for the work on `stream` and returns the first error this
        cache's enqueued work recorded, as a KvCacheError (op
        "kvc_stateful_get_async_error (enqueued work)"), or None. Raises
        when the check itself fails (kvc_stateful_get_async_error)."""
        op = "kvc_stateful_get_async_error"
        found = ctypes.c_int32(0)
        self._call(op, lib.kvc_stateful_get_async_error, stream_handle(stream, op),
                   ctypes.byref(found))
        if found.value != 0:
            return KvCacheError(found.value, _message().decode("utf-8", "replace"),
                                op + " (enqueued work)")
        return None

    # -- statistics ----------------------------------------------------------------
    def stats(self):
        """StatefulStats (kvc_stateful_get_stats)."""
        s = _STATS.new()
        self._call("kvc_stateful_get_stats", lib.kvc_stateful_get_stats, ctypes.byref(s))
        return _STATS.read(s)

    def layer_stats(self, layer):
        """StatefulLayerStats of layer `layer` (kvc_stateful_get_layer_stats)."""
        s = _LAYER_STATS.new()
        self._call("kvc_stateful_get_layer_stats", lib.kvc_stateful_get_layer_stats, layer,
                   ctypes.byref(s))
        return _LAYER_STATS.read(s)

    def __repr__(self):
        if self._handle is None:
            return "StatefulCache(<closed>)"
        where = "cpu" if self.device[0] == "cpu" else "cuda:%d" % self.device[1]
        return ("StatefulCache(%s, %s, %s, batch %d, %d layers, head_dim %d)"
                % (where, self.dtype.name.lower(), self.layout.name.lower(), self.batch,
                   self.num_layers, self.head_dim))


def _writable_bytes(obj, name, op):
    """A writable, C-contiguous buffer as a memoryview of bytes."""
    try:
        mv = memoryview(obj)
    except TypeError:
        raise invalid(op, "%s must be a writable buffer (bytearray, a NumPy array), got %s"
                      % (name, type(obj).__name__)) from None
    if mv.readonly:
        raise invalid(op, "%s is read-only; it receives the output" % name)
    if not mv.c_contiguous:
        raise invalid(op, "%s must be C-contiguous" % name)
    return mv

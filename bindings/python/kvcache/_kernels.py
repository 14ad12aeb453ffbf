"""Kernels on a cache's memory (kernels.h): store K/V (contiguous or
strided), block copies, paged decode attention.

Tensors are host memory on a CPU cache (NumPy arrays, any buffer) and
device memory on a CUDA cache (torch/CuPy tensors through data_ptr(),
__cuda_array_interface__ or __dlpack__, or int addresses). The binding
checks what the objects tell it (device, dtype, shape, contiguity) before
the C call and raises KvCacheError(INVALID_ARGUMENT) naming the argument;
int addresses are passed as they are, with the sizes given as keywords.
"""
import collections
import ctypes

from ._buffers import host_input, stream_handle, tensor, _fmt_name
from ._capi import lib, struct
from ._types import DTYPE_SIZE, DType, TableFormat, dtype_of
from .errors import invalid

__all__ = ["KernelCalls", "StoreStrides"]

_STORE_ARGS = struct("kvc_store_args_t")
_STRIDES = struct("kvc_store_strides_t")
_DECODE_ARGS = struct("kvc_decode_args_t")

_DTYPE_OF_FMT = {"f4": DType.F32, "f2": DType.F16, "bf16": DType.BF16, "fp8": DType.FP8_E4M3}

StoreStrides = collections.namedtuple("StoreStrides", "seq_len key value")
StoreStrides.__doc__ = ("kvc_store_strides_t for int addresses: seq_len (0 = one sequence) "
                        "and the (seq, token, head) element strides of key and value.")


def _itemsize(fmt):
    if fmt == "bf16":
        return 2
    if fmt == "fp8":
        return 1
    return int(fmt.lstrip("abcdefghijklmnopqrstuvwxyz"))


def _dtype(t, given, name, what, op):
    """The DType of tensor t: its own, checked against `given`; or `given`
    when t's elements are raw integers of the right size or unknown."""
    own = _DTYPE_OF_FMT.get(t.fmt)
    if given is not None:
        given = dtype_of(given, what)
        if own is not None and own != given:
            raise invalid(op, "%s has dtype %s but %s is %s"
                          % (name, _fmt_name(t.fmt), what, given.name.lower()))
        if own is None and t.fmt is not None and _itemsize(t.fmt) != DTYPE_SIZE[given]:
            raise invalid(op, "%s has %s elements (%d bytes) but %s %s has %d"
                          % (name, _fmt_name(t.fmt), _itemsize(t.fmt), what,
                             given.name.lower(), DTYPE_SIZE[given]))
        return given
    if own is None:
        if t.fmt is None:
            raise invalid(op, "%s is an int address: give %s" % (name, what))
        raise invalid(op, "%s has dtype %s; kvcache takes float32, float16, bfloat16 or "
                      "float8_e4m3fn (or 1- and 2-byte integers with %s)"
                      % (name, _fmt_name(t.fmt), what))
    return own


def _int_array(t, fmt, name, op, length=None, ndim=1):
    """Checks an index tensor: element type, contiguity, rank and length."""
    if t.fmt is None:
        return
    if t.fmt != fmt:
        raise invalid(op, "%s must hold %s, got %s" % (name, _fmt_name(fmt), _fmt_name(t.fmt)))
    if len(t.shape) != ndim:
        raise invalid(op, "%s must be %d-D, got shape %s" % (name, ndim, t.shape))
    if not t.contiguous():
        raise invalid(op, "%s must be contiguous, got strides %s" % (name, t.strides))
    if length is not None and t.shape[0] != length:
        raise invalid(op, "%s has %d entries; %d expected" % (name, t.shape[0], length))


def _source_strides(t, name, lv, op):
    """(batch, seq_len, (seq, token, head) strides) of a K or V tensor:
    [tokens, kv_heads, head_dim] or [batch, kv_heads, tokens, head_dim]."""
    shape, st = t.shape, t.strides
    if len(shape) == 3:
        batch, n, heads, dim = 1, shape[0], shape[1], shape[2]
        strides = (0, st[0], st[1])
    elif len(shape) == 4:
        batch, heads, n, dim = shape
        strides = (st[0], st[2], st[1])
    else:
        raise invalid(op, "%s must be [tokens, kv_heads, head_dim] or [batch, kv_heads, tokens, "
                      "head_dim], got shape %s" % (name, shape))
    if lv is not None and (heads != lv.kv_heads or dim != lv.head_dim):
        raise invalid(op, "%s has shape %s: layer kv_heads is %d and head_dim %d"
                      % (name, shape, lv.kv_heads, lv.head_dim))
    if st[-1] != 1 and dim > 1:
        raise invalid(op, "%s must be contiguous in its last dimension (head_dim), got strides %s"
                      % (name, st))
    return batch, n, strides


class KernelCalls:
    """The kernel calls of Cache (a mixin; see Cache)."""

    def _layer(self, layer):
        """The layer's view for the binding's checks; None when out of
        range (the C call then says so)."""
        return self._layers[layer] if 0 <= layer < len(self._layers) else None

    def store_kv(self, layer, key, value, slot_mapping, *, src_dtype=None, k_scale=1.0,
                 v_scale=1.0, stream=None, num_tokens=None, strides=None, rank=0):
        """Writes the K (and V; None when kv_factor is 1) of the tokens of
        one layer into their slots (slot -1 skips a token).

        key/value: [tokens, kv_heads, head_dim] or a model's
        [batch, kv_heads, tokens, head_dim] (token i of the call is token
        i % tokens of sequence i // tokens), any strides with a contiguous
        last dimension: contiguous input goes to kvc_store_kv, anything
        else to kvc_store_kv_strided, without a copy. slot_mapping: int64,
        one per token. src_dtype defaults to the tensors' dtype (give it for
        NumPy uint16 bf16 data). For int addresses give num_tokens (and
        strides=StoreStrides(...) for a strided source). rank: the
        tensor-parallel rank whose pool is written (Config.set_ranks); key
        and value hold that rank's heads."""
        op = "kvc_store_kv"
        dev = self.device
        lv = self._layer(layer)
        k = tensor(key, "key", op, dev)
        v = tensor(value, "value", op, dev) if value is not None else None
        s = tensor(slot_mapping, "slot_mapping", op, dev)
        if k.shape is None:
            if num_tokens is None:
                raise invalid(op, "key is an int address: give num_tokens")
            if src_dtype is None:
                raise invalid(op, "key is an int address: give src_dtype")
            dtype = dtype_of(src_dtype, "src_dtype")
            n = num_tokens
            seq_len = kstr = vstr = None
            if strides is not None:
                seq_len, kstr, vstr = strides.seq_len, tuple(strides.key), tuple(strides.value or (0, 0, 0))
        else:
            dtype = _dtype(k, src_dtype, "key", "src_dtype", op)
            batch, seq_len, kstr = _source_strides(k, "key", lv, op)
            n = batch * seq_len
            vstr = (0, 0, 0)
            if v is not None and v.shape is not None:
                if v.shape != k.shape:
                    raise invalid(op, "value has shape %s but key has shape %s" % (v.shape, k.shape))
                _dtype(v, dtype, "value", "the key's dtype", op)
                vstr = _source_strides(v, "value", lv, op)[2]
            if num_tokens is not None and num_tokens != n:
                raise invalid(op, "num_tokens is %d but key holds %d tokens" % (num_tokens, n))
            if lv is not None:
                hd = lv.kv_heads * lv.head_dim
                contig = [x[1] == hd and x[2] == lv.head_dim and (batch == 1 or x[0] == seq_len * hd)
                          for x in ((kstr, vstr) if v is not None else (kstr,))]
                if all(contig):
                    seq_len = None  # the contiguous kernel entry
        _int_array(s, "i8", "slot_mapping", op, n)
        a = _STORE_ARGS()
        lib.kvc_store_args_init(ctypes.byref(a))
        a.layer = layer
        a.rank = rank
        a.num_tokens = n
        a.src_dtype = dtype
        a.key = k.ptr
        a.value = v.ptr if v is not None else None
        a.slot_mapping = s.ptr
        a.k_scale = k_scale
        a.v_scale = v_scale
        handle = stream_handle(stream, op)
        if seq_len is None:
            self._call(op, lib.kvc_store_kv, ctypes.byref(a), handle)
            return
        st = _STRIDES()
        lib.kvc_store_strides_init(ctypes.byref(st))
        st.seq_len = seq_len
        st.key_seq_stride, st.key_token_stride, st.key_head_stride = kstr
        st.value_seq_stride, st.value_token_stride, st.value_head_stride = vstr
        self._call("kvc_store_kv_strided", lib.kvc_store_kv_strided, ctypes.byref(a),
                   ctypes.byref(st), handle)

    def copy_blocks(self, src, dst, num_tokens=None, *, group=0, stream=None):
        """Copies block src[i] to dst[i] in layer group `group`'s pool,
        every layer at once; only the first num_tokens[i] rows when given
        (kvc_copy_blocks). src, dst: int32 host buffers or lists;
        num_tokens: uint32."""
        op = "kvc_copy_blocks"
        sptr, n, sk = host_input(src, ("i4",), "src", op)
        dptr, m, dk = host_input(dst, ("i4",), "dst", op)
        tptr, t, tk = host_input(num_tokens, ("u4",), "num_tokens", op)
        if n != m or (num_tokens is not None and t != n):
            raise invalid(op, "src, dst and num_tokens differ in length (%d, %d, %s)"
                          % (n, m, t if num_tokens is not None else "-"))
        self._call(op, lib.kvc_copy_blocks, group, sptr, dptr, tptr, n, stream_handle(stream, op))

    def _decode_args(self, op, layer, batch, q_heads, q_dtype, csr, table_stride, max_seq_len):
        a = _DECODE_ARGS()
        lib.kvc_decode_args_init(ctypes.byref(a))
        a.layer = layer
        a.batch = batch
        a.q_heads = q_heads
        a.q_dtype = q_dtype
        a.table_format = TableFormat.CSR if csr else TableFormat.PADDED
        a.table_stride = table_stride
        a.max_seq_len = max_seq_len
        return a

    def decode_workspace_size(self, layer, batch, q_heads, max_seq_len, *, q_dtype=None,
                              csr=False, table_stride=None, rank=0):
        """Bytes of workspace decode_attention() needs for this shape (0 on
        a CPU cache); size one workspace for the largest batch and longest
        sequence (kvc_decode_workspace_size)."""
        op = "kvc_decode_workspace_size"
        q_dtype = self._default_q_dtype() if q_dtype is None else dtype_of(q_dtype, "q_dtype")
        if table_stride is None:
            T = self.description.tokens_per_block
            table_stride = 0 if csr else -(-max_seq_len // T)
        a = self._decode_args(op, layer, batch, q_heads, q_dtype, csr, table_stride, max_seq_len)
        a.rank = rank
        out = ctypes.c_uint64()
        self._call(op, lib.kvc_decode_workspace_size, ctypes.byref(a), ctypes.byref(out))
        return out.value

    def _default_q_dtype(self):
        d = self.description.dtype
        return DType.BF16 if d == DType.FP8_E4M3 else d

    def decode_attention(self, layer, query, out, seq_lens, block_table, *, max_seq_len,
                         indptr=None, window=0, softmax_scale=0.0, k_scale=1.0, v_scale=1.0,
                         workspace=None, workspace_bytes=None, q_dtype=None, stream=None,
                         batch=None, q_heads=None, table_stride=None, rank=0):
        """Paged decode attention of one layer: one query token per sequence
        against its cached K/V (kvc_decode_attention).

        query, out: [batch, q_heads, head_dim], contiguous, one dtype;
        seq_lens: int32 [batch]; block_table: int32 [batch, table_stride]
        (padded), or the CSR indices with indptr int32 [batch + 1];
        max_seq_len bounds every length; window 0 is the layer's;
        softmax_scale 0 is 1/sqrt(head_dim); workspace: a tensor of at
        least decode_workspace_size() bytes (CUDA). For int addresses give
        batch, q_heads, q_dtype (and table_stride, workspace_bytes)."""
        op = "kvc_decode_attention"
        dev = self.device
        lv = self._layer(layer)
        q = tensor(query, "query", op, dev)
        o = tensor(out, "out", op, dev)
        lens = tensor(seq_lens, "seq_lens", op, dev)
        table = tensor(block_table, "block_table", op, dev)
        ptrs = tensor(indptr, "indptr", op, dev) if indptr is not None else None
        ws = tensor(workspace, "workspace", op, dev) if workspace is not None else None
        if q.shape is not None:
            if len(q.shape) != 3:
                raise invalid(op, "query must be [batch, q_heads, head_dim], got shape %s" % (q.shape,))
            if lv is not None and q.shape[2] != lv.head_dim:
                raise invalid(op, "query has head_dim %d; layer %d has head_dim %d"
                              % (q.shape[2], layer, lv.head_dim))
            if not q.contiguous():
                raise invalid(op, "query must be contiguous, got strides %s" % (q.strides,))
            q_dtype = _dtype(q, q_dtype, "query", "q_dtype", op)
            batch, q_heads = q.shape[0], q.shape[1]
        elif batch is None or q_heads is None or q_dtype is None:
            raise invalid(op, "query is an int address: give batch, q_heads and q_dtype")
        else:
            q_dtype = dtype_of(q_dtype, "q_dtype")
        if o.shape is not None:
            if q.shape is not None and o.shape != q.shape:
                raise invalid(op, "out has shape %s but query has shape %s" % (o.shape, q.shape))
            if not o.contiguous():
                raise invalid(op, "out must be contiguous, got strides %s" % (o.strides,))
            _dtype(o, q_dtype, "out", "the query's dtype", op)
        _int_array(lens, "i4", "seq_lens", op, batch)
        if ptrs is not None:
            _int_array(ptrs, "i4", "indptr", op, batch + 1)
            _int_array(table, "i4", "block_table", op)
            table_stride = 0
        elif table.shape is not None:
            _int_array(table, "i4", "block_table", op, batch, ndim=len(table.shape))
            if len(table.shape) == 2:
                table_stride = table.shape[1] if table_stride is None else table_stride
            elif table_stride is None:
                raise invalid(op, "block_table is 1-D: give table_stride (or pass [batch, "
                              "table_stride])")
        elif table_stride is None:
            raise invalid(op, "block_table is an int address: give table_stride")
        if ws is not None and workspace_bytes is None:
            if ws.shape is None:
                raise invalid(op, "workspace is an int address: give workspace_bytes")
            workspace_bytes = ws.numel() * _itemsize(ws.fmt)
        a = self._decode_args(op, layer, batch, q_heads, q_dtype, ptrs is not None, table_stride,
                              max_seq_len)
        a.rank = rank  # tensor parallelism: the rank whose pool is read
        a.query = q.ptr
        a.out = o.ptr
        a.seq_lens = lens.ptr
        a.block_table = table.ptr
        a.indptr = ptrs.ptr if ptrs is not None else None
        a.window = window
        a.softmax_scale = softmax_scale
        a.k_scale = k_scale
        a.v_scale = v_scale
        a.workspace = ws.ptr if ws is not None else None
        a.workspace_bytes = workspace_bytes or 0
        self._call(op, lib.kvc_decode_attention, ctypes.byref(a), stream_handle(stream, op))

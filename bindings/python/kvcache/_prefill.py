"""Paged prefill attention (kernels.h, kvc_prefill_attention): a ragged
batch of new query tokens, causal among themselves, against each
sequence's cached K/V through a block table.

qo_indptr and kv_lens are small host arrays on every device (int32
buffers or lists), as FlashInfer's plan() reads them; query, out, lse,
the block table (and its CSR indptr) and the workspace are host memory on
a CPU cache and device memory on a CUDA cache, resolved and checked as
for decode_attention().
"""
import ctypes

from ._buffers import host_input, stream_handle, tensor, _fmt_name
from ._capi import lib, struct
from ._kernels import _dtype, _int_array, _itemsize
from ._types import TableFormat, dtype_of
from .errors import invalid

__all__ = ["PrefillCalls"]

_PREFILL_ARGS = struct("kvc_prefill_args_t")


class PrefillCalls:
    """The prefill attention calls of Cache (a mixin; see Cache)."""

    def _prefill_args(self, layer, batch, total_q, q_heads, q_dtype, csr, table_stride,
                      max_kv_len):
        a = _PREFILL_ARGS()
        lib.kvc_prefill_args_init(ctypes.byref(a))
        a.layer = layer
        a.batch = batch
        a.total_q = total_q
        a.q_heads = q_heads
        a.q_dtype = q_dtype
        a.table_format = TableFormat.CSR if csr else TableFormat.PADDED
        a.table_stride = table_stride
        a.max_kv_len = max_kv_len
        return a

    def prefill_workspace_size(self, layer, batch, total_q, q_heads, max_kv_len, *,
                               q_dtype=None, csr=False, table_stride=None, rank=0):
        """Bytes of workspace prefill_attention() needs for this shape (0 on
        a CPU cache); it never decreases as batch, total_q or max_kv_len
        grow: size one workspace for the largest step
        (kvc_prefill_workspace_size)."""
        op = "kvc_prefill_workspace_size"
        q_dtype = self._default_q_dtype() if q_dtype is None else dtype_of(q_dtype, "q_dtype")
        if table_stride is None:
            T = self.description.tokens_per_block
            table_stride = 0 if csr else -(-max_kv_len // T)
        a = self._prefill_args(layer, batch, total_q, q_heads, q_dtype, csr, table_stride,
                               max_kv_len)
        a.rank = rank  # tensor parallelism: the rank whose pool is read
        out = ctypes.c_uint64()
        self._call(op, lib.kvc_prefill_workspace_size, ctypes.byref(a), ctypes.byref(out))
        return out.value

    def prefill_attention(self, layer, query, out, qo_indptr, kv_lens, block_table, *,
                          max_kv_len=None, indptr=None, lse=None, window=0, softmax_scale=0.0,
                          logits_soft_cap=0.0, k_scale=1.0, v_scale=1.0, workspace=None,
                          workspace_bytes=None, q_dtype=None, stream=None, q_heads=None,
                          table_stride=None, rank=0):
        """Paged prefill attention of one layer (kvc_prefill_attention).

        Sequence b has q_len = qo_indptr[b + 1] - qo_indptr[b] new query
        rows (rows qo_indptr[b] .. qo_indptr[b + 1] of query and out) and
        kv_lens[b] tokens in the cache, the new ones included (store their
        K/V first); its query i sits at position kv_lens[b] - q_len + i and
        attends causally to every cached token up to it (a reused prefix is
        read where it lies).

        query, out: contiguous [total_q, q_heads, head_dim] of one dtype;
        qo_indptr: host int32 [batch + 1] (a list or buffer); kv_lens: host
        int32 [batch]; block_table: int32 [batch, table_stride] (padded),
        or the CSR indices with indptr int32 [batch + 1]; max_kv_len
        defaults to max(kv_lens); lse: float32 [total_q, q_heads] receiving
        the natural log-sum-exp of each row's scores, or None; window 0 is
        the layer's; softmax_scale 0 is 1/sqrt(head_dim); logits_soft_cap
        > 0 caps the scores (Gemma 2); workspace: at least
        prefill_workspace_size() bytes (CUDA). For int addresses give
        q_heads and q_dtype (and table_stride, workspace_bytes)."""
        op = "kvc_prefill_attention"
        dev = self.device
        lv = self._layer(layer)
        qptr, n_indptr, qo_keep = host_input(qo_indptr, ("i4",), "qo_indptr", op)
        kptr, batch, kv_keep = host_input(kv_lens, ("i4",), "kv_lens", op)
        if n_indptr != batch + 1:
            raise invalid(op, "qo_indptr has %d entries; kv_lens has %d, so %d are expected"
                          % (n_indptr, batch, batch + 1))
        if max_kv_len is None:
            max_kv_len = max(kv_keep) if batch else 0
        q = tensor(query, "query", op, dev)
        o = tensor(out, "out", op, dev)
        table = tensor(block_table, "block_table", op, dev)
        ptrs = tensor(indptr, "indptr", op, dev) if indptr is not None else None
        lse_t = tensor(lse, "lse", op, dev) if lse is not None else None
        ws = tensor(workspace, "workspace", op, dev) if workspace is not None else None
        total_q = qo_keep[batch] if batch else 0
        if q.shape is not None:
            if len(q.shape) != 3:
                raise invalid(op, "query must be [total_q, q_heads, head_dim], got shape %s"
                              % (q.shape,))
            if lv is not None and q.shape[2] != lv.head_dim:
                raise invalid(op, "query has head_dim %d; layer %d has head_dim %d"
                              % (q.shape[2], layer, lv.head_dim))
            if not q.contiguous():
                raise invalid(op, "query must be contiguous, got strides %s" % (q.strides,))
            q_dtype = _dtype(q, q_dtype, "query", "q_dtype", op)
            if q_heads is not None and q_heads != q.shape[1]:
                raise invalid(op, "q_heads is %d but query has %d heads" % (q_heads, q.shape[1]))
            total_q, q_heads = q.shape[0], q.shape[1]
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
        if lse_t is not None and lse_t.shape is not None:
            if lse_t.fmt != "f4":
                raise invalid(op, "lse must hold float32, got %s" % _fmt_name(lse_t.fmt))
            if lse_t.shape != (total_q, q_heads):
                raise invalid(op, "lse must be [total_q, q_heads] = [%d, %d], got shape %s"
                              % (total_q, q_heads, lse_t.shape))
            if not lse_t.contiguous():
                raise invalid(op, "lse must be contiguous, got strides %s" % (lse_t.strides,))
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
        a = self._prefill_args(layer, batch, total_q, q_heads, q_dtype, ptrs is not None,
                               table_stride, max_kv_len)
        a.rank = rank  # tensor parallelism: the rank whose pool is read
        a.query = q.ptr
        a.out = o.ptr
        a.lse = lse_t.ptr if lse_t is not None else None
        a.qo_indptr = qptr
        a.kv_lens = kptr
        a.block_table = table.ptr
        a.indptr = ptrs.ptr if ptrs is not None else None
        a.window = window
        a.softmax_scale = softmax_scale
        a.logits_soft_cap = logits_soft_cap
        a.k_scale = k_scale
        a.v_scale = v_scale
        a.workspace = ws.ptr if ws is not None else None
        a.workspace_bytes = workspace_bytes or 0
        self._call(op, lib.kvc_prefill_attention, ctypes.byref(a), stream_handle(stream, op))

"""Config: the cache configuration (kvc_config_t), typed properties over
its setters and getters."""
import ctypes
import os

from ._capi import lib, struct
from ._types import DeviceKind, DType, Layout, device_of, dtype_of, layout_of
from .errors import KvCacheError, Status, check

__all__ = ["Config"]

_u32, _u64, _i32, _f64, _bool = (ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32,
                                 ctypes.c_double, ctypes.c_bool)


def _setting(setter, getter, ctype, convert=None, out=None, doc=""):
    """A property over a kvc_config_set_x / kvc_config_get_x pair."""
    set_op, get_op = setter.__name__, getter.__name__

    def get(self):
        value = ctype()
        check(getter(self._use(get_op), ctypes.byref(value)), get_op)
        return out(value.value) if out else value.value

    def set_(self, value):
        check(setter(self._use(set_op), convert(value) if convert else value), set_op)

    return property(get, set_, doc=doc)


class Config:
    """A cache configuration, holding the defaults until set: bf16, NHD,
    16 tokens per block, full attention, device cpu, no byte or token
    bound, free_gpu_memory_fraction 0.9, reuse and partial reuse on.

    Config(num_layers=32, kv_heads=8, head_dim=128, device="cuda:0",
           free_gpu_memory_fraction=0.3, max_tokens=200_000)

    Keyword arguments set the properties of the same name; kv_heads also
    takes a per-layer list and attention_windows a list of windows.
    Setters check a value alone and raise KvCacheError without changing
    anything; validate() checks the whole (Cache() does too).

    On CUDA the pool takes the least of primary_bytes, max_tokens and
    free_gpu_memory_fraction (default 0.9!) of the free GPU memory: in a
    process that also runs a model (PyTorch allocates after the cache),
    set free_gpu_memory_fraction or max_tokens.
    """

    def __init__(self, **settings):
        handle = ctypes.c_void_p()
        check(lib.kvc_config_create(ctypes.byref(handle)), "kvc_config_create")
        self._handle = handle.value
        try:
            for key, value in settings.items():
                if not hasattr(type(self), key) or key.startswith("_"):
                    raise TypeError("Config has no setting %r" % key)
                setattr(self, key, value)
        except BaseException:
            self.close()
            raise

    # -- lifetime ----------------------------------------------------------
    def _use(self, op):
        if self._handle is None:
            raise KvCacheError(Status.INVALID_STATE, "use of a closed Config", op)
        return self._handle

    # -- paged KV resources (kv_resource.h) ---------------------------------
    def add_kv_resource(self, layers, kv_heads, head_dim, dtype=DType.BF16, kv_factor=2,
                        layout=Layout.NHD, window=0):
        """Adds a paged KV resource: `layers` (ascending, distinct model layer
        ids) with their own kv heads, head_dim, dtype, kv_factor, layout and
        window (0 = full) (kvc_config_add_kv_resource); returns its index.
        Refused (Status.INVALID_STATE) once a global shape setter was called,
        and those are refused after it."""
        op = "kvc_config_add_kv_resource"
        layers = list(layers)
        c_layers = (ctypes.c_uint32 * max(1, len(layers)))(*layers)
        d = struct("kvc_kv_resource_t")()
        lib.kvc_kv_resource_init(ctypes.byref(d))
        d.layers = ctypes.addressof(c_layers)
        d.num_layers = len(layers)
        d.kv_heads = kv_heads
        d.head_dim = head_dim
        d.dtype = dtype_of(dtype)
        d.kv_factor = kv_factor
        d.layout = layout_of(layout)
        d.window = window
        return self._add(op, lib.kvc_config_add_kv_resource, ctypes.byref(d))

    # -- state resources (state.h) ----------------------------------------
    def _add(self, op, fn, *args):
        index = ctypes.c_uint32()
        check(fn(self._use(op), *args, ctypes.byref(index)), op)
        return index.value

    def add_ssm_state(self, num_heads, head_dim, d_state, dtype):
        """Adds a Mamba SSM state resource, one slot [num_heads][head_dim]
        [d_state] of dtype (kvc_config_add_ssm_state); returns its index."""
        return self._add("kvc_config_add_ssm_state", lib.kvc_config_add_ssm_state, num_heads,
                         head_dim, d_state, dtype_of(dtype))

    def add_conv_state(self, conv_dim, d_conv, dtype):
        """Adds a causal-conv state resource [conv_dim][d_conv]
        (kvc_config_add_conv_state); returns its index."""
        return self._add("kvc_config_add_conv_state", lib.kvc_config_add_conv_state, conv_dim,
                         d_conv, dtype_of(dtype))

    def add_generic_state(self, num_bytes, alignment=0):
        """Adds a generic per-sequence state (kvc_config_add_generic_state;
        alignment 0 = 256); returns its index."""
        return self._add("kvc_config_add_generic_state", lib.kvc_config_add_generic_state,
                         num_bytes, alignment)

    def add_unpaged_resource(self, bytes_per_token, max_tokens):
        """Adds an unpaged per-token resource
        (kvc_config_add_unpaged_resource); returns its index."""
        return self._add("kvc_config_add_unpaged_resource", lib.kvc_config_add_unpaged_resource,
                         bytes_per_token, max_tokens)

    @property
    def num_resources(self):
        """Number of resources added (kvc_config_get_num_resources)."""
        n = ctypes.c_uint32()
        op = "kvc_config_get_num_resources"
        check(lib.kvc_config_get_num_resources(self._use(op), ctypes.byref(n)), op)
        return n.value

    def close(self):
        """Frees the config (kvc_config_destroy); idempotent. A cache made
        from it keeps its own copy."""
        handle, self._handle = self._handle, None
        if handle is not None:
            lib.kvc_config_destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # No finalizer semantics are promised; this only avoids a leak
        # when a Config is dropped without close().
        if getattr(self, "_handle", None) is not None:
            self.close()

    def clone(self):
        """An independent copy (kvc_config_clone)."""
        out = ctypes.c_void_p()
        check(lib.kvc_config_clone(self._use("kvc_config_clone"), ctypes.byref(out)),
              "kvc_config_clone")
        copy = Config.__new__(Config)
        copy._handle = out.value
        return copy

    def validate(self):
        """Checks the config as a whole, as Cache() will (kvc_config_validate)."""
        check(lib.kvc_config_validate(self._use("kvc_config_validate")), "kvc_config_validate")

    # -- model shape -------------------------------------------------------
    num_layers = _setting(
        lib.kvc_config_set_num_layers, lib.kvc_config_get_num_layers,
        _u32, doc="Attention layers (> 0).")
    head_dim = _setting(
        lib.kvc_config_set_head_dim, lib.kvc_config_get_head_dim,
        _u32, doc="Head dimension (> 0).")
    dtype = _setting(
        lib.kvc_config_set_dtype, lib.kvc_config_get_dtype,
        _u32, dtype_of, DType, "Stored element type (DType or 'bf16').")
    kv_factor = _setting(
        lib.kvc_config_set_kv_factor, lib.kvc_config_get_kv_factor,
        _u32, doc="2 (K and V) or 1 (K == V, MLA).")
    layout = _setting(
        lib.kvc_config_set_layout, lib.kvc_config_get_layout,
        _u32, layout_of, Layout, "Block layout: 'nhd' or 'hnd'.")
    tokens_per_block = _setting(
        lib.kvc_config_set_tokens_per_block, lib.kvc_config_get_tokens_per_block,
        _u32, doc="A power of two > 1.")

    @property
    def kv_heads(self):
        """KV heads of layer 0; per layer see kv_heads_of(). Set an int
        (every layer) or a list (one per layer)."""
        return self.kv_heads_of(0)

    @kv_heads.setter
    def kv_heads(self, value):
        if isinstance(value, int):
            check(lib.kvc_config_set_kv_heads(self._use("kvc_config_set_kv_heads"), value),
                  "kvc_config_set_kv_heads")
            return
        arr = (ctypes.c_uint32 * len(value))(*value)
        op = "kvc_config_set_kv_heads_per_layer"
        check(lib.kvc_config_set_kv_heads_per_layer(self._use(op), arr, len(value)), op)

    def kv_heads_of(self, layer):
        out = _u32()
        op = "kvc_config_get_kv_heads"
        check(lib.kvc_config_get_kv_heads(self._use(op), layer, ctypes.byref(out)), op)
        return out.value

    @property
    def attention_windows(self):
        """The window of every layer after repetition (0 = full attention).
        Set a list that repeats over the layers ([] = full everywhere)."""
        return [self.attention_window(i) for i in range(self.num_layers)]

    @attention_windows.setter
    def attention_windows(self, windows):
        windows = list(windows)
        arr = (ctypes.c_uint32 * len(windows))(*windows)
        op = "kvc_config_set_attention_windows"
        check(lib.kvc_config_set_attention_windows(self._use(op), arr, len(windows)), op)

    def attention_window(self, layer):
        out = _u32()
        op = "kvc_config_get_attention_window"
        check(lib.kvc_config_get_attention_window(self._use(op), layer, ctypes.byref(out)), op)
        return out.value

    # -- device and memory -------------------------------------------------
    @property
    def device(self):
        """'cpu' or 'cuda:N'. Set 'cpu', 'cuda', 'cuda:N', a torch.device or
        a (DeviceKind, ordinal) pair."""
        kind, ordinal = _u32(), _i32()
        op = "kvc_config_get_device"
        check(lib.kvc_config_get_device(self._use(op), ctypes.byref(kind), ctypes.byref(ordinal)), op)
        return "cpu" if kind.value == DeviceKind.CPU else "cuda:%d" % ordinal.value

    @device.setter
    def device(self, value):
        kind, ordinal = device_of(value)
        op = "kvc_config_set_device"
        check(lib.kvc_config_set_device(self._use(op), kind, ordinal), op)

    def set_ranks(self, devices, ordinals=None):
        """Tensor parallelism (kvc_config_set_ranks): one cache over several
        ranks, given as a list of devices of one kind (["cuda:0", "cuda:1"];
        on the CPU ["cpu:0", "cpu:1"], whose ordinals only name host pools),
        or as a kind and its ordinals (set_ranks("cpu", [0, 1, 2, 3])). KV
        heads are split across the ranks, or replicated when fewer than the
        ranks; one set of block ids valid on every rank; every byte budget
        is per rank. Setting `device` goes back to one rank."""
        if ordinals is None:
            pairs = [device_of(d) for d in devices]
            kinds = set(k for k, _ in pairs)
            if len(kinds) > 1:
                raise ValueError("ranks must be devices of one kind, got %r" % (devices,))
            kind = pairs[0][0] if pairs else DeviceKind.CPU
            ordinals = [o for _, o in pairs]
        else:
            kind = device_of(devices)[0]
        arr = (ctypes.c_int32 * max(1, len(ordinals)))(*ordinals)
        op = "kvc_config_set_ranks"
        check(lib.kvc_config_set_ranks(self._use(op), kind, arr, len(ordinals)), op)

    @property
    def ranks(self):
        """The ranks' ordinals (one rank: [the device ordinal])
        (kvc_config_get_ranks)."""
        arr = (ctypes.c_int32 * 64)()
        n = _u32()
        op = "kvc_config_get_ranks"
        check(lib.kvc_config_get_ranks(self._use(op), arr, 64, ctypes.byref(n)), op)
        return list(arr[:n.value])

    primary_bytes = _setting(
        lib.kvc_config_set_primary_bytes, lib.kvc_config_get_primary_bytes,
        _u64, doc="Byte bound of the pool (0 = none).")
    max_primary_bytes = _setting(
        lib.kvc_config_set_max_primary_bytes, lib.kvc_config_get_max_primary_bytes,
        _u64, doc="Ceiling of Cache.resize in bytes (0 = the budget at creation); the pools "
                  "reserve that much address space at creation.")
    max_state_slots = _setting(
        lib.kvc_config_set_max_state_slots, lib.kvc_config_get_max_state_slots,
        _u32, doc="State slots (state.h); 0 = planned from the budget.")
    max_state_snapshots = _setting(
        lib.kvc_config_set_max_state_snapshots, lib.kvc_config_get_max_state_snapshots,
        _u32, doc="State snapshot slots (state.h); 0 = planned from the budget, "
                  "STATE_SNAPSHOTS_NONE = none.")
    max_tokens = _setting(
        lib.kvc_config_set_max_tokens, lib.kvc_config_get_max_tokens,
        _u64, doc="Token bound per layer (0 = none).")
    free_gpu_memory_fraction = _setting(
        lib.kvc_config_set_free_gpu_memory_fraction, lib.kvc_config_get_free_gpu_memory_fraction,
        _f64, doc="Share of the free GPU memory the pool may take, in (0, 1]; default 0.9.")
    host_cache_bytes = _setting(
        lib.kvc_config_set_host_cache_bytes, lib.kvc_config_get_host_cache_bytes,
        _u64, doc="Host tier bytes (0 = none).")
    secondary_offload_min_priority = _setting(
        lib.kvc_config_set_secondary_offload_min_priority, lib.kvc_config_get_secondary_offload_min_priority,
        _u32, doc="Offload threshold, 0..100 (35).")

    @property
    def disk_cache(self):
        """The disk tier as (directory, bytes); ("", 0) when off. Set a
        (directory, bytes) pair to turn it on (the directory must exist and be
        writable when the cache is created), None to turn it off. A cache
        created on a directory a previous cache of the same model geometry and
        event hash seed used finds its blocks (kvc_config_set_disk_cache)."""
        op = "kvc_config_get_disk_cache"
        directory, size = ctypes.c_char_p(), ctypes.c_uint64()
        check(lib.kvc_config_get_disk_cache(self._use(op), ctypes.byref(directory),
                                            ctypes.byref(size)), op)
        return (directory.value or b"").decode("utf-8", "surrogateescape"), size.value

    @disk_cache.setter
    def disk_cache(self, value):
        op = "kvc_config_set_disk_cache"
        directory, size = (None, 0) if value is None else value
        if size < 0:
            raise KvCacheError(Status.INVALID_ARGUMENT,
                               f"disk cache bytes must be >= 0, got {size}", op)
        raw = None
        if directory:
            raw = os.fsencode(directory)
            if b"\0" in raw:
                raise KvCacheError(Status.INVALID_ARGUMENT,
                                   "disk cache directory contains a NUL byte", op)
        check(lib.kvc_config_set_disk_cache(self._use(op), raw, _u64(size)), op)

    @property
    def remote_cache(self):
        """The remote tier as (url, key_namespace, bytes); ("", "kvc", 0) when
        off. Set a (url, bytes) or (url, key_namespace, bytes) tuple to turn
        it on (url "redis://[user:password@]host[:port][/db]", parsed now;
        the server is reached when the cache is created), None to turn it off
        (kvc_config_set_remote_cache)."""
        op = "kvc_config_get_remote_cache"
        url, ns, size = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_uint64()
        check(lib.kvc_config_get_remote_cache(self._use(op), ctypes.byref(url), ctypes.byref(ns),
                                              ctypes.byref(size)), op)
        return ((url.value or b"").decode("utf-8"), (ns.value or b"").decode("utf-8"),
                size.value)

    @remote_cache.setter
    def remote_cache(self, value):
        op = "kvc_config_set_remote_cache"
        if value is None:
            url, ns, size = None, None, 0
        elif len(value) == 2:
            (url, size), ns = value, None
        else:
            url, ns, size = value
        if size < 0:
            raise KvCacheError(Status.INVALID_ARGUMENT,
                               f"remote cache bytes must be >= 0, got {size}", op)
        raw = [None if v is None else v.encode("utf-8") for v in (url, ns)]
        if any(r is not None and b"\0" in r for r in raw):
            raise KvCacheError(Status.INVALID_ARGUMENT,
                               "remote cache URL or namespace contains a NUL byte", op)
        check(lib.kvc_config_set_remote_cache(self._use(op), raw[0], raw[1], _u64(size)), op)

    @property
    def remote_cache_timeouts_ms(self):
        """The remote tier's timeouts as (connect_ms, command_ms), each in
        1..600000: connecting, and a whole lookup or write batch ((1000, 1000);
        kvc_config_set_remote_cache_timeouts)."""
        op = "kvc_config_get_remote_cache_timeouts"
        connect, command = _u32(), _u32()
        check(lib.kvc_config_get_remote_cache_timeouts(self._use(op), ctypes.byref(connect),
                                                       ctypes.byref(command)), op)
        return connect.value, command.value

    @remote_cache_timeouts_ms.setter
    def remote_cache_timeouts_ms(self, value):
        op = "kvc_config_set_remote_cache_timeouts"
        connect, command = value
        for name, v in (("connect_ms", connect), ("command_ms", command)):
            if not 0 <= v <= 0xFFFFFFFF:
                raise KvCacheError(Status.INVALID_ARGUMENT,
                                   f"{name} must be in 1..600000 ms, got {v}", op)
        check(lib.kvc_config_set_remote_cache_timeouts(self._use(op), _u32(connect),
                                                       _u32(command)), op)

    remote_cache_optional = _setting(
        lib.kvc_config_set_remote_cache_optional, lib.kvc_config_get_remote_cache_optional,
        _bool, bool, doc="Create the cache while the remote server cannot be reached or "
                         "refuses the credentials; the tier connects later (off).")

    # -- reuse, events, clock ----------------------------------------------
    block_reuse = _setting(
        lib.kvc_config_set_block_reuse, lib.kvc_config_get_block_reuse,
        _bool, bool, doc="Reuse across sequences (on).")
    partial_reuse = _setting(
        lib.kvc_config_set_partial_reuse, lib.kvc_config_get_partial_reuse,
        _bool, bool, doc="Token-wise reuse (on).")
    copy_on_partial_reuse = _setting(
        lib.kvc_config_set_copy_on_partial_reuse, lib.kvc_config_get_copy_on_partial_reuse,
        _bool, bool, doc="(on)")
    event_buffer_size = _setting(
        lib.kvc_config_set_event_buffer_size, lib.kvc_config_get_event_buffer_size,
        _u32, doc="Event ring (0 = off).")
    event_hash_seed = _setting(
        lib.kvc_config_set_event_hash_seed, lib.kvc_config_get_event_hash_seed,
        _u64, doc="Seed of the portable block hashes of events and block_hashes() (0); "
                  "engines and routers sharing an index use equal seeds.")
    manual_clock = _setting(
        lib.kvc_config_set_manual_clock, lib.kvc_config_get_manual_clock,
        _bool, bool, doc="Retention on a manual clock.")

    def block_hashes(self, tokens, options=None, **option_kwargs):
        """The portable hashes (a list of ints) of the full blocks of the
        prompt `tokens` under `options` (a SequenceOptions or its keywords:
        salt, lora_id, extra_keys), from this config alone (its
        tokens_per_block and event_hash_seed): what STORED events of a
        cache built from an equal config report (kvc_block_hashes). Needs
        no cache and no device."""
        from ._events import block_hashes
        return block_hashes(self, tokens, options, option_kwargs)

    def __repr__(self):
        if self._handle is None:
            return "Config(<closed>)"
        return ("Config(num_layers=%d, head_dim=%d, dtype=%s, device=%r, max_tokens=%d, "
                "free_gpu_memory_fraction=%g)" % (self.num_layers, self.head_dim,
                                                  self.dtype.name.lower(), self.device,
                                                  self.max_tokens, self.free_gpu_memory_fraction))

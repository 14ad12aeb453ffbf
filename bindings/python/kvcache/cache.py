"""Cache: a kvcache cache (kvc_cache_t). Lifetime, description, layer
views, statistics and the retention clock live here; sequences, batch
tables, kernels and prefill attention come from the mixins beside it."""
import ctypes

from ._batch import BatchCalls
from ._buffers import stream_handle
from ._capi import lib, struct
from ._events import EventCalls
from ._handle import NativeHandle
from ._kernels import KernelCalls
from ._prefill import PrefillCalls
from ._sequences import SequenceCalls
from ._transfer import TransferCalls
from ._types import DeviceKind, Status
from .config import Config
from .errors import KvCacheError, check
from .records import ResizePlan, read_record

__all__ = ["Cache", "STATE_ALL", "STATE_SNAPSHOTS_NONE"]

# kvc_batch_state_slots' resource value meaning every resource (KVC_STATE_ALL).
STATE_ALL = 0xFFFFFFFF
# Config.max_state_snapshots' value for no snapshot pool (KVC_STATE_SNAPSHOTS_NONE).
STATE_SNAPSHOTS_NONE = 0xFFFFFFFF

_message = lib.kvc_last_error_message
_CACHE, _GROUP, _POOL, _LAYER, _STATS, _GROUP_STATS, _TIER_STATS, _PLAN = (
    read_record(k) for k in ("cache", "group", "pool", "layer", "stats", "group_stats",
                             "tier_stats", "resize_plan"))
_RESOURCE = read_record("resource")
_KV_RESOURCE = read_record("kv_resource")
_SNAPSHOT_STATS = read_record("snapshot_stats")


class Cache(NativeHandle, SequenceCalls, BatchCalls, KernelCalls, PrefillCalls, EventCalls,
            TransferCalls):
    """A KV cache: Cache(config) or Cache(**settings) (a Config is made
    from the settings and freed).

    Use it as a context manager or call close(); close() is idempotent and
    every later call raises KvCacheError(INVALID_STATE). Calls are safe
    from any thread (the library serializes them on one cache); close()
    waits for calls other threads have in flight. Kernel work enqueued on
    a CUDA stream must be finished (synchronize the stream) before close().

    Every failing call raises KvCacheError(status, message, op) with the
    message the library gave in that call, and changes nothing.
    """

    _NAME = "Cache"
    _DESTROY = lib.kvc_cache_destroy

    def __init__(self, config=None, **settings):
        self._init_handle()
        if config is None:
            with Config(**settings) as cfg:
                self._create(cfg)
        else:
            if settings:
                raise TypeError("pass a Config or settings, not both")
            self._create(config)
        d = self.describe()
        self.description = d
        self.device = ("cpu", 0) if d.device_kind == DeviceKind.CPU else ("cuda", d.device_ordinal)
        # Layer shapes for the binding's own argument checks (kernels).
        self._layers = [self.layer_view(i) for i in range(d.num_layers)]

    def _create(self, config):
        out = ctypes.c_void_p()
        check(lib.kvc_cache_create(config._use("kvc_cache_create"), ctypes.byref(out)),
              "kvc_cache_create")
        self._handle = out.value

    # -- description ---------------------------------------------------------
    def describe(self):
        """CacheDescription (kvc_cache_describe)."""
        s = _CACHE.new()
        self._call("kvc_cache_describe", lib.kvc_cache_describe, ctypes.byref(s))
        return _CACHE.read(s)

    # -- paged KV resources (kv_resource.h) -------------------------------------
    def describe_kv_resource(self, index):
        """KvResourceDescription of paged KV resource `index`
        (kvc_cache_describe_kv_resource): managed together with KV resource
        0 or local (pools of its own) and why, its geometry, group and pool."""
        s = _KV_RESOURCE.new()
        self._call("kvc_cache_describe_kv_resource", lib.kvc_cache_describe_kv_resource, index,
                   ctypes.byref(s))
        d = _KV_RESOURCE.read(s)
        text = ctypes.string_at(d.reason_text).decode() if d.reason_text else ""
        return d._replace(reason_text=text)

    # -- state resources (state.h) --------------------------------------------
    def describe_resource(self, index):
        """ResourceDescription of state resource `index`
        (kvc_cache_describe_resource): kind, managed or local and why, slots,
        and the view (slot s at base + s * slot_stride)."""
        s = _RESOURCE.new()
        self._call("kvc_cache_describe_resource", lib.kvc_cache_describe_resource, index,
                   ctypes.byref(s))
        d = _RESOURCE.read(s)
        text = ctypes.string_at(d.reason_text).decode() if d.reason_text else ""
        return d._replace(reason_text=text)

    def state_slots(self, ids, resource=STATE_ALL):
        """Each sequence's slot index (kvc_batch_state_slots; AutoDeploy's
        slot_idx): a list of one int per id for a resource, or with
        STATE_ALL one list per id of every resource's slot."""
        ids = list(ids)
        per = self.describe().num_resources if resource == STATE_ALL else 1
        c_ids = (ctypes.c_uint64 * max(1, len(ids)))(*ids)
        slots = (ctypes.c_int32 * max(1, len(ids) * per))()
        self._call("kvc_batch_state_slots", lib.kvc_batch_state_slots, c_ids, len(ids), resource,
                   slots)
        if resource != STATE_ALL:
            return list(slots[:len(ids)])
        return [list(slots[i * per:(i + 1) * per]) for i in range(len(ids))]

    def publish_state(self, id, position, *, stream=None):
        """Publishes sequence `id`'s state at `position` (a positive multiple
        of tokens_per_block, at most its committed tokens) as the snapshot of
        its block ending there, copied on `stream` (kvc_sequence_publish_state):
        a later prompt with that prefix reuses it, and a rewind to `position`
        restores it (state.h)."""
        op = "kvc_sequence_publish_state"
        self._call(op, lib.kvc_sequence_publish_state, id, position, stream_handle(stream, op))

    def snapshot_stats(self):
        """SnapshotStats: the state snapshot pool and its counters
        (kvc_cache_get_snapshot_stats)."""
        s = _SNAPSHOT_STATS.new()
        self._call("kvc_cache_get_snapshot_stats", lib.kvc_cache_get_snapshot_stats,
                   ctypes.byref(s))
        return _SNAPSHOT_STATS.read(s)

    def describe_group(self, group):
        """GroupDescription of layer group `group` (kvc_cache_describe_group)."""
        s = _GROUP.new()
        self._call("kvc_cache_describe_group", lib.kvc_cache_describe_group, group, ctypes.byref(s))
        return _GROUP.read(s)

    def describe_pool(self, pool):
        """PoolDescription of pool `pool` (kvc_cache_describe_pool)."""
        s = _POOL.new()
        self._call("kvc_cache_describe_pool", lib.kvc_cache_describe_pool, pool, ctypes.byref(s))
        return _POOL.read(s)

    def layer_view(self, layer):
        """LayerView of layer `layer` (kvc_cache_layer_view)."""
        s = _LAYER.new()
        self._call("kvc_cache_layer_view", lib.kvc_cache_layer_view, layer, ctypes.byref(s))
        return _LAYER.read(s)

    def layer_view_rank(self, rank, layer):
        """LayerView of layer `layer` on tensor-parallel rank `rank`
        (kvc_cache_layer_view_rank): the rank's pool and its share of the
        heads (kv_heads from first_kv_head)."""
        s = _LAYER.new()
        self._call("kvc_cache_layer_view_rank", lib.kvc_cache_layer_view_rank, rank, layer,
                   ctypes.byref(s))
        return _LAYER.read(s)

    def pool_memory(self, pool=0):
        """The bytes of pool `pool` of a CPU cache as a writable memoryview
        (for tests and debugging: read K/V through layer_view offsets).
        Valid until close(). A CUDA pool is device memory: use
        describe_pool(pool).base with your framework."""
        op = "kvcache.Cache.pool_memory"
        if self.device != ("cpu", 0):
            raise KvCacheError(Status.UNSUPPORTED, "pool %d is device memory on cuda:%d; read "
                               "it through describe_pool().base" % (pool, self.device[1]), op)
        d = self.describe_pool(pool)
        return memoryview((ctypes.c_char * d.bytes).from_address(d.base)).cast("B")

    # -- statistics ----------------------------------------------------------
    def stats(self):
        """CacheStats (kvc_cache_get_stats)."""
        s = _STATS.new()
        self._call("kvc_cache_get_stats", lib.kvc_cache_get_stats, ctypes.byref(s))
        return _STATS.read(s)

    def group_stats(self, group):
        """GroupStats of layer group `group` (kvc_cache_get_group_stats)."""
        s = _GROUP_STATS.new()
        self._call("kvc_cache_get_group_stats", lib.kvc_cache_get_group_stats, group,
                   ctypes.byref(s))
        return _GROUP_STATS.read(s)

    def tier_stats(self, tier):
        """TierStats of tier `tier` (Tier.DISK or Tier.REMOTE;
        kvc_cache_get_tier_stats); KVC_ERR_NOT_FOUND without that tier."""
        s = _TIER_STATS.new()
        self._call("kvc_cache_get_tier_stats", lib.kvc_cache_get_tier_stats, int(tier),
                   ctypes.byref(s))
        return _TIER_STATS.read(s)

    def flush_tiers(self):
        """Waits until every block queued for writing to the stores is written
        or dropped (kvc_cache_flush_tiers); close() waits the same way."""
        self._call("kvc_cache_flush_tiers", lib.kvc_cache_flush_tiers)

    def check(self):
        """Runs the invariant checker (kvc_cache_check); raises on a broken
        invariant (KVC_ERR_INTERNAL)."""
        self._call("kvc_cache_check", lib.kvc_cache_check)

    def reset_reuse(self):
        """Evicts every cached block (kvc_cache_reset_reuse)."""
        self._call("kvc_cache_reset_reuse", lib.kvc_cache_reset_reuse)

    # -- resizing the primary pools in place ----------------------------------
    def plan_resize(self, free_bytes=0, non_paged_bytes=0, forward_bytes=0,
                    free_gpu_memory_fraction=0.9):
        """ResizePlan from measured memory, changing nothing
        (kvc_cache_plan_resize): mem_for_paged = (free_bytes - non_paged_bytes
        - forward_bytes) * free_gpu_memory_fraction, AutoDeploy's formula;
        free_bytes 0: the device's free memory now plus this cache's pools."""
        inputs = struct("kvc_resize_inputs_t")()
        lib.kvc_resize_inputs_init(ctypes.byref(inputs))
        inputs.free_gpu_memory_fraction = free_gpu_memory_fraction
        inputs.free_bytes = free_bytes
        inputs.non_paged_bytes = non_paged_bytes
        inputs.forward_bytes = forward_bytes
        plan = _PLAN.new()
        n = self.describe().num_pools
        pools = (ctypes.c_uint64 * (n + 1))()
        self._call("kvc_cache_plan_resize", lib.kvc_cache_plan_resize, ctypes.byref(inputs),
                   ctypes.byref(plan), pools, n)
        return ResizePlan(*_PLAN.read(plan), list(pools[:plan.num_pools]))

    def resize(self, primary_bytes):
        """Resizes the primary pools in place (kvc_cache_resize): base
        addresses, layer views and the ids of blocks in use stay; a grow
        adds blocks, a shrink evicts cached blocks in victim order (to the
        host tier where they qualify) until the rest fit, moves the cached
        blocks past the new end below it, and is refused
        (Status.OUT_OF_BLOCKS, nothing changed) over a block in use past
        the end."""
        self._call("kvc_cache_resize", lib.kvc_cache_resize, primary_bytes)
        self._layers = [self.layer_view(i) for i in range(len(self._layers))]

    def make_room(self, block_sets, stream=None):
        """Evicts cached blocks ahead of need until `block_sets` block sets
        are free, as the next adds and extends would (the host tier takes
        what qualifies); call it while the device runs a step. Returns the
        block sets free afterwards (kvc_cache_make_room)."""
        op = "kvc_cache_make_room"
        free = ctypes.c_uint64(0)
        self._call(op, lib.kvc_cache_make_room, block_sets, stream_handle(stream, op),
                   ctypes.byref(free))
        return free.value

    def advance_clock(self, milliseconds):
        """Moves the manual retention clock (kvc_cache_advance_clock)."""
        self._call("kvc_cache_advance_clock", lib.kvc_cache_advance_clock, milliseconds)

    # -- errors of enqueued work ----------------------------------------------
    def async_error(self, stream=None):
        """Waits for the kernel work on `stream` and returns the first error
        this cache's kernels recorded since the last report, as a
        KvCacheError (op "kvc_cache_get_async_error"), or None. Raises when
        the check itself fails (kvc_cache_get_async_error)."""
        op = "kvc_cache_get_async_error"
        found = ctypes.c_int32(0)
        self._call(op, lib.kvc_cache_get_async_error, stream_handle(stream, op), ctypes.byref(found))
        if found.value != 0:
            return KvCacheError(found.value, _message().decode("utf-8", "replace"),
                                op + " (enqueued work)")
        return None

    def __repr__(self):
        if self._handle is None:
            return "Cache(<closed>)"
        d = self.description
        where = "cpu" if self.device[0] == "cpu" else "cuda:%d" % self.device[1]
        return ("Cache(%s, %s, %d layers, %d blocks of %d tokens, %d bytes)"
                % (where, d.dtype.name.lower(), d.num_layers, d.num_blocks, d.tokens_per_block,
                   d.primary_bytes))

"""Read-only results of the describe and stats calls: named tuples whose
fields are the members of the C structs (less struct_size and reserved),
filled from the struct the call wrote. Their fields follow the headers by
construction: a member added to a struct in _capi.STRUCTS appears here."""
import collections
import ctypes
import operator

from ._capi import lib, struct
from ._types import (DeviceKind, DType, EventKind, Layout, ResourceKind, ResourceReason,
                     ShareHandle, Tier)

__all__ = ["CacheDescription", "GroupDescription", "PoolDescription", "LayerView",
           "SequenceDescription", "CacheStats", "GroupStats", "TierStats", "CsrTable", "SlotMapping",
           "StatefulView", "StatefulStats", "StatefulLayerStats", "EventDrain", "SnapshotEntry",
           "ResizePlan", "TransferDescription", "PoolShare", "ShareChunk", "ResourceDescription", "read_record"]

_SKIP = ("struct_size", "reserved")
_CONVERT = {"device_kind": DeviceKind, "dtype": DType, "layout": Layout, "kind": EventKind,
            "tier": Tier}


class _Record:
    """A C struct type, its init function and the named tuple it becomes."""
    __slots__ = ("ctype", "init", "tuple", "fields", "get", "converters")

    def __init__(self, cname, init, pytype, convert=None):
        self.ctype = struct(cname)
        self.init = init
        self.tuple = pytype
        self.fields = pytype._fields
        self.get = operator.attrgetter(*self.fields)
        # Enum members by value (a dict lookup; constructing the enum costs
        # more than the C call); a value a newer library added stays an int.
        table = convert if convert is not None else _CONVERT
        self.converters = [(i, {m.value: m for m in table[f]})
                           for i, f in enumerate(self.fields) if f in table]

    def new(self):
        """A fresh struct, initialised by its kvc_x_init()."""
        s = self.ctype()
        self.init(ctypes.byref(s))
        return s

    def read(self, s):
        values = self.get(s)
        if self.converters:
            values = list(values)
            for i, members in self.converters:
                values[i] = members.get(values[i], values[i])
        return self.tuple._make(values)


def _fields(cname):
    return [f for f, _ in struct(cname)._fields_ if f not in _SKIP]


CacheDescription = collections.namedtuple("CacheDescription", _fields("kvc_cache_desc_t"))
ResourceDescription = collections.namedtuple("ResourceDescription",
                                             _fields("kvc_resource_desc_t"))
KvResourceDescription = collections.namedtuple("KvResourceDescription",
                                               _fields("kvc_kv_resource_desc_t"))
KvResourceDescription.__doc__ = "kvc_kv_resource_desc_t (kv_resource.h): managed together " \
    "with KV resource 0 or local, why (reason, reason_text), managed_with, the geometry, and " \
    "the group, pool and block bytes of its layers."
ResourceDescription.__doc__ = "kvc_resource_desc_t (state.h): kind, managed, reason, " \
    "reason_text (the address of the cache's C string; Cache.describe_resource gives a str), " \
    "shape, slots and the view: slot s at base + s * slot_stride."

CacheDescription.__doc__ = "kvc_cache_desc_t: device, dtype, layout, layers, groups, pools, " \
                           "blocks, token capacity and bytes of a cache."
GroupDescription = collections.namedtuple("GroupDescription", _fields("kvc_group_desc_t"))
GroupDescription.__doc__ = "kvc_group_desc_t: one layer group (window, kv heads, head dim)."
PoolDescription = collections.namedtuple("PoolDescription", _fields("kvc_pool_desc_t"))
PoolDescription.__doc__ = "kvc_pool_desc_t: one block pool; base is its address (device " \
                          "memory on CUDA)."
SequenceDescription = collections.namedtuple("SequenceDescription",
                                             _fields("kvc_sequence_desc_t"))
SequenceDescription.__doc__ = "kvc_sequence_desc_t: the state of one sequence."
CacheStats = collections.namedtuple("CacheStats", _fields("kvc_cache_stats_t"))
CacheStats.__doc__ = "kvc_cache_stats_t: block counts per state and tier, reuse, evictions."
TierStats = collections.namedtuple("TierStats", _fields("kvc_tier_stats_t"))
TierStats.__doc__ = "kvc_tier_stats_t: the statistics of one tier below the tree (disk, remote)."
GroupStats = collections.namedtuple("GroupStats", _fields("kvc_group_stats_t"))
GroupStats.__doc__ = "kvc_group_stats_t: the counts of one layer group."


RawResizePlan = collections.namedtuple("RawResizePlan", _fields("kvc_resize_plan_t"))
RawResizePlan.__doc__ = "kvc_resize_plan_t as the library wrote it (ResizePlan adds pool_blocks)."
ResizePlan = collections.namedtuple("ResizePlan", _fields("kvc_resize_plan_t") + ["pool_blocks"])
ResizePlan.__doc__ = "kvc_resize_plan_t: the pools Cache.resize(primary_bytes) would give " \
                     "(mem_for_paged is AutoDeploy's formula), and pool_blocks, the blocks " \
                     "of each pool."


class LayerView(collections.namedtuple("LayerView", _fields("kvc_layer_view_t"))):
    """kvc_layer_view_t: where one layer's K and V live. Element (block b,
    kv k, token t, head h, dim d) is at byte offset(b, k, t, h) + d *
    elem_size from base (device memory on CUDA). Strides are bytes."""
    __slots__ = ()

    def offset(self, block, kv, token, head):
        """Byte offset of (block, kv, token, head, dim 0) from base."""
        return (block * self.block_stride + kv * self.kv_stride + token * self.token_stride +
                head * self.head_stride)


CsrTable = collections.namedtuple("CsrTable", "indptr indices last_page_len num_indices")
CsrTable.__doc__ = "Block tables in CSR form (FlashInfer's indptr, indices, last_page_len); " \
                   "indices holds num_indices entries."
SlotMapping = collections.namedtuple("SlotMapping", "slots num_slots new_tokens")
SlotMapping.__doc__ = "Slots of the new tokens (slots[:num_slots]; -1 for cached ones) and, " \
                      "when asked, the count per sequence."

TransferDescription = collections.namedtuple("TransferDescription",
                                             _fields("kvc_transfer_desc_t"))
TransferDescription.__doc__ = "kvc_transfer_desc_t: what an Export or an Import covers " \
                              "(an import writes positions first_block to num_blocks - 1)."


PoolShare = collections.namedtuple("PoolShare", _fields("kvc_pool_share_t"))
PoolShare.__doc__ = "kvc_pool_share_t: the memory backing one rank's pool for another process " \
                    "(num_chunks physical allocations, granularity, reserved_bytes, mapped_bytes)."
ShareChunk = collections.namedtuple("ShareChunk", _fields("kvc_share_chunk_t"))
ShareChunk.__doc__ = "kvc_share_chunk_t: one exported chunk of a pool: fd (a new POSIX file " \
                     "descriptor the caller owns and closes), index, offset from the pool's " \
                     "base, size."


class StatefulView(collections.namedtuple("StatefulView", _fields("kvc_stateful_view_t"))):
    """kvc_stateful_view_t: where one layer of a StatefulCache lives.
    Element (row r, head h, position t, dim d) of K is at byte
    offset(r, h, t) + d * elem_size from key (V the same from value;
    value == key when kv_factor is 1); with a beam table (beam_table not
    0), position t of row r is read from row beam_table[r *
    beam_table_stride + t]. Addresses are device memory on CUDA (lengths
    and beam_table too) and stay valid until the next append, import_row,
    compact or reset."""
    __slots__ = ()

    def offset(self, row, head, position):
        """Byte offset of (row, head, position, dim 0) from key or value."""
        return row * self.row_stride + head * self.head_stride + position * self.token_stride


StatefulStats = collections.namedtuple("StatefulStats", _fields("kvc_stateful_stats_t"))
StatefulStats.__doc__ = "kvc_stateful_stats_t: bytes held (now, peak, K/V, beam table) and " \
                        "counts of growths, reorders, table entries copied, compactions."
StatefulLayerStats = collections.namedtuple("StatefulLayerStats",
                                            _fields("kvc_stateful_layer_stats_t"))
StatefulLayerStats.__doc__ = "kvc_stateful_layer_stats_t: one layer's capacity, growth " \
                             "offset, bytes, growths, and longest row."

RawEvent = collections.namedtuple("RawEvent", _fields("kvc_event_t"))
RawEvent.__doc__ = "kvc_event_t as the library wrote it (the drain makes Events of them)."
EventDrain = collections.namedtuple("EventDrain", _fields("kvc_event_drain_t"))
EventDrain.__doc__ = "kvc_event_drain_t: what one drain wrote and what is left pending."
SnapshotEntry = collections.namedtuple("SnapshotEntry", _fields("kvc_snapshot_entry_t"))
SnapshotEntry.__doc__ = "kvc_snapshot_entry_t: one cached block of Cache.snapshot() (hash, " \
                        "parent_hash, groups bit mask, lora_id if has_lora, tier, priority, " \
                        "num_tokens)."

SnapshotStats = collections.namedtuple("SnapshotStats", _fields("kvc_snapshot_stats_t"))
SnapshotStats.__doc__ = "kvc_snapshot_stats_t (state.h): the state snapshot pool (slots, " \
                        "bytes) and its counters (published, hits, restores, evictions)."

RECORDS = {
    "cache": _Record("kvc_cache_desc_t", lib.kvc_cache_desc_init, CacheDescription),
    "group": _Record("kvc_group_desc_t", lib.kvc_group_desc_init, GroupDescription,
                     {"dtype": DType, "layout": Layout}),
    "pool": _Record("kvc_pool_desc_t", lib.kvc_pool_desc_init, PoolDescription),
    "layer": _Record("kvc_layer_view_t", lib.kvc_layer_view_init, LayerView),
    "sequence": _Record("kvc_sequence_desc_t", lib.kvc_sequence_desc_init, SequenceDescription),
    "stats": _Record("kvc_cache_stats_t", lib.kvc_cache_stats_init, CacheStats),
    "group_stats": _Record("kvc_group_stats_t", lib.kvc_group_stats_init, GroupStats),
    "tier_stats": _Record("kvc_tier_stats_t", lib.kvc_tier_stats_init, TierStats),
    "transfer": _Record("kvc_transfer_desc_t", lib.kvc_transfer_desc_init, TransferDescription),
    "pool_share": _Record("kvc_pool_share_t", lib.kvc_pool_share_init, PoolShare,
                          {"handle_type": ShareHandle}),
    "share_chunk": _Record("kvc_share_chunk_t", lib.kvc_share_chunk_init, ShareChunk),
    "resource": _Record("kvc_resource_desc_t", lib.kvc_resource_desc_init, ResourceDescription,
                        {"kind": ResourceKind, "reason": ResourceReason, "dtype": DType}),
    "kv_resource": _Record("kvc_kv_resource_desc_t", lib.kvc_kv_resource_desc_init,
                           KvResourceDescription,
                           {"reason": ResourceReason, "dtype": DType, "layout": Layout}),
    "snapshot_stats": _Record("kvc_snapshot_stats_t", lib.kvc_snapshot_stats_init,
                              SnapshotStats),
    "resize_plan": _Record("kvc_resize_plan_t", lib.kvc_resize_plan_init, RawResizePlan),
    "stateful_view": _Record("kvc_stateful_view_t", lib.kvc_stateful_view_init, StatefulView),
    "stateful_stats": _Record("kvc_stateful_stats_t", lib.kvc_stateful_stats_init, StatefulStats),
    "stateful_layer_stats": _Record("kvc_stateful_layer_stats_t",
                                    lib.kvc_stateful_layer_stats_init, StatefulLayerStats),
    # Arrays the library fills: no init function.
    "event": _Record("kvc_event_t", None, RawEvent),
    "event_drain": _Record("kvc_event_drain_t", lib.kvc_event_drain_init, EventDrain),
    "snapshot_entry": _Record("kvc_snapshot_entry_t", None, SnapshotEntry),
}


def read_record(kind):
    return RECORDS[kind]

"""kvcache: the KV-cache system of an LLM inference engine, from Python.

A pure-Python binding of libkvcache's C API through ctypes (no compiled
extension; CPython >= 3.9). The library is found through the
KVCACHE_LIBRARY environment variable (a path), a build folder of the
checkout this package sits in (build/, build/release/, build/debug/), or
the system's library path.

    import kvcache
    with kvcache.Cache(num_layers=32, kv_heads=8, head_dim=128,
                       device="cuda:0", free_gpu_memory_fraction=0.3) as cache:
        cached = cache.add_sequence(1, prompt_tokens)

kvcache.StatefulCache is the stateful contiguous mode (OpenVINO's:
one K/V buffer per layer for a fixed batch of rows, beam search through a
beam table).

On CUDA the pool takes free_gpu_memory_fraction (default 0.9) of the free
GPU memory unless max_tokens or primary_bytes is less: in a process that
also holds a model, set one of them. See bindings/python/README.md.
"""
from ._capi import lib as _lib, library_path
from ._types import (ALL_ROWS, DEFAULT_PRIORITY, EVENT_NO_TOKENS, RETENTION_OPEN_END,
                     STATEFUL_MAX_BATCH, STATEFUL_MAX_LENGTH, DeviceKind, DType, EventKind,
                     Feature, GrowthPolicy, Layout, ResourceKind, ResourceReason, ShareHandle,
                     Status, TableFormat, Tier)
from .cache import STATE_ALL, STATE_SNAPSHOTS_NONE, Cache
from .config import Config
from .errors import KvCacheError, status_string
from ._batch import DecodeStep
from ._events import Event, Snapshot
from ._kernels import StoreStrides
from ._sequences import ExtraKey, RetentionRange, SequenceOptions
from ._transfer import Export, Import
from .records import (PoolShare, ShareChunk, CacheDescription, CacheStats, CsrTable, GroupDescription, GroupStats, TierStats,
                      LayerView, PoolDescription, ResizePlan, SequenceDescription, SlotMapping,
                      TransferDescription, ResourceDescription, KvResourceDescription, SnapshotStats,
                      SnapshotEntry, StatefulLayerStats, StatefulStats, StatefulView)
from .stateful import StatefulCache

__all__ = ["Cache", "Config", "StatefulCache", "KvCacheError", "Status", "DType", "Layout",
           "DeviceKind", "TableFormat", "Feature", "GrowthPolicy", "SequenceOptions", "ExtraKey",
           "RetentionRange", "StoreStrides", "DecodeStep", "CacheDescription",
           "GroupDescription", "PoolDescription", "ResizePlan", "LayerView", "SequenceDescription", "Export", "Import",
           "PoolShare", "ShareChunk", "ShareHandle",
           "TransferDescription", "ResourceDescription", "KvResourceDescription", "ResourceKind", "ResourceReason",
           "STATE_ALL", "STATE_SNAPSHOTS_NONE", "SnapshotStats",
           "CacheStats", "GroupStats", "TierStats", "CsrTable", "SlotMapping", "StatefulView", "StatefulStats",
           "StatefulLayerStats", "EventKind", "Tier", "Event", "Snapshot", "SnapshotEntry",
           "EVENT_NO_TOKENS", "DEFAULT_PRIORITY", "RETENTION_OPEN_END", "ALL_ROWS",
           "STATEFUL_MAX_BATCH", "STATEFUL_MAX_LENGTH", "version", "version_string",
           "abi_version", "features", "status_string", "library_path"]


def version():
    """Version of the loaded library, MAJOR * 10000 + MINOR * 100 + PATCH
    (kvc_version)."""
    return _lib.kvc_version()


def version_string():
    """"MAJOR.MINOR.PATCH" of the loaded library (kvc_version_string)."""
    return _lib.kvc_version_string().decode()


def abi_version():
    """ABI major of the loaded library, the N of libkvcache.so.N
    (kvc_abi_version)."""
    return _lib.kvc_abi_version()


def features():
    """Feature flags of the library and machine (kvc_features):
    Feature.CUDA_COMPILED, Feature.CUDA_DEVICE, Feature.REDIS."""
    return Feature(_lib.kvc_features())


__version__ = version_string()

"""Enumerations of the C API (values never change) and the parsing of
their Python spellings ("bf16", "cuda:1", "hnd")."""
import enum

__all__ = ["Status", "DType", "Layout", "DeviceKind", "TableFormat", "Feature", "GrowthPolicy",
           "EventKind", "Tier", "EVENT_NO_TOKENS",
           "DEFAULT_PRIORITY", "RETENTION_OPEN_END", "STATEFUL_MAX_BATCH", "STATEFUL_MAX_LENGTH",
           "ALL_ROWS", "dtype_of", "layout_of", "device_of", "growth_policy_of", "DTYPE_SIZE"]

DEFAULT_PRIORITY = 35           # KVC_DEFAULT_PRIORITY
RETENTION_OPEN_END = 2**64 - 1  # KVC_RETENTION_OPEN_END
STATEFUL_MAX_BATCH = 1024       # KVC_STATEFUL_MAX_BATCH
STATEFUL_MAX_LENGTH = 1 << 30   # KVC_STATEFUL_MAX_LENGTH
ALL_ROWS = 0xffffffff           # KVC_STATEFUL_ALL_ROWS (StatefulCache.trim)
EVENT_NO_TOKENS = 2**64 - 1     # KVC_EVENT_NO_TOKENS (kvc_event_t.token_offset)


class Status(enum.IntEnum):
    """kvc_status_t values (enum kvc_status_code)."""
    OK = 0
    INVALID_ARGUMENT = -1
    NOT_FOUND = -2
    ALREADY_EXISTS = -3
    OUT_OF_BLOCKS = -4
    BUFFER_TOO_SMALL = -5
    UNSUPPORTED = -6
    DEVICE = -7
    OUT_OF_MEMORY = -8
    INVALID_STATE = -9
    INTERNAL = -100


class EventKind(enum.IntEnum):
    """What an event reports (kvc_event_kind_t)."""
    STORED = 1
    REMOVED = 2
    TIER_CHANGED = 3
    PRIORITY_CHANGED = 4
    CLEARED = 5
    LOST = 6


class Tier(enum.IntEnum):
    """Where a cached block lives (kvc_tier_t)."""
    PRIMARY = 0
    HOST = 1
    DISK = 2    # the disk tier (Config.disk_cache): STORED/REMOVED of its records
    REMOTE = 3  # a remote store shared by caches: this cache's own writes only


# state.h: the most resources of a config, the largest generic alignment.
STATE_MAX_RESOURCES = 256
STATE_MAX_ALIGNMENT = 4096
# kv_resource.h: the most paged KV resources of a config.
MAX_KV_RESOURCES = 1024


class ResourceKind(enum.IntEnum):
    """State resource kinds (enum kvc_resource_kind, state.h)."""
    SSM = 1
    CONV = 2
    GENERIC = 3
    UNPAGED = 4


class ResourceReason(enum.IntEnum):
    """Why a state or paged KV resource is managed or local (enum
    kvc_resource_reason)."""
    MANAGED = 0
    SSM_SHAPE_DIFFERS = 1
    NO_SSM = 2
    N_GROUPS = 3
    CONV_SHAPE_DIFFERS = 4
    KV_HEAD_DIM_DIFFERS = 5
    KV_DTYPE_DIFFERS = 6
    KV_FACTOR_DIFFERS = 7
    KV_LAYOUT_DIFFERS = 8


class DType(enum.IntEnum):
    """Element types (enum kvc_dtype)."""
    F32 = 1
    F16 = 2
    BF16 = 3
    FP8_E4M3 = 4


DTYPE_SIZE = {DType.F32: 4, DType.F16: 2, DType.BF16: 2, DType.FP8_E4M3: 1}


class Layout(enum.IntEnum):
    """Block layouts (enum kvc_layout)."""
    NHD = 1
    HND = 2


class DeviceKind(enum.IntEnum):
    """Devices (enum kvc_device_kind)."""
    CPU = 1
    CUDA = 2


class TableFormat(enum.IntEnum):
    """Block table formats of decode attention (enum kvc_table_format)."""
    PADDED = 1
    CSR = 2


class GrowthPolicy(enum.IntEnum):
    """Growth policies of a StatefulCache (enum kvc_growth_policy)."""
    STAGGERED = 1
    UNIFORM = 2


class ShareHandle(enum.IntEnum):
    """Handle types of a PoolShare (kvc_share_handle_t, transfer.h)."""
    POSIX_FD = 1


class Feature(enum.IntFlag):
    """kvc_features() bits (enum kvc_feature_bits)."""
    CUDA_COMPILED = 1 << 0
    CUDA_DEVICE = 1 << 1
    REDIS = 1 << 2


_DTYPE_NAMES = {
    "f32": DType.F32, "float32": DType.F32, "float": DType.F32,
    "f16": DType.F16, "float16": DType.F16, "half": DType.F16,
    "bf16": DType.BF16, "bfloat16": DType.BF16,
    "fp8": DType.FP8_E4M3, "fp8_e4m3": DType.FP8_E4M3, "float8_e4m3fn": DType.FP8_E4M3,
}


def dtype_of(value, what="dtype"):
    """A DType from a DType, an int, a name ("bf16", "bfloat16") or an
    object whose str() ends in such a name (torch.bfloat16)."""
    if isinstance(value, DType):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return DType(value)
    name = str(value).lower().rsplit(".", 1)[-1]
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    raise ValueError("%s must be one of f32, f16, bf16, fp8_e4m3 (or a DType), got %r"
                     % (what, value))


def layout_of(value):
    if isinstance(value, Layout):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Layout(value)
    try:
        return Layout[str(value).upper()]
    except KeyError:
        raise ValueError("layout must be 'nhd' or 'hnd' (or a Layout), got %r" % (value,))


def device_of(value):
    """(DeviceKind, ordinal) from "cpu", "cuda", "cuda:1", a DeviceKind, a
    (kind, ordinal) pair or an object with .type and .index (torch.device)."""
    if isinstance(value, tuple) and len(value) == 2:
        kind, ordinal = value
        return (DeviceKind(kind) if isinstance(kind, int) else device_of(kind)[0]), int(ordinal)
    if isinstance(value, DeviceKind):
        return value, 0
    if hasattr(value, "type") and hasattr(value, "index"):
        return device_of("%s:%d" % (value.type, value.index or 0))
    text = str(value).lower()
    name, _, ordinal = text.partition(":")
    if name in ("cpu", "cuda") and (ordinal == "" or ordinal.isdigit()):
        return DeviceKind[name.upper()], int(ordinal or 0)
    raise ValueError("device must be 'cpu', 'cuda' or 'cuda:N', got %r" % (value,))


def growth_policy_of(value):
    """A GrowthPolicy from a GrowthPolicy, an int or "staggered"/"uniform"."""
    if isinstance(value, GrowthPolicy):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return GrowthPolicy(value)
    try:
        return GrowthPolicy[str(value).upper()]
    except KeyError:
        raise ValueError("growth_policy must be 'staggered' or 'uniform' (or a GrowthPolicy), "
                         "got %r" % (value,))

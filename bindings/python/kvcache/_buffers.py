"""Turning Python objects into the addresses the C calls take, without
importing NumPy or torch:

- host arrays (token ids, sequence ids, tables written by the batch
  calls): any object with the buffer protocol (NumPy arrays, array.array,
  bytearray, memoryview), or a list of ints (copied);
- kernel tensors: the buffer protocol (host memory), objects with
  data_ptr()/stride()/dtype/device (torch tensors), __cuda_array_interface__
  (CuPy, Numba, torch) or __dlpack__ (any DLPack producer), or a raw int
  address (no check possible: the caller vouches for it);
- streams: None, an int handle (a cudaStream_t), or an object with
  .cuda_stream (torch.cuda.Stream), .stream or .ptr (CuPy).

Every refusal is a KvCacheError(INVALID_ARGUMENT) naming the argument, made
before any C call, so nothing changes.
"""
import array
import ctypes

from .errors import invalid

__all__ = ["Tensor", "host_input", "host_output", "tensor", "stream_handle", "HOST"]

HOST = ("cpu", 0)

# struct format characters -> kind letter (i signed, u unsigned, f float, b bool)
_KINDS = {"b": "i", "h": "i", "i": "i", "l": "i", "q": "i", "n": "i",
          "B": "u", "H": "u", "I": "u", "L": "u", "Q": "u", "N": "u",
          "e": "f", "f": "f", "d": "f", "?": "b"}

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "f2", "half": "f2", "float32": "f4",
                 "float": "f4", "float64": "f8", "double": "f8", "int8": "i1", "int16": "i2",
                 "int32": "i4", "int64": "i8", "long": "i8", "int": "i4", "uint8": "u1",
                 "uint16": "u2", "uint32": "u4", "uint64": "u8", "bool": "b1",
                 "float8_e4m3fn": "fp8"}

# DLPack type codes (dlpack.h): int, uint, float, bfloat; 10 = float8_e4m3fn.
_DL_CODES = {0: "i", 1: "u", 2: "f", 4: "bf", 6: "b"}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13

_c_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _fmt(struct_char, itemsize):
    """'i4', 'u8', 'f2', ... from a buffer format; 'raw2' when unknown."""
    c = struct_char.lstrip("@=<")
    kind = _KINDS.get(c)
    if kind is None or len(c) != 1:
        return "raw%d" % itemsize
    return "%s%d" % (kind, itemsize)


class _PyBuffer(ctypes.Structure):
    """Py_buffer (stable layout since Python 3.3), for read-only or strided
    buffers whose address ctypes.from_buffer cannot give."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("suboffsets", ctypes.c_void_p),
                ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.c_void_p]
_release_buffer.restype = None
_PYBUF_STRIDES_FORMAT = 0x0018 | 0x0004  # PyBUF_STRIDES | PyBUF_FORMAT


def _address(mv):
    """Address of element 0 of a memoryview (any strides, read-only too).
    The owner of the memory stays referenced by the caller's argument."""
    if mv.nbytes == 0:
        return None
    if not mv.readonly and mv.c_contiguous:
        return _addressof(_c_char_from_buffer(mv))
    view = _PyBuffer()
    if _get_buffer(mv, ctypes.byref(view), _PYBUF_STRIDES_FORMAT) != 0:
        raise BufferError("cannot read the address of this buffer")
    try:
        return view.buf
    finally:
        _release_buffer(ctypes.byref(view))


# --------------------------------------------------------------------------
# Host arrays of the bookkeeping calls
# --------------------------------------------------------------------------

# array.array type codes of the fixed-width types (LP64 Linux).
_LIST_TYPES = {"i4": "i", "i8": "q", "u8": "Q", "u4": "I"}


def host_input(obj, fmts, name, op):
    """(address, count, keep-alive) of a 1-D host array of one of `fmts`
    ('i4', 'u8', ...; the first one is used to copy a list). Buffers must
    be C-contiguous; lists, tuples and ranges of ints are copied."""
    if obj is None:
        return None, 0, None
    try:
        mv = memoryview(obj)
    except TypeError:
        if not isinstance(obj, (list, tuple, range)):
            raise invalid(op, "%s must be a buffer (e.g. a NumPy array) of %s or a list of "
                          "ints, got %s" % (name, _fmt_names(fmts), type(obj).__name__)) from None
        try:
            arr = array.array(_LIST_TYPES[fmts[0]], obj)
        except (TypeError, OverflowError) as e:
            raise invalid(op, "%s must hold %s values: %s" % (name, _fmt_name(fmts[0]), e)) from None
        return (arr.buffer_info()[0] if len(arr) else None), len(arr), arr
    fmt = _fmt(mv.format, mv.itemsize)
    if fmt not in fmts:
        raise invalid(op, "%s must hold %s, got %s" % (name, _fmt_names(fmts), _fmt_name(fmt)))
    if not mv.c_contiguous:
        raise invalid(op, "%s must be C-contiguous (got strides %s)" % (name, mv.strides))
    return _address(mv), mv.nbytes // mv.itemsize, mv


def host_output(obj, fmt, name, op):
    """(address, capacity in elements, memoryview) of a writable, C-contiguous
    host buffer of `fmt`."""
    try:
        mv = memoryview(obj)
    except TypeError:
        raise invalid(op, "%s must be a writable buffer (e.g. a NumPy array) of %s, got %s"
                      % (name, _fmt_name(fmt), type(obj).__name__)) from None
    got = _fmt(mv.format, mv.itemsize)
    if got != fmt:
        raise invalid(op, "%s must hold %s, got %s" % (name, _fmt_name(fmt), _fmt_name(got)))
    if mv.readonly:
        raise invalid(op, "%s is read-only; it receives the output" % name)
    if not mv.c_contiguous:
        raise invalid(op, "%s must be C-contiguous (got strides %s)" % (name, mv.strides))
    return _address(mv), mv.nbytes // mv.itemsize, mv


_NAMES = {"i4": "int32", "i8": "int64", "u8": "uint64", "u4": "uint32", "i2": "int16",
          "u2": "uint16", "i1": "int8", "u1": "uint8", "f2": "float16", "f4": "float32",
          "f8": "float64", "bf16": "bfloat16", "fp8": "float8_e4m3fn", "b1": "bool"}


def _fmt_name(fmt):
    if fmt is None:
        return "unknown (a raw address)"
    if fmt.startswith("raw"):
        return "an unknown %s-byte type" % fmt[3:]
    return _NAMES.get(fmt, fmt)


def _fmt_names(fmts):
    return " or ".join(_fmt_name(f) for f in fmts)


# --------------------------------------------------------------------------
# Kernel tensors
# --------------------------------------------------------------------------

class Tensor:
    """A kernel argument resolved: its address, and when the object says
    so its element format, shape, strides (in elements) and device
    (("cpu", 0) or ("cuda", n)). A raw int address knows none of them."""
    __slots__ = ("ptr", "fmt", "shape", "strides", "device", "owner")

    def __init__(self, ptr, fmt=None, shape=None, strides=None, device=None, owner=None):
        self.ptr = ptr
        self.fmt = fmt
        self.shape = shape
        self.strides = strides
        self.device = device
        self.owner = owner

    def contiguous(self):
        if self.strides is None:
            return True
        expect = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


def _device_name(device):
    return "%s:%d" % device if device[0] == "cuda" else "cpu"


def tensor(obj, name, op, device):
    """Resolves a kernel argument for a cache on `device` (("cpu", 0) or
    ("cuda", n)); refuses memory on another device."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        return Tensor(obj or None)
    t = _resolve(obj, name, op)
    if t.device is not None and t.device != device:
        if t.device == HOST:
            raise invalid(op, "%s is host memory (%s) but the cache is on %s; pass device "
                          "memory (a CUDA tensor, an object with __dlpack__ or "
                          "__cuda_array_interface__, or an int address)"
                          % (name, type(obj).__name__, _device_name(device)))
        raise invalid(op, "%s is on %s but the cache is on %s"
                      % (name, _device_name(t.device), _device_name(device)))
    return t


def _resolve(obj, name, op):
    try:
        mv = memoryview(obj)
    except TypeError:
        mv = None
    if mv is not None:
        item = mv.itemsize
        strides = tuple(s // item for s in mv.strides) if all(s % item == 0 for s in mv.strides) else None
        if strides is None:
            raise invalid(op, "%s has strides %s that are not whole elements" % (name, mv.strides))
        return Tensor(_address(mv), _fmt(mv.format, item), tuple(mv.shape), strides, HOST, mv)
    if hasattr(obj, "data_ptr") and hasattr(obj, "stride") and hasattr(obj, "device"):
        dev = obj.device
        kind = getattr(dev, "type", str(dev))
        device = ("cuda", dev.index or 0) if kind == "cuda" else HOST if kind == "cpu" else (kind, 0)
        fmt = _TORCH_DTYPES.get(str(getattr(obj, "dtype", "")).rsplit(".", 1)[-1])
        return Tensor(obj.data_ptr() or None, fmt, tuple(obj.shape), tuple(obj.stride()), device, obj)
    try:
        cai = obj.__cuda_array_interface__
    except Exception:  # absent, or a dtype it cannot describe (torch bf16)
        cai = None
    if cai is not None:
        return _from_cai(obj, cai, name, op)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, name, op)
    raise invalid(op, "%s must be a buffer, a tensor (data_ptr(), __cuda_array_interface__ or "
                  "__dlpack__) or an int address, got %s" % (name, type(obj).__name__))


def _from_cai(obj, cai, name, op):
    typestr = cai["typestr"]
    if typestr[0] == ">":
        raise invalid(op, "%s is big-endian (%s)" % (name, typestr))
    item = int(typestr[2:])
    fmt = {"i": "i", "u": "u", "f": "f", "b": "b"}.get(typestr[1], "raw") + str(item)
    shape = tuple(cai["shape"])
    if cai.get("strides") is None:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        strides = tuple(reversed(strides))
    else:
        strides = tuple(s // item for s in cai["strides"])
    ordinal = 0
    dev = getattr(obj, "device", None)
    if dev is not None:
        ordinal = getattr(dev, "index", None) or getattr(dev, "id", 0) or 0
    return Tensor(cai["data"][0] or None, fmt, shape, strides, ("cuda", int(ordinal)), obj)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer.restype = ctypes.c_void_p


def _from_dlpack(obj, name, op):
    """Reads a legacy DLPack capsule ("dltensor", DLManagedTensor whose
    first member is the DLTensor) without consuming it: the capsule's own
    destructor frees it; the memory stays `obj`'s."""
    capsule = obj.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    code, bits = t.dtype.code, t.dtype.bits
    if code == 10 and bits == 8:
        fmt = "fp8"
    elif code == 4 and bits == 16:
        fmt = "bf16"
    else:
        fmt = "%s%d" % (_DL_CODES.get(code, "raw"), bits // 8)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(t.ndim))
    else:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        strides = tuple(reversed(strides))
    dt = t.device.device_type
    if dt == _DL_CUDA or dt == _DL_CUDA_MANAGED:
        device = ("cuda", t.device.device_id)
    elif dt in (_DL_CPU, _DL_CUDA_HOST):
        device = HOST
    else:
        device = ("dlpack device type %d" % dt, t.device.device_id)
    ptr = (t.data or 0) + t.byte_offset
    return Tensor(ptr or None, fmt, shape, strides, device, (obj, capsule))


# --------------------------------------------------------------------------
# Streams
# --------------------------------------------------------------------------

def stream_handle(stream, op):
    """The cudaStream_t of `stream` as an int (None: the default stream)."""
    if stream is None or isinstance(stream, int):
        return stream or None
    for attr in ("cuda_stream", "stream", "ptr"):
        inner = getattr(stream, attr, None)
        if inner is not None and inner is not stream:
            return stream_handle(inner, op)
    raise invalid(op, "stream must be None, an int (a cudaStream_t) or an object with "
                  ".cuda_stream, .stream or .ptr, got %s" % type(stream).__name__)

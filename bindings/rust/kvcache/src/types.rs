//! Small value types shared by the modules: element types, layouts,
//! devices, streams, and the element types host slices may hold.

use std::ffi::c_void;

use kvcache_sys as sys;

/// Element type of the stored K/V (`kvc_dtype_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// IEEE float32 (`KVC_DTYPE_F32`).
    F32,
    /// IEEE float16 (`KVC_DTYPE_F16`).
    F16,
    /// bfloat16 (`KVC_DTYPE_BF16`), the default.
    Bf16,
    /// float8 e4m3 with a per-tensor scale (`KVC_DTYPE_FP8_E4M3`).
    Fp8E4m3,
    /// A value this binding does not know (a newer library).
    Other(u32),
}

impl Dtype {
    /// The type of a C value.
    pub fn from_raw(raw: sys::kvc_dtype_t) -> Dtype {
        match raw {
            sys::KVC_DTYPE_F32 => Dtype::F32,
            sys::KVC_DTYPE_F16 => Dtype::F16,
            sys::KVC_DTYPE_BF16 => Dtype::Bf16,
            sys::KVC_DTYPE_FP8_E4M3 => Dtype::Fp8E4m3,
            other => Dtype::Other(other),
        }
    }

    /// The C value (`KVC_DTYPE_*`).
    pub fn raw(self) -> sys::kvc_dtype_t {
        match self {
            Dtype::F32 => sys::KVC_DTYPE_F32,
            Dtype::F16 => sys::KVC_DTYPE_F16,
            Dtype::Bf16 => sys::KVC_DTYPE_BF16,
            Dtype::Fp8E4m3 => sys::KVC_DTYPE_FP8_E4M3,
            Dtype::Other(raw) => raw,
        }
    }

    /// Bytes per element; `None` for a type this binding does not know.
    pub fn size(self) -> Option<usize> {
        match self {
            Dtype::F32 => Some(4),
            Dtype::F16 | Dtype::Bf16 => Some(2),
            Dtype::Fp8E4m3 => Some(1),
            Dtype::Other(_) => None,
        }
    }
}

/// Order of tokens and heads inside a block (`kvc_layout_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `[tokens][heads][head_dim]` per slab (`KVC_LAYOUT_NHD`), the default.
    Nhd,
    /// `[heads][tokens][head_dim]` per slab (`KVC_LAYOUT_HND`).
    Hnd,
    /// A value this binding does not know (a newer library).
    Other(u32),
}

impl Layout {
    /// The layout of a C value.
    pub fn from_raw(raw: sys::kvc_layout_t) -> Layout {
        match raw {
            sys::KVC_LAYOUT_NHD => Layout::Nhd,
            sys::KVC_LAYOUT_HND => Layout::Hnd,
            other => Layout::Other(other),
        }
    }

    /// The C value (`KVC_LAYOUT_*`).
    pub fn raw(self) -> sys::kvc_layout_t {
        match self {
            Layout::Nhd => sys::KVC_LAYOUT_NHD,
            Layout::Hnd => sys::KVC_LAYOUT_HND,
            Layout::Other(raw) => raw,
        }
    }
}

/// Where a cache's primary pool lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory: the reference backend (`KVC_DEVICE_CPU`), the default.
    Cpu,
    /// GPU memory of the CUDA device with this ordinal (`KVC_DEVICE_CUDA`).
    Cuda(i32),
    /// A device kind this binding does not know (a newer library), with
    /// its ordinal.
    Other(u32, i32),
}

impl Device {
    /// The device of a C (kind, ordinal) pair.
    pub fn from_raw(kind: sys::kvc_device_kind_t, ordinal: i32) -> Device {
        match kind {
            sys::KVC_DEVICE_CPU => Device::Cpu,
            sys::KVC_DEVICE_CUDA => Device::Cuda(ordinal),
            other => Device::Other(other, ordinal),
        }
    }

    /// The C (kind, ordinal) pair.
    pub fn raw(self) -> (sys::kvc_device_kind_t, i32) {
        match self {
            Device::Cpu => (sys::KVC_DEVICE_CPU, 0),
            Device::Cuda(ordinal) => (sys::KVC_DEVICE_CUDA, ordinal),
            Device::Other(kind, ordinal) => (kind, ordinal),
        }
    }
}

/// A CUDA stream (`cudaStream_t`) for the work a call enqueues, or the
/// default stream. The library ignores it on a CPU cache.
///
/// Every call that takes no stream uses [`Stream::DEFAULT`]; pass another
/// one through [`Cache::on`](crate::Cache::on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream(*mut c_void);

// SAFETY: a CUDA stream may be used from any host thread; the pointer is
// only handed to the library.
unsafe impl Send for Stream {}
// SAFETY: as above; a Stream is an immutable handle value.
unsafe impl Sync for Stream {}

impl Stream {
    /// The default stream (NULL).
    pub const DEFAULT: Stream = Stream(std::ptr::null_mut());

    /// Wraps a `cudaStream_t`.
    ///
    /// # Safety
    /// `stream` must be NULL or a valid CUDA stream of the device of every
    /// cache it is used with, and stay valid until the work enqueued on it
    /// through this value has completed.
    pub unsafe fn from_raw(stream: *mut c_void) -> Stream {
        Stream(stream)
    }

    /// The `cudaStream_t` as the C API takes it.
    pub fn as_raw(self) -> *mut c_void {
        self.0
    }
}

impl Default for Stream {
    fn default() -> Stream {
        Stream::DEFAULT
    }
}

/// Feature bits of the running library and machine (`kvc_features`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Features(pub u64);

impl Features {
    /// The library was built with the CUDA backend.
    pub fn cuda_compiled(self) -> bool {
        self.0 & u64::from(sys::KVC_FEATURE_CUDA_COMPILED) != 0
    }

    /// The CUDA backend is built and at least one CUDA device is usable.
    pub fn cuda_device(self) -> bool {
        self.0 & u64::from(sys::KVC_FEATURE_CUDA_DEVICE) != 0
    }

    /// The library was built with hiredis: a remote tier can be configured.
    pub fn redis(self) -> bool {
        self.0 & u64::from(sys::KVC_FEATURE_REDIS) != 0
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
    impl Sealed for f32 {}
}

/// A plain element type that host K/V, query and output slices may hold:
/// `f32` for f32 data, `u16` for the bits of f16 or bf16, `u8` for fp8 or
/// raw bytes. The kernels check the slices' byte lengths against the
/// shapes and the `Dtype` given with them.
pub trait Element: sealed::Sealed + Copy + 'static {}
impl Element for u8 {}
impl Element for u16 {}
impl Element for f32 {}

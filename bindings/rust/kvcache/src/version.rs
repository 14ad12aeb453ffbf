//! Version of the headers this crate was generated from and of the running
//! library.

use std::ffi::CStr;

use kvcache_sys as sys;

use crate::types::Features;

/// `MAJOR * 10000 + MINOR * 100 + PATCH` of the headers the bindings were
/// generated from (`KVC_VERSION_NUMBER`).
pub const HEADER_VERSION: u32 = sys::KVC_VERSION_NUMBER;

/// ABI major of the headers the bindings were generated from
/// (`KVC_ABI_VERSION`).
pub const HEADER_ABI_VERSION: u32 = sys::KVC_ABI_VERSION;

/// Version of the running library, `MAJOR * 10000 + MINOR * 100 + PATCH`
/// (`kvc_version`).
pub fn version() -> u32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::kvc_version() }
}

/// Version of the running library as `"MAJOR.MINOR.PATCH"`
/// (`kvc_version_string`).
pub fn version_string() -> &'static str {
    // SAFETY: returns a static NUL-terminated string owned by the library.
    let s = unsafe { CStr::from_ptr(sys::kvc_version_string()) };
    s.to_str().unwrap_or("")
}

/// ABI major of the running library, the N of `libkvcache.so.N`
/// (`kvc_abi_version`).
pub fn abi_version() -> u32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::kvc_abi_version() }
}

/// Feature bits of the running library and machine (`kvc_features`).
pub fn features() -> Features {
    // SAFETY: no arguments, no preconditions.
    Features(unsafe { sys::kvc_features() })
}

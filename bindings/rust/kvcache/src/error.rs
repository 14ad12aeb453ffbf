//! Errors: the status of the failing C call and the library's message.

use std::ffi::CStr;
use std::fmt;

use kvcache_sys as sys;

/// The status of a failed call (`kvc_status_t`), one variant per `KVC_ERR_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// `KVC_ERR_INVALID_ARGUMENT`: an argument is out of its domain.
    InvalidArgument,
    /// `KVC_ERR_NOT_FOUND`: no object with that id.
    NotFound,
    /// `KVC_ERR_ALREADY_EXISTS`: an object with that id exists.
    AlreadyExists,
    /// `KVC_ERR_OUT_OF_BLOCKS`: not enough free or evictable blocks.
    OutOfBlocks,
    /// `KVC_ERR_BUFFER_TOO_SMALL`: a caller buffer is too small.
    BufferTooSmall,
    /// `KVC_ERR_UNSUPPORTED`: valid, but not supported here.
    Unsupported,
    /// `KVC_ERR_DEVICE`: the device is missing or failed.
    Device,
    /// `KVC_ERR_OUT_OF_MEMORY`: an allocation failed.
    OutOfMemory,
    /// `KVC_ERR_INVALID_STATE`: not allowed in the object's state.
    InvalidState,
    /// `KVC_ERR_INTERNAL`: a bug in kvcache.
    Internal,
    /// A negative status this binding does not know (a newer library).
    Other(i32),
}

impl Status {
    /// The status of a C return value, `None` for `KVC_OK`.
    pub fn from_raw(code: sys::kvc_status_t) -> Option<Status> {
        Some(match code {
            sys::KVC_OK => return None,
            sys::KVC_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::KVC_ERR_NOT_FOUND => Status::NotFound,
            sys::KVC_ERR_ALREADY_EXISTS => Status::AlreadyExists,
            sys::KVC_ERR_OUT_OF_BLOCKS => Status::OutOfBlocks,
            sys::KVC_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::KVC_ERR_UNSUPPORTED => Status::Unsupported,
            sys::KVC_ERR_DEVICE => Status::Device,
            sys::KVC_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::KVC_ERR_INVALID_STATE => Status::InvalidState,
            sys::KVC_ERR_INTERNAL => Status::Internal,
            other => Status::Other(other),
        })
    }

    /// The C value (`KVC_ERR_*`, negative).
    pub fn code(self) -> sys::kvc_status_t {
        match self {
            Status::InvalidArgument => sys::KVC_ERR_INVALID_ARGUMENT,
            Status::NotFound => sys::KVC_ERR_NOT_FOUND,
            Status::AlreadyExists => sys::KVC_ERR_ALREADY_EXISTS,
            Status::OutOfBlocks => sys::KVC_ERR_OUT_OF_BLOCKS,
            Status::BufferTooSmall => sys::KVC_ERR_BUFFER_TOO_SMALL,
            Status::Unsupported => sys::KVC_ERR_UNSUPPORTED,
            Status::Device => sys::KVC_ERR_DEVICE,
            Status::OutOfMemory => sys::KVC_ERR_OUT_OF_MEMORY,
            Status::InvalidState => sys::KVC_ERR_INVALID_STATE,
            Status::Internal => sys::KVC_ERR_INTERNAL,
            Status::Other(code) => code,
        }
    }

    /// The library's static name of the status, e.g. `"KVC_ERR_NOT_FOUND"`
    /// (`kvc_status_string`).
    pub fn name(self) -> &'static str {
        // SAFETY: kvc_status_string returns a static, NUL-terminated string
        // for every value (never NULL).
        let name = unsafe { CStr::from_ptr(sys::kvc_status_string(self.code())) };
        name.to_str().unwrap_or("KVC_ERR_UNKNOWN")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed kvcache call: its status and the library's message, which names
/// the argument and the value at fault.
///
/// The message is read from `kvc_last_error_message()` inside the failing
/// call, on the same thread, right after the C function returned. Errors
/// found by this crate before calling C (a slice of the wrong length) carry
/// `Status::InvalidArgument` and a message written here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What kind of failure.
    pub status: Status,
    /// Why, in the library's words.
    pub message: String,
}

impl Error {
    /// An error with the given status and message.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    /// The error of a failed C call: `code` with the calling thread's last
    /// error message. Call it right after the failing C function returns.
    #[cold]
    #[inline(never)]
    pub(crate) fn last(code: sys::kvc_status_t) -> Error {
        // SAFETY: kvc_last_error_message never returns NULL; the string is
        // valid until the next kvcache call on this thread, and it is copied
        // before any other call.
        let message = unsafe { CStr::from_ptr(sys::kvc_last_error_message()) }
            .to_string_lossy()
            .into_owned();
        Error {
            status: Status::from_raw(code).unwrap_or(Status::Internal),
            message,
        }
    }

    /// An `InvalidArgument` error raised by this crate's own checks.
    #[cold]
    pub(crate) fn invalid(message: String) -> Error {
        Error::new(Status::InvalidArgument, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// The result of a kvcache call.
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a C status into a `Result`, reading the message of a failure at
/// once. Call it directly on the C call's return value.
#[inline(always)]
pub(crate) fn check(code: sys::kvc_status_t) -> Result<()> {
    if code == sys::KVC_OK {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}

//! The remote tier (`remote_tier.h`): a Redis (or Valkey) server that many
//! caches share, below the disk tier. Its statistics are
//! [`Cache::tier_stats`](crate::Cache::tier_stats) with
//! [`Tier::Remote`](crate::Tier::Remote).

use std::ffi::{CStr, CString};
use std::time::Duration;

use kvcache_sys as sys;

use crate::config::{Config, ConfigBuilder};
use crate::error::{check, Error, Result, Status};

fn c_string(value: &str, what: &str) -> Result<CString> {
    CString::new(value).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            &format!("remote cache {what} contains a NUL byte"),
        )
    })
}

/// Whole milliseconds, saturated: the library refuses what is out of its
/// range (0, or above 600000) with its own message.
fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// # Safety
/// `p` is a NUL-terminated string the config owns, read before it changes.
unsafe fn owned(p: *const std::os::raw::c_char) -> String {
    CStr::from_ptr(p).to_string_lossy().into_owned()
}

impl Config {
    /// Turns the remote tier on: the server at `url`
    /// (`redis://[user:password@]host[:port][/db]`, parsed now), keys under
    /// `key_namespace` (`None`: "kvc"), at most `bytes` of this cache's
    /// blocks; `url` `None` with `bytes` 0 turns it off
    /// (`kvc_config_set_remote_cache`). The server is reached when the
    /// cache is created.
    pub fn set_remote_cache(
        &mut self,
        url: Option<&str>,
        key_namespace: Option<&str>,
        bytes: u64,
    ) -> Result<()> {
        let url = url.map(|u| c_string(u, "URL")).transpose()?;
        let ns = key_namespace
            .map(|n| c_string(n, "key namespace"))
            .transpose()?;
        let url_ptr = url.as_ref().map_or(std::ptr::null(), |u| u.as_ptr());
        let ns_ptr = ns.as_ref().map_or(std::ptr::null(), |n| n.as_ptr());
        // SAFETY: live config, exclusively borrowed; the strings live for the
        // call and C copies them.
        check(unsafe {
            sys::kvc_config_set_remote_cache(self.as_mut_ptr(), url_ptr, ns_ptr, bytes)
        })
    }

    /// The remote tier's URL (`None` when off), key namespace and byte
    /// budget (`kvc_config_get_remote_cache`).
    pub fn remote_cache(&self) -> Result<(Option<String>, String, u64)> {
        let mut url = std::ptr::null();
        let mut ns = std::ptr::null();
        let mut bytes = 0;
        // SAFETY: live config, valid out pointers.
        check(unsafe {
            sys::kvc_config_get_remote_cache(self.as_ptr(), &mut url, &mut ns, &mut bytes)
        })?;
        // SAFETY: strings owned by the config, read before any change to it.
        let (url, ns) = unsafe { (owned(url), owned(ns)) };
        Ok(((!url.is_empty()).then_some(url), ns, bytes))
    }

    /// The remote tier's timeouts, whole milliseconds in 1..=600000:
    /// connecting, and a whole lookup or write batch
    /// (`kvc_config_set_remote_cache_timeouts`; defaults 1 s and 1 s).
    pub fn set_remote_cache_timeouts(
        &mut self,
        connect: Duration,
        command: Duration,
    ) -> Result<()> {
        // SAFETY: live config, exclusively borrowed.
        check(unsafe {
            sys::kvc_config_set_remote_cache_timeouts(
                self.as_mut_ptr(),
                millis(connect),
                millis(command),
            )
        })
    }

    /// The remote tier's connect and command timeouts
    /// (`kvc_config_get_remote_cache_timeouts`).
    pub fn remote_cache_timeouts(&self) -> Result<(Duration, Duration)> {
        let (mut connect, mut command) = (0u32, 0u32);
        // SAFETY: live config, valid out pointers.
        check(unsafe {
            sys::kvc_config_get_remote_cache_timeouts(self.as_ptr(), &mut connect, &mut command)
        })?;
        Ok((
            Duration::from_millis(u64::from(connect)),
            Duration::from_millis(u64::from(command)),
        ))
    }

    /// Whether the cache may be created while the server cannot be reached
    /// or refuses the credentials (the tier then connects later;
    /// `kvc_config_set_remote_cache_optional`, default false).
    pub fn set_remote_cache_optional(&mut self, optional: bool) -> Result<()> {
        // SAFETY: live config, exclusively borrowed.
        check(unsafe { sys::kvc_config_set_remote_cache_optional(self.as_mut_ptr(), optional) })
    }

    /// Whether the remote tier is optional (`kvc_config_get_remote_cache_optional`).
    pub fn remote_cache_optional(&self) -> Result<bool> {
        let mut out = false;
        // SAFETY: live config, valid out pointer.
        check(unsafe { sys::kvc_config_get_remote_cache_optional(self.as_ptr(), &mut out) })?;
        Ok(out)
    }
}

impl ConfigBuilder {
    /// The remote tier. See [`Config::set_remote_cache`].
    pub fn remote_cache(self, url: &str, key_namespace: &str, bytes: u64) -> ConfigBuilder {
        let (url, ns) = (url.to_owned(), key_namespace.to_owned());
        self.apply(move |c| c.set_remote_cache(Some(&url), Some(&ns), bytes))
    }

    /// The remote tier's timeouts. See [`Config::set_remote_cache_timeouts`].
    pub fn remote_cache_timeouts(self, connect: Duration, command: Duration) -> ConfigBuilder {
        self.apply(move |c| c.set_remote_cache_timeouts(connect, command))
    }

    /// Whether the remote tier is optional. See
    /// [`Config::set_remote_cache_optional`].
    pub fn remote_cache_optional(self, optional: bool) -> ConfigBuilder {
        self.apply(move |c| c.set_remote_cache_optional(optional))
    }
}

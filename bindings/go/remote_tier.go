package kvcache

import (
	"time"

	"kvcache/kvc"
)

// The remote tier (include/kvcache/remote_tier.h): a Redis (or Valkey)
// server that many caches share, below the disk tier. Its statistics are
// Cache.TierStats(TierRemote).

// cString copies s, NUL-terminated, into C memory (0 for ""); free it with
// kvc.Kvcgo_buffer_free.
func cString(s string) uintptr {
	if s == "" {
		return 0
	}
	b := append([]byte(s), 0)
	return kvc.Kvcgo_buffer_new(&b[0], uint64(len(b)))
}

// goString copies the C string at address p ("" for 0).
func goString(p uintptr) string {
	n := kvc.Kvcgo_cstring_length(p)
	if n == 0 {
		return ""
	}
	b := make([]byte, n)
	kvc.Kvcgo_buffer_read(&b[0], p, n)
	return string(b)
}

// SetRemoteCache turns the remote tier on: the server at url
// ("redis://[user:password@]host[:port][/db]", parsed now), keys under
// keyNamespace ("" for the default "kvc"), at most bytes of this cache's
// blocks; url "" with bytes 0 turns it off. The server is reached when the
// cache is created (kvc_config_set_remote_cache).
func (c *Config) SetRemoteCache(url, keyNamespace string, bytes uint64) error {
	const op = "kvc_config_set_remote_cache"
	return c.with(op, func(h kvc.Config) error {
		u, ns := cString(url), cString(keyNamespace)
		defer kvc.Kvcgo_buffer_free(u)
		defer kvc.Kvcgo_buffer_free(ns)
		if (url != "" && u == 0) || (keyNamespace != "" && ns == 0) {
			return &Error{Status: StatusOutOfMemory, Message: "cannot copy the URL or namespace", Op: op}
		}
		return kvc.Kvc_config_set_remote_cache(h, u, ns, bytes)
	})
}

// RemoteCache is the remote tier's URL ("" when off), key namespace and
// byte budget.
func (c *Config) RemoteCache() (url, keyNamespace string, bytes uint64, err error) {
	err = c.with("kvc_config_get_remote_cache", func(h kvc.Config) error {
		var u, ns uintptr
		if e := kvc.Kvc_config_get_remote_cache(h, &u, &ns, &bytes); e != nil {
			return e
		}
		url, keyNamespace = goString(u), goString(ns)
		return nil
	})
	return url, keyNamespace, bytes, err
}

// millis is d in whole milliseconds, saturated: the library refuses what
// is out of its range (0, or above 600000) with its own message.
func millis(d time.Duration) uint32 {
	ms := d.Milliseconds()
	if ms < 0 {
		return 0
	}
	if ms > int64(^uint32(0)) {
		return ^uint32(0)
	}
	return uint32(ms)
}

// SetRemoteCacheTimeouts sets the remote tier's timeouts, whole
// milliseconds in 1..600000: connecting, and a whole lookup or write batch
// (kvc_config_set_remote_cache_timeouts; defaults 1 s and 1 s).
func (c *Config) SetRemoteCacheTimeouts(connect, command time.Duration) error {
	return c.with("kvc_config_set_remote_cache_timeouts", func(h kvc.Config) error {
		return kvc.Kvc_config_set_remote_cache_timeouts(h, millis(connect), millis(command))
	})
}

// RemoteCacheTimeouts are the remote tier's connect and command timeouts.
func (c *Config) RemoteCacheTimeouts() (connect, command time.Duration, err error) {
	err = c.with("kvc_config_get_remote_cache_timeouts", func(h kvc.Config) error {
		var co, cm uint32
		if e := kvc.Kvc_config_get_remote_cache_timeouts(h, &co, &cm); e != nil {
			return e
		}
		connect, command = time.Duration(co)*time.Millisecond, time.Duration(cm)*time.Millisecond
		return nil
	})
	return connect, command, err
}

// SetRemoteCacheOptional says whether the cache may be created while the
// server cannot be reached or refuses the credentials (the tier then
// connects later; kvc_config_set_remote_cache_optional, default false).
func (c *Config) SetRemoteCacheOptional(optional bool) error {
	return c.with("kvc_config_set_remote_cache_optional", func(h kvc.Config) error {
		return kvc.Kvc_config_set_remote_cache_optional(h, optional)
	})
}

// RemoteCacheOptional is whether the remote tier is optional.
func (c *Config) RemoteCacheOptional() (optional bool, err error) {
	err = c.with("kvc_config_get_remote_cache_optional", func(h kvc.Config) error {
		return kvc.Kvc_config_get_remote_cache_optional(h, &optional)
	})
	return optional, err
}

// RemoteCache is Config.SetRemoteCache.
func (b *ConfigBuilder) RemoteCache(url, keyNamespace string, bytes uint64) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetRemoteCache(url, keyNamespace, bytes) })
}

// RemoteCacheTimeouts is Config.SetRemoteCacheTimeouts.
func (b *ConfigBuilder) RemoteCacheTimeouts(connect, command time.Duration) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetRemoteCacheTimeouts(connect, command) })
}

// RemoteCacheOptional is Config.SetRemoteCacheOptional.
func (b *ConfigBuilder) RemoteCacheOptional(optional bool) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetRemoteCacheOptional(optional) })
}

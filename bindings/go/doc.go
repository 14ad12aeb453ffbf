// Package kvcache is the Go binding of kvcache, the KV-cache system of an
// LLM inference engine (libkvcache.so behind a stable C ABI).
//
// It sits on package kvcache/kvc, the low-level layer SWIG generates from
// the public C headers, and adds what Go code expects:
//
//   - Handles close deterministically: a *Config and a *Cache own C memory
//     (a cache owns its whole block pool) and MUST be closed with Close.
//     There are no finalizers. Close is idempotent, and every method called
//     after Close returns an error (ErrClosed) instead of crashing.
//   - Every failure is an *Error carrying the kvc_status_t (Status) and the
//     library's message, which names the argument and value at fault. The
//     message is read inside the same C call that failed, so it is right
//     even though goroutines move between OS threads.
//   - Tables (block ids, padded and CSR block tables, slot mappings,
//     sequence lengths) come back as Go slices.
//
// A *Cache may be used from any number of goroutines at once (the library
// serializes calls on one cache). A *Config is guarded too, but, as in C, it
// is meant to be filled by one goroutine.
//
// cgo finds the library with pkg-config (`#cgo pkg-config: kvcache`): set
// PKG_CONFIG_PATH to an installed kvcache's lib/pkgconfig, or to a build
// folder (kvcache-uninstalled.pc, which adds an rpath).
package kvcache

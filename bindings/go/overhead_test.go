package kvcache_test

import (
	"errors"
	"runtime"
	"testing"

	"kvcache"
	"kvcache/internal/cbench"
	"kvcache/kvc"
)

// BenchmarkOverhead times cheap calls three ways in one run: from C (the
// loop runs in C: the floor), through the SWIG layer (package kvc: cgo and
// the generated wrappers) and through package kvcache (plus the handle
// guard and error wrapping). The difference to C is the binding's per-call
// overhead.
//
// Besides Go's wall-clock ns/op, each variant reports cpu-ns/op: the CPU
// time of its (locked) OS thread per call, which leaves out the time the
// thread waits for a core on a shared machine.
//
//	go test -run '^$' -bench Overhead -benchtime 2000000x -count 5
func BenchmarkOverhead(b *testing.B) {
	cfg := newConfig(b, 4096)
	defer cfg.Close()
	cache, err := kvcache.NewCache(cfg)
	must(b, err)
	defer cache.Close()
	_, err = cache.AddSequence(1, tokens(0, 100), nil, 0)
	must(b, err)

	// The same state through the low-level layer, for kvc and C.
	var lcfg kvc.Config
	must(b, kvc.Kvc_config_create(&lcfg))
	defer kvc.Kvc_config_destroy(lcfg)
	for _, err := range []error{
		kvc.Kvc_config_set_num_layers(lcfg, 2), kvc.Kvc_config_set_kv_heads(lcfg, 2),
		kvc.Kvc_config_set_head_dim(lcfg, 64), kvc.Kvc_config_set_dtype(lcfg, uint32(kvcache.DTypeF32)),
		kvc.Kvc_config_set_tokens_per_block(lcfg, 4), kvc.Kvc_config_set_max_tokens(lcfg, 4096),
	} {
		must(b, err)
	}
	var lcache kvc.Cache
	must(b, kvc.Kvc_cache_create(lcfg, &lcache))
	defer kvc.Kvc_cache_destroy(lcache)
	prompt := tokens(0, 100)
	var cached uint64
	must(b, kvc.Kvc_sequence_add(lcache, 1, &prompt[0], uint64(len(prompt)), nil, 0, &cached))

	cLoop := func(b *testing.B, loop func(n uint64) uint64) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b.ResetTimer()
		ns := loop(uint64(b.N))
		b.StopTimer()
		if ns == 0 && b.N > 0 {
			b.Fatal("the C loop failed")
		}
		b.ReportMetric(float64(ns)/float64(b.N), "cpu-ns/op")
	}
	goLoop := func(b *testing.B, body func(n int)) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b.ResetTimer()
		t0 := cbench.ThreadCPUNanos()
		body(b.N)
		t1 := cbench.ThreadCPUNanos()
		b.StopTimer()
		b.ReportMetric(float64(t1-t0)/float64(b.N), "cpu-ns/op")
	}

	b.Run("version/C", func(b *testing.B) { cLoop(b, cbench.Version) })
	var sink uint32
	b.Run("version/kvc", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				sink += kvc.Kvc_version()
			}
		})
	})
	b.Run("version/kvcache", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				sink += kvcache.Version()
			}
		})
	})

	b.Run("config_get_num_layers/C", func(b *testing.B) {
		cLoop(b, func(n uint64) uint64 { return cbench.ConfigGetNumLayers(uintptr(lcfg), n) })
	})
	b.Run("config_get_num_layers/kvc", func(b *testing.B) {
		goLoop(b, func(n int) {
			var v uint32
			for i := 0; i < n; i++ {
				if err := kvc.Kvc_config_get_num_layers(lcfg, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("config_get_num_layers/kvcache", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				if _, err := cfg.NumLayers(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})

	b.Run("sequence_blocks_needed/C", func(b *testing.B) {
		cLoop(b, func(n uint64) uint64 { return cbench.BlocksNeeded(uintptr(lcache), 1, n) })
	})
	b.Run("sequence_blocks_needed/kvc", func(b *testing.B) {
		goLoop(b, func(n int) {
			var v uint64
			for i := 0; i < n; i++ {
				if err := kvc.Kvc_sequence_blocks_needed(lcache, 1, 1, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("sequence_blocks_needed/kvcache", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				if _, err := cache.BlocksNeeded(1, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	})

	// The error path: the C caller reads the message; the binding copies it
	// out inside the failing call and builds an *Error.
	b.Run("sequence_blocks_needed_error/C", func(b *testing.B) {
		cLoop(b, func(n uint64) uint64 { return cbench.BlocksNeededError(uintptr(lcache), 99, n) })
	})
	b.Run("sequence_blocks_needed_error/kvc", func(b *testing.B) {
		goLoop(b, func(n int) {
			var v uint64
			for i := 0; i < n; i++ {
				if err := kvc.Kvc_sequence_blocks_needed(lcache, 99, 1, &v); err == nil {
					b.Fatal("no error")
				}
			}
		})
	})
	b.Run("sequence_blocks_needed_error/kvcache", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				if _, err := cache.BlocksNeeded(99, 1); !errors.Is(err, kvcache.ErrNotFound) {
					b.Fatal(err)
				}
			}
		})
	})
}

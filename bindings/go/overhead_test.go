package kvcache_test

import (
	"errors"
	"runtime"
	"testing"

	"kvcache"
	"kvcache/internal/cbench"
	"kvcache/kvc"
)

// BenchmarkOverhead times cheap calls (and calls returning a struct or a
// table) three ways in one run: from C (the
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
	// Sequences 2..4 (other prompts) for the block table.
	tableIDs := []uint64{1, 2, 3, 4}
	for _, id := range tableIDs[1:] {
		p := tokens(int(id)*1000, 100)
		must(b, kvc.Kvc_sequence_add(lcache, id, &p[0], uint64(len(p)), nil, 0, &cached))
		_, err = cache.AddSequence(id, p, nil, 0)
		must(b, err)
	}

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

	// Calls that return a struct. The kvc path is the SWIG layer member by
	// member (a cgo call per member, and three for the struct's life): what
	// package kvcache did before results.go; kvcache now copies the struct in
	// one cgo call.
	var sink64 uint64
	b.Run("cache_get_stats/C", func(b *testing.B) {
		cLoop(b, func(n uint64) uint64 { return cbench.GetStats(uintptr(lcache), n) })
	})
	b.Run("cache_get_stats/kvc", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				s := kvc.NewKvc_cache_stats_t()
				kvc.Kvc_cache_stats_init(s)
				if err := kvc.Kvc_cache_get_stats(lcache, s); err != nil {
					b.Fatal(err)
				}
				sink64 += s.GetNum_blocks() + s.GetFree_blocks() + s.GetCached_blocks() + s.GetIn_use_blocks() +
					s.GetReused_blocks() + s.GetMissed_blocks() + uint64(s.GetHit_rate()) + s.GetEvicted_blocks() +
					s.GetNum_sequences() + s.GetNum_pinned() + s.GetTree_nodes() + s.GetOffloaded_blocks() +
					s.GetOnboarded_blocks() + s.GetOffloaded_bytes() + s.GetOnboarded_bytes() + s.GetHost_blocks() +
					s.GetHost_free_blocks() + s.GetHost_cached_blocks()
				kvc.DeleteKvc_cache_stats_t(s)
			}
		})
	})
	b.Run("cache_get_stats/kvcache", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				s, err := cache.Stats()
				if err != nil {
					b.Fatal(err)
				}
				sink64 += s.NumBlocks
			}
		})
	})

	b.Run("cache_describe/C", func(b *testing.B) {
		cLoop(b, func(n uint64) uint64 { return cbench.Describe(uintptr(lcache), n) })
	})
	b.Run("cache_describe/kvc", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				d := kvc.NewKvc_cache_desc_t()
				kvc.Kvc_cache_desc_init(d)
				if err := kvc.Kvc_cache_describe(lcache, d); err != nil {
					b.Fatal(err)
				}
				sink64 += uint64(d.GetDevice_kind()) + uint64(d.GetDevice_ordinal()) + uint64(d.GetDtype()) +
					uint64(d.GetLayout()) + uint64(d.GetNum_layers()) + uint64(d.GetNum_groups()) +
					uint64(d.GetNum_pools()) + uint64(d.GetTokens_per_block()) + uint64(d.GetKv_factor()) +
					d.GetNum_blocks() + d.GetToken_capacity() + d.GetPrimary_bytes() + d.GetHost_cache_bytes() +
					d.GetDevice_free_bytes() + d.GetDevice_total_bytes()
				kvc.DeleteKvc_cache_desc_t(d)
			}
		})
	})
	b.Run("cache_describe/kvcache", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				d, err := cache.Describe()
				if err != nil {
					b.Fatal(err)
				}
				sink64 += d.NumBlocks
			}
		})
	})

	b.Run("cache_layer_view/C", func(b *testing.B) {
		cLoop(b, func(n uint64) uint64 { return cbench.LayerView(uintptr(lcache), n) })
	})
	b.Run("cache_layer_view/kvc", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				v := kvc.NewKvc_layer_view_t()
				kvc.Kvc_layer_view_init(v)
				if err := kvc.Kvc_cache_layer_view(lcache, 1, v); err != nil {
					b.Fatal(err)
				}
				sink64 += uint64(v.GetGroup()) + uint64(v.GetPool()) + uint64(v.GetDtype()) + uint64(v.GetLayout()) +
					uint64(v.GetKv_heads()) + uint64(v.GetHead_dim()) + uint64(v.GetTokens_per_block()) +
					uint64(v.GetKv_factor()) + uint64(v.GetElem_size()) + uint64(v.GetBase()) + v.GetNum_blocks() +
					v.GetBlock_stride() + v.GetKv_stride() + v.GetToken_stride() + v.GetHead_stride()
				kvc.DeleteKvc_layer_view_t(v)
			}
		})
	})
	b.Run("cache_layer_view/kvcache", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				v, err := cache.LayerView(1)
				if err != nil {
					b.Fatal(err)
				}
				sink64 += v.BlockStride
			}
		})
	})

	b.Run("sequence_describe/C", func(b *testing.B) {
		cLoop(b, func(n uint64) uint64 { return cbench.SequenceDescribe(uintptr(lcache), 1, n) })
	})
	b.Run("sequence_describe/kvc", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				d := kvc.NewKvc_sequence_desc_t()
				kvc.Kvc_sequence_desc_init(d)
				if err := kvc.Kvc_sequence_describe(lcache, 1, d); err != nil {
					b.Fatal(err)
				}
				sink64 += uint64(d.GetPrompt_priority()) + uint64(d.GetDecode_priority()) + d.GetNum_tokens() +
					d.GetPrompt_tokens() + d.GetCached_tokens() + d.GetCommitted_tokens() + d.GetNum_blocks()
				kvc.DeleteKvc_sequence_desc_t(d)
			}
		})
	})
	b.Run("sequence_describe/kvcache", func(b *testing.B) {
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				d, err := cache.DescribeSequence(1)
				if err != nil {
					b.Fatal(err)
				}
				sink64 += d.NumTokens
			}
		})
	})

	// A table: the padded block table of 4 sequences of 100 tokens (25
	// blocks each) into a caller buffer; one C call on every path.
	b.Run("batch_block_table_4x25/C", func(b *testing.B) {
		cLoop(b, func(n uint64) uint64 { return cbench.BlockTable(uintptr(lcache), tableIDs, 25, n) })
	})
	b.Run("batch_block_table_4x25/kvc", func(b *testing.B) {
		table := make([]int32, 4*25)
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				var needed uint64
				if err := kvc.Kvc_batch_block_table(lcache, 0, &tableIDs[0], 4, &table[0], 25, -1, &needed); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("batch_block_table_4x25/kvcache", func(b *testing.B) {
		table := make([]int32, 4*25)
		goLoop(b, func(n int) {
			for i := 0; i < n; i++ {
				if _, _, err := cache.BlockTableInto(table, 0, tableIDs, 25, -1); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	_ = sink64

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

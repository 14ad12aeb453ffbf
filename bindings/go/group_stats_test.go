package kvcache_test

import (
	"errors"
	"testing"

	"kvcache"
)

// newWindowedCache has 2 layers with windows {0, 32}: group 0 full, group 1
// windowed, one pool of 128 blocks of 16 tokens.
func newWindowedCache(t *testing.T) *kvcache.Cache {
	t.Helper()
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	for _, err := range []error{
		cfg.SetNumLayers(2),
		cfg.SetAttentionWindows([]uint32{0, 32}),
		cfg.SetKVHeads(2),
		cfg.SetHeadDim(8),
		cfg.SetDType(kvcache.DTypeF32),
		cfg.SetTokensPerBlock(16),
		cfg.SetMaxTokens(1024),
	} {
		must(t, err)
	}
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGroupStatsOfAWindowedGroup(t *testing.T) {
	c := newWindowedCache(t)
	// want checks a group's counts (in use, cached, reused, missed,
	// evicted, released) and that the groups add up to the cache.
	want := func(step string, free uint64, groups ...[6]uint64) {
		t.Helper()
		st := stats(t, c)
		var inUse, cached uint64
		for g, w := range groups {
			s, err := c.GroupStats(uint32(g))
			must(t, err)
			got := [6]uint64{s.InUseBlocks, s.CachedBlocks, s.ReusedBlocks, s.MissedBlocks, s.EvictedBlocks, s.ReleasedBlocks}
			if got != w || s.Pool != 0 || s.PoolFreeBlocks != free {
				t.Errorf("%s: group %d: %+v, want counts %v, pool 0, %d free", step, g, s, w, free)
			}
			inUse += s.InUseBlocks
			cached += s.CachedBlocks
		}
		if st.FreeBlocks != free || st.InUseBlocks != inUse || st.CachedBlocks != cached {
			t.Errorf("%s: cache stats %+v do not add up to the groups' (%d in use, %d cached, %d free)", step, st, inUse, cached, free)
		}
	}
	prompt := tokens(1000, 128)
	if n := mustU64(t)(c.AddSequence(1, prompt, nil, 0)); n != 0 {
		t.Fatalf("AddSequence: %d cached", n)
	}
	want("added", 112, [6]uint64{8, 0, 0, 8, 0, 0}, [6]uint64{8, 0, 0, 8, 0, 0})
	// Token 128 attends to tokens 97..128: blocks 6 and 7 stay, 0..5 are
	// released and stay cached.
	must(t, c.CommitSequence(1, 128))
	want("committed", 112, [6]uint64{8, 0, 0, 8, 0, 0}, [6]uint64{2, 6, 0, 8, 0, 6})
	must(t, c.RemoveSequence(1))
	want("removed", 112, [6]uint64{0, 8, 0, 8, 0, 0}, [6]uint64{0, 8, 0, 8, 0, 6})
	// Reuse: the windowed group reuses only blocks 6 and 7.
	if n := mustU64(t)(c.AddSequence(2, prompt, nil, 0)); n != 127 {
		t.Fatalf("AddSequence again: %d cached, want 127", n)
	}
	want("reused", 110, [6]uint64{8, 1, 8, 8, 0, 0}, [6]uint64{2, 7, 2, 8, 0, 6})
	must(t, c.Check())
}

func TestGroupStatsErrors(t *testing.T) {
	c := newWindowedCache(t)
	_, err := c.GroupStats(2)
	var kerr *kvcache.Error
	if !errors.Is(err, kvcache.ErrInvalidArgument) || !errors.As(err, &kerr) ||
		kerr.Message != "group must be < num_groups (2), got 2" || kerr.Op != "kvc_cache_get_group_stats" {
		t.Errorf("GroupStats(2): %v", err)
	}
	c.Close()
	if _, err := c.GroupStats(0); !errors.Is(err, kvcache.ErrClosed) {
		t.Errorf("GroupStats after Close: %v", err)
	}
}

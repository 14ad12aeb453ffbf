package kvcache_test

import (
	"testing"

	"kvcache"
)

// A 4-block cache with a host tier of 4 block sets: a cached prompt is
// offloaded when another one needs the room and onboarded when it comes
// back; the statistics count both ways.
func TestHostTierOffloadAndOnboard(t *testing.T) {
	const setBytes = 2 * 2 * 4 * 2 * 64 * 4 // layers x K,V x tokens x heads x dims x f32
	c := newCache(t, 16, func(cfg *kvcache.Config) {
		must(t, cfg.SetHostCacheBytes(4*setBytes+1))
		must(t, cfg.SetPartialReuse(false))
	})
	d, err := c.Describe()
	must(t, err)
	if d.HostCacheBytes != 4*setBytes {
		t.Errorf("HostCacheBytes = %d, want %d (whole block sets)", d.HostCacheBytes, 4*setBytes)
	}
	first := tokens(0, 9) // two full blocks and a tail
	_, err = c.AddSequence(1, first, nil, 0)
	must(t, err)
	must(t, c.CommitSequence(1, 9))
	must(t, c.RemoveSequence(1))

	_, err = c.AddSequence(2, tokens(100, 13), nil, 0) // takes all four blocks
	must(t, err)
	s, err := c.Stats()
	must(t, err)
	if s.OffloadedBlocks != 2 || s.OffloadedBytes != 2*setBytes || s.EvictedBlocks != 0 {
		t.Errorf("after eviction: %+v", s)
	}
	if s.HostBlocks != 4 || s.HostCachedBlocks != 2 || s.HostFreeBlocks != 2 {
		t.Errorf("host tier: %+v", s)
	}
	must(t, c.RemoveSequence(2))

	cached, err := c.AddSequence(3, first, nil, 0)
	must(t, err)
	if cached != 8 {
		t.Errorf("cached = %d, want 8", cached)
	}
	s, err = c.Stats()
	must(t, err)
	if s.OnboardedBlocks != 2 || s.OnboardedBytes != 2*setBytes || s.HostCachedBlocks != 0 || s.ReusedBlocks != 2 {
		t.Errorf("after the hit: %+v", s)
	}
	must(t, c.Check())
}

// MakeRoom evicts ahead: the cached prompt goes to the host tier before an
// add needs its blocks, and comes back on a hit.
func TestMakeRoomEvictsAheadIntoTheHostTier(t *testing.T) {
	const setBytes = 2 * 2 * 4 * 2 * 64 * 4
	c := newCache(t, 16, func(cfg *kvcache.Config) {
		must(t, cfg.SetHostCacheBytes(4*setBytes))
		must(t, cfg.SetPartialReuse(false))
	})
	first := tokens(0, 9)
	_, err := c.AddSequence(1, first, nil, 0)
	must(t, err)
	must(t, c.CommitSequence(1, 9))
	must(t, c.RemoveSequence(1)) // 2 cached, 2 free
	for _, want := range []struct{ ask, free uint64 }{{0, 2}, {4, 4}, {100, 4}} {
		free, err := c.MakeRoom(want.ask, 0)
		must(t, err)
		if free != want.free {
			t.Errorf("MakeRoom(%d) = %d, want %d", want.ask, free, want.free)
		}
	}
	s, err := c.Stats()
	must(t, err)
	if s.FreeBlocks != 4 || s.CachedBlocks != 0 || s.OffloadedBlocks != 2 {
		t.Errorf("after MakeRoom: %+v", s)
	}
	cached, err := c.AddSequence(2, first, nil, 0)
	must(t, err)
	if cached != 8 {
		t.Errorf("cached = %d, want 8 (onboarded)", cached)
	}
	var nilCache *kvcache.Cache
	if _, err := nilCache.MakeRoom(1, 0); err == nil {
		t.Error("MakeRoom on a nil cache: no error")
	}
	must(t, c.Check())
}

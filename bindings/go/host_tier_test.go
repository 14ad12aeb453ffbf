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

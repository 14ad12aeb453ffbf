package kvcache_test

import (
	"errors"
	"strings"
	"testing"

	"kvcache"
)

// The disk tier through the Go API: the setting and its errors, blocks
// evicted to the disk and loaded back, a new cache on the directory finding
// them, the per-tier statistics.
func TestDiskTierSettingAndErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := newConfig(t, 16)
	defer cfg.Close()
	d, n, err := cfg.DiskCache()
	must(t, err)
	if d != "" || n != 0 {
		t.Errorf("default disk cache = %q, %d", d, n)
	}
	must(t, cfg.SetDiskCache(dir, 4096))
	d, n, err = cfg.DiskCache()
	must(t, err)
	if d != dir || n != 4096 {
		t.Errorf("disk cache = %q, %d", d, n)
	}
	err = cfg.SetDiskCache(dir, 0)
	if !errors.Is(err, kvcache.ErrInvalidArgument) || !strings.Contains(err.Error(), "disk cache bytes must be > 0") {
		t.Errorf("bytes 0: %v", err)
	}
	must(t, cfg.SetDiskCache(dir+"/missing", 1<<20))
	if _, err := kvcache.NewCache(cfg); !errors.Is(err, kvcache.ErrInvalidArgument) || !strings.Contains(err.Error(), "cannot be used") {
		t.Errorf("missing directory: %v", err)
	}
	must(t, cfg.SetDiskCache("", 0))
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	defer c.Close()
	if _, err := c.TierStats(kvcache.TierDisk); !errors.Is(err, kvcache.ErrNotFound) {
		t.Errorf("no disk tier: %v", err)
	}
	if _, err := c.TierStats(kvcache.TierHost); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("host tier: %v", err)
	}
	must(t, c.FlushTiers())
	if kvcache.TierDisk.String() != "disk" || kvcache.TierRemote.String() != "remote" {
		t.Errorf("names: %v %v", kvcache.TierDisk, kvcache.TierRemote)
	}
}

func TestDiskTierRoundTripAndRestart(t *testing.T) {
	dir := t.TempDir()
	tweak := func(cfg *kvcache.Config) {
		must(t, cfg.SetPartialReuse(false))
		must(t, cfg.SetDiskCache(dir, 1<<20))
	}
	cachePrompt := func(c *kvcache.Cache, id uint64, p []int32) uint64 {
		cached, err := c.AddSequence(id, p, nil, 0)
		must(t, err)
		must(t, c.CommitSequence(id, uint64(len(p))))
		must(t, c.RemoveSequence(id))
		return cached
	}
	a := tokens(100, 13) // 3 full blocks + 1 token
	c := newCache(t, 16, tweak)
	cachePrompt(c, 1, a)
	cachePrompt(c, 2, tokens(500, 16)) // a to the disk
	must(t, c.FlushTiers())
	s, err := c.TierStats(kvcache.TierDisk)
	must(t, err)
	if s.Tier != kvcache.TierDisk || s.OfferedBlocks != 7 || s.StoredBlocks != 7 || s.Blocks != 7 ||
		s.CapacityBytes != 1<<20 || s.DroppedBlocks != 0 || s.WriteCount != 7 {
		t.Errorf("after eviction: %+v", s)
	}
	if got := cachePrompt(c, 3, a); got != 12 {
		t.Errorf("cached = %d, want 12", got)
	}
	s, err = c.TierStats(kvcache.TierDisk)
	must(t, err)
	if s.OnboardedBlocks != 3 || s.Hits != 3 || s.Rejected != 0 || s.LoadCount == 0 {
		t.Errorf("after the hit: %+v", s)
	}
	must(t, c.Check())
	must(t, c.Close())

	c2 := newCache(t, 16, tweak)
	if got := cachePrompt(c2, 1, a); got != 12 {
		t.Errorf("after a restart: cached = %d, want 12", got)
	}
}

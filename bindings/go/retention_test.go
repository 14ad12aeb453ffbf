package kvcache_test

import (
	"errors"
	"strings"
	"testing"

	"kvcache"
)

// keptAfter caches prompt A at priority 80 for 100 ms, then B at 35
// (released later), advances the manual clock by elapsed ms and adds a
// two-block prompt to a three-block cache, which evicts one of them. It
// returns the tokens of A and of B still cached.
func keptAfter(t *testing.T, elapsed uint64) (uint64, uint64) {
	c := newCache(t, 12, func(cfg *kvcache.Config) {
		must(t, cfg.SetPartialReuse(false))
		must(t, cfg.SetManualClock(true))
		if on, err := cfg.ManualClock(); err != nil || !on {
			t.Fatalf("ManualClock() = %v, %v", on, err)
		}
	})
	cacheBlock := func(id uint64, first int, o *kvcache.SequenceOptions) {
		_, err := c.AddSequence(id, tokens(first, 5), o, 0)
		must(t, err)
		must(t, c.CommitSequence(id, 5))
		must(t, c.RemoveSequence(id))
	}
	cacheBlock(1, 0, &kvcache.SequenceOptions{RetentionRanges: []kvcache.RetentionRange{
		{Start: 0, End: kvcache.RetentionOpenEnd, Priority: 80, DurationMs: 100}}})
	cacheBlock(2, 100, nil)
	must(t, c.AdvanceClock(elapsed))
	_, err := c.AddSequence(3, tokens(200, 8), nil, 0)
	must(t, err)
	return mustU64(t)(c.Probe(tokens(0, 5), nil)), mustU64(t)(c.Probe(tokens(100, 5), nil))
}

func TestRetentionExpiryChangesTheVictim(t *testing.T) {
	if a, b := keptAfter(t, 99); a != 4 || b != 0 {
		t.Errorf("at 99 ms: A %d, B %d cached, want 4, 0", a, b)
	}
	if a, b := keptAfter(t, 100); a != 0 || b != 4 {
		t.Errorf("at 100 ms: A %d, B %d cached, want 0, 4", a, b)
	}
}

func TestRetentionErrors(t *testing.T) {
	c := newCache(t, 32, nil)
	_, err := c.AddSequence(1, tokens(0, 10), &kvcache.SequenceOptions{
		RetentionRanges:  []kvcache.RetentionRange{{Start: 0, End: 64, Priority: 80}, {Start: 32, End: 96, Priority: 50}},
		DecodeDurationMs: 5}, 0)
	if !errors.Is(err, kvcache.ErrInvalidArgument) || !strings.Contains(err.Error(), "[32, 96) overlaps") {
		t.Errorf("overlapping ranges: %v", err)
	}
	if err := c.AdvanceClock(1); !errors.Is(err, kvcache.ErrInvalidState) {
		t.Errorf("AdvanceClock on the monotonic clock: %v", err)
	}
}

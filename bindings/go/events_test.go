package kvcache_test

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"

	"kvcache"
	"kvcache/kvc"
)

func TestEventConstants(t *testing.T) {
	for _, tc := range []struct{ got, want int }{
		{int(kvcache.EventStored), int(kvc.KVC_EVENT_STORED)},
		{int(kvcache.EventRemoved), int(kvc.KVC_EVENT_REMOVED)},
		{int(kvcache.EventTierChanged), int(kvc.KVC_EVENT_TIER_CHANGED)},
		{int(kvcache.EventPriorityChanged), int(kvc.KVC_EVENT_PRIORITY_CHANGED)},
		{int(kvcache.EventCleared), int(kvc.KVC_EVENT_CLEARED)},
		{int(kvcache.EventLost), int(kvc.KVC_EVENT_LOST)},
		{int(kvcache.TierPrimary), int(kvc.KVC_TIER_PRIMARY)},
		{int(kvcache.TierHost), int(kvc.KVC_TIER_HOST)},
	} {
		if tc.got != tc.want {
			t.Errorf("Go %d, C %d", tc.got, tc.want)
		}
	}
	if s := kvcache.EventLost.String(); s != "LOST" {
		t.Errorf("EventLost.String() = %q", s)
	}
}

// index is a router's view of one cache, fed only by events (and snapshots).
type index map[uint64]kvcache.SnapshotEntry

func (ix index) apply(t *testing.T, events []kvcache.Event) {
	t.Helper()
	for _, e := range events {
		switch e.Kind {
		case kvcache.EventStored:
			entry, ok := ix[e.Hash]
			if !ok {
				entry = kvcache.SnapshotEntry{Hash: e.Hash, ParentHash: e.ParentHash, Tier: e.Tier,
					Priority: e.Priority, NumTokens: e.NumTokens, HasLoRA: e.HasLoRA, LoRAID: e.LoRAID}
			}
			entry.Groups |= e.Groups
			ix[e.Hash] = entry
		case kvcache.EventRemoved:
			entry, ok := ix[e.Hash]
			if !ok {
				t.Fatalf("event %d removes %#x, which is not indexed", e.ID, e.Hash)
			}
			entry.Groups &^= e.Groups
			if entry.Groups == 0 {
				delete(ix, e.Hash)
			} else {
				ix[e.Hash] = entry
			}
		case kvcache.EventTierChanged:
			entry := ix[e.Hash]
			entry.Tier, entry.Groups, entry.Priority = e.Tier, e.Groups, e.Priority
			ix[e.Hash] = entry
		case kvcache.EventPriorityChanged:
			entry := ix[e.Hash]
			entry.Priority = e.Priority
			ix[e.Hash] = entry
		case kvcache.EventCleared:
			for h := range ix {
				delete(ix, h)
			}
		case kvcache.EventLost:
			t.Fatalf("unexpected LOST event %+v", e)
		default:
			t.Fatalf("unknown event kind %v", e.Kind)
		}
	}
}

func fromSnapshot(s kvcache.Snapshot) index {
	ix := index{}
	for _, e := range s.Entries {
		ix[e.Hash] = e
	}
	return ix
}

// checkIndex fails unless ix holds exactly the cache's snapshot.
func checkIndex(t *testing.T, c *kvcache.Cache, ix index) {
	t.Helper()
	s, err := c.Snapshot()
	must(t, err)
	if len(s.Entries) != len(ix) {
		t.Fatalf("snapshot has %d entries, the index %d", len(s.Entries), len(ix))
	}
	if want := fromSnapshot(s); !reflect.DeepEqual(want, ix) {
		t.Fatalf("index differs from the snapshot:\n got %v\nwant %v", ix, want)
	}
}

func drain(t *testing.T, c *kvcache.Cache, withTokens bool) []kvcache.Event {
	t.Helper()
	events, err := c.DrainEvents(nil, withTokens)
	must(t, err)
	return events
}

func hashes(t *testing.T, cfg *kvcache.Config, prompt []int32, opts *kvcache.SequenceOptions) []uint64 {
	t.Helper()
	h, err := cfg.BlockHashes(prompt, opts)
	must(t, err)
	return h
}

// eventCache is a cache of 16 blocks of 4 tokens with an event ring of
// ring events; cfg stays open for BlockHashes.
func eventCache(t *testing.T, ring uint32) (*kvcache.Cache, *kvcache.Config) {
	t.Helper()
	cfg := newConfig(t, 64)
	t.Cleanup(func() { cfg.Close() })
	must(t, cfg.SetEventBufferSize(ring))
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return c, cfg
}

// The scripted scenario: STORED events carry the hashes BlockHashes gives
// for the same prompt and options (plain, salted, LoRA), their parents and
// tokens; eviction gives REMOVED, ResetReuse CLEARED; an index fed by the
// events equals the snapshot throughout.
func TestEventsScenario(t *testing.T) {
	c, cfg := eventCache(t, 1024)
	ix := index{}
	prompt := tokens(100, 12) // 3 full blocks
	var nextID uint64 = 1
	for i, opts := range []*kvcache.SequenceOptions{
		nil,
		{Salt: []byte("tenant-a")},
		{LoRA: kvcache.LoRA(7)},
	} {
		id := uint64(i + 1)
		_, err := c.AddSequence(id, prompt, opts, 0)
		must(t, err)
		must(t, c.CommitSequence(id, uint64(len(prompt))))
		events := drain(t, c, true)
		want := hashes(t, cfg, prompt, opts)
		if len(events) != 3 || len(want) != 3 {
			t.Fatalf("options %d: %d events, %d hashes, want 3 and 3: %+v", i, len(events), len(want), events)
		}
		for b, e := range events {
			parent := uint64(0)
			if b > 0 {
				parent = want[b-1]
			}
			lora := opts != nil && opts.LoRA != nil
			if e.ID != nextID || e.Kind != kvcache.EventStored || e.Hash != want[b] || e.ParentHash != parent ||
				e.Tier != kvcache.TierPrimary || e.Groups != 1 || e.NumTokens != 4 ||
				int(e.Priority) != kvcache.DefaultPriority || e.HasLoRA != lora || (lora && e.LoRAID != 7) ||
				!reflect.DeepEqual(e.Tokens, prompt[4*b:4*b+4]) || e.LostCount != 0 {
				t.Errorf("options %d block %d: %+v, want id %d hash %#x parent %#x", i, b, e, nextID, want[b], parent)
			}
			nextID++
		}
		ix.apply(t, events)
		checkIndex(t, c, ix)
	}
	// Scopes hash apart.
	plain, salted, lora := hashes(t, cfg, prompt, nil), hashes(t, cfg, prompt, &kvcache.SequenceOptions{Salt: []byte("tenant-a")}),
		hashes(t, cfg, prompt, &kvcache.SequenceOptions{LoRA: kvcache.LoRA(7)})
	if plain[0] == salted[0] || plain[0] == lora[0] || salted[0] == lora[0] {
		t.Errorf("scopes share hashes: %#x %#x %#x", plain[0], salted[0], lora[0])
	}
	if other := hashes(t, cfg, prompt, &kvcache.SequenceOptions{Salt: []byte("tenant-b")}); other[0] == salted[0] {
		t.Errorf("two salts share the hash %#x", other[0])
	}
	// Without tokens, STORED events carry none.
	for id := uint64(1); id <= 3; id++ {
		must(t, c.RemoveSequence(id))
	}
	_, err := c.AddSequence(4, tokens(500, 4), nil, 0)
	must(t, err)
	must(t, c.CommitSequence(4, 4))
	events := drain(t, c, false)
	if len(events) != 1 || events[0].Tokens != nil || events[0].Hash != hashes(t, cfg, tokens(500, 4), nil)[0] {
		t.Fatalf("drain without tokens: %+v", events)
	}
	ix.apply(t, events)
	nextID++
	must(t, c.RemoveSequence(4))

	// Eviction: a sequence needing every block evicts cached ones.
	big := tokens(1000, 64)
	_, err = c.AddSequence(5, big, nil, 0)
	must(t, err)
	events = drain(t, c, true)
	removed := 0
	for _, e := range events {
		if e.ID != nextID {
			t.Errorf("event id %d, want %d", e.ID, nextID)
		}
		nextID++
		if e.Kind == kvcache.EventRemoved {
			removed++
			if e.Tier != kvcache.TierPrimary || e.Groups != 1 {
				t.Errorf("REMOVED %+v", e)
			}
		}
	}
	if removed != 10 { // 9 + 1 cached blocks evicted for 16 blocks of 4 tokens
		t.Errorf("%d REMOVED events, want 10: %+v", removed, events)
	}
	ix.apply(t, events)
	checkIndex(t, c, ix)
	if len(ix) != 0 {
		t.Errorf("index holds %d blocks after evicting all", len(ix))
	}
	must(t, c.CommitSequence(5, 64))
	ix.apply(t, drain(t, c, false))
	checkIndex(t, c, ix)
	must(t, c.RemoveSequence(5))
	if len(ix) != 16 {
		t.Errorf("index holds %d blocks, want 16", len(ix))
	}

	// ResetReuse: one CLEARED event.
	must(t, c.ResetReuse())
	events = drain(t, c, true)
	if len(events) != 1 || events[0].Kind != kvcache.EventCleared || events[0].Hash != 0 {
		t.Fatalf("after ResetReuse: %+v", events)
	}
	ix.apply(t, events)
	checkIndex(t, c, ix)
	s, err := c.Snapshot()
	must(t, err)
	if len(s.Entries) != 0 || s.EventID != events[0].ID {
		t.Errorf("snapshot after reset: %+v, want empty at id %d", s, events[0].ID)
	}
	if more := drain(t, c, true); len(more) != 0 {
		t.Errorf("drained twice: %+v", more)
	}
}

// A ring of 4 events overflows: the drain starts with one LOST event naming
// the dropped ids; a snapshot and the events after it rebuild the index.
func TestEventsLostThenResync(t *testing.T) {
	c, cfg := eventCache(t, 4)
	prompt := tokens(7, 40) // 10 blocks: 10 STORED events, 6 dropped
	_, err := c.AddSequence(1, prompt, nil, 0)
	must(t, err)
	must(t, c.CommitSequence(1, 40))
	events := drain(t, c, true)
	if len(events) != 5 || events[0].Kind != kvcache.EventLost || events[0].ID != 1 || events[0].LostCount != 6 {
		t.Fatalf("want LOST(1, 6) then 4 events, got %+v", events)
	}
	want := hashes(t, cfg, prompt, nil)
	for i, e := range events[1:] {
		if e.Kind != kvcache.EventStored || e.ID != uint64(7+i) || e.Hash != want[6+i] {
			t.Errorf("event %d: %+v, want STORED id %d hash %#x", i+1, e, 7+i, want[6+i])
		}
	}
	// Resync: the snapshot as of its event id, then the events after it.
	s, err := c.Snapshot()
	must(t, err)
	if s.EventID != 10 || len(s.Entries) != 10 {
		t.Fatalf("snapshot at %d with %d entries, want 10 and 10", s.EventID, len(s.Entries))
	}
	for i, e := range s.Entries { // parents before children
		parent := uint64(0)
		if i > 0 {
			parent = want[i-1]
		}
		if e.Hash != want[i] || e.ParentHash != parent || e.NumTokens != 4 || e.Tier != kvcache.TierPrimary || e.Groups != 1 {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	ix := fromSnapshot(s)
	must(t, c.RemoveSequence(1))
	_, err = c.AddSequence(2, tokens(900, 32), nil, 0) // 8 blocks: evicts 2 of the 10
	must(t, err)
	events = drain(t, c, false)
	if len(events) != 2 || events[0].Kind != kvcache.EventRemoved || events[0].ID != s.EventID+1 {
		t.Fatalf("events after the snapshot: %+v", events)
	}
	ix.apply(t, events)
	checkIndex(t, c, ix)
	must(t, c.CommitSequence(2, 12)) // 3 STORED: they fit the ring
	ix.apply(t, drain(t, c, false))
	checkIndex(t, c, ix)
}

func TestEventsOffAndBadInput(t *testing.T) {
	off := newCache(t, 64, nil)
	if _, err := off.DrainEvents(nil, true); !errors.Is(err, kvcache.ErrUnsupported) {
		t.Errorf("DrainEvents with events off = %v, want ErrUnsupported", err)
	}
	if _, err := off.Snapshot(); !errors.Is(err, kvcache.ErrUnsupported) {
		t.Errorf("Snapshot with events off = %v, want ErrUnsupported", err)
	}
	cfg := newConfig(t, 64)
	defer cfg.Close()
	_, err := cfg.BlockHashes(tokens(0, 8), &kvcache.SequenceOptions{ExtraKeys: []kvcache.ExtraKey{{Offset: 0, Length: 0, Data: []byte("x")}}})
	var kerr *kvcache.Error
	if !errors.As(err, &kerr) || kerr.Status != kvcache.StatusInvalidArgument || kerr.Op != "kvc_block_hashes" || kerr.Message == "" {
		t.Errorf("BlockHashes with a zero-length extra key = %v, want ErrInvalidArgument with a message", err)
	}
	// Partial blocks have no hash; an empty prompt none at all.
	if h := hashes(t, cfg, tokens(0, 7), nil); len(h) != 1 {
		t.Errorf("7 tokens: %d hashes, want 1", len(h))
	}
	if h := hashes(t, cfg, nil, nil); len(h) != 0 {
		t.Errorf("no tokens: %d hashes", len(h))
	}
	// The seed changes every hash; equal seeds agree; Append reuses dst.
	a := hashes(t, cfg, tokens(0, 8), nil)
	must(t, cfg.SetEventHashSeed(42))
	b := hashes(t, cfg, tokens(0, 8), nil)
	if a[0] == b[0] || a[1] == b[1] {
		t.Errorf("seed 42 gives the hashes of seed 0: %x %x", a, b)
	}
	dst := make([]uint64, 1, 8)
	got, err := cfg.AppendBlockHashes(dst, tokens(0, 8), nil)
	must(t, err)
	if !reflect.DeepEqual(got, append([]uint64{0}, b...)) || &got[0] != &dst[0] {
		t.Errorf("AppendBlockHashes = %x (new array: %v)", got, &got[0] != &dst[0])
	}
	// Extra keys scope the blocks they overlap only.
	k := &kvcache.SequenceOptions{ExtraKeys: []kvcache.ExtraKey{{Offset: 4, Length: 2, Data: []byte("image")}}}
	if hk := hashes(t, cfg, tokens(0, 8), k); hk[0] != b[0] || hk[1] == b[1] {
		t.Errorf("extra key over block 1: %x, plain %x", hk, b)
	}
	closed := newConfig(t, 64)
	closed.Close()
	if _, err := closed.BlockHashes(tokens(0, 8), nil); !errors.Is(err, kvcache.ErrClosed) {
		t.Errorf("BlockHashes on a closed config = %v", err)
	}
}

// A goroutine drains while others serve: the index it keeps equals the
// snapshot once they are done (the C library serializes the calls).
func TestEventsDrainConcurrently(t *testing.T) {
	c, _ := eventCache(t, 1<<16)
	ix := index{}
	stop := make(chan struct{})
	done := make(chan []kvcache.Event)
	go func() {
		var all []kvcache.Event
		for {
			select {
			case <-stop:
				done <- all
				return
			default:
			}
			events, err := c.DrainEvents(nil, true)
			if err != nil {
				t.Error(err)
			}
			all = append(all, events...)
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				id := uint64(w*1000 + i)
				if _, err := c.AddSequence(id, tokens(i%7*8, 8+4*(i%3)), nil, 0); err != nil {
					if errors.Is(err, kvcache.ErrOutOfBlocks) {
						continue
					}
					t.Error(err)
					return
				}
				if err := c.CommitSequence(id, 8); err != nil {
					t.Error(err)
				}
				if err := c.RemoveSequence(id); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	all := <-done
	all = append(all, drain(t, c, true)...)
	ids := make([]uint64, len(all))
	for i, e := range all {
		ids[i] = e.ID
	}
	if !sort.SliceIsSorted(ids, func(i, j int) bool { return ids[i] < ids[j] }) || (len(ids) > 0 && (ids[0] != 1 || ids[len(ids)-1] != uint64(len(ids)))) {
		t.Fatalf("event ids are not 1..%d in order: %v", len(ids), fmt.Sprint(ids))
	}
	ix.apply(t, all)
	checkIndex(t, c, ix)
}

package main

import (
	"fmt"

	"kvcache"
)

// blockIndex is the router's view of one engine: the cached blocks by
// portable hash, fed only by the engine's drained events, and rebuilt from
// a snapshot when events were lost.
type blockIndex struct {
	blocks  map[uint64]kvcache.SnapshotEntry
	applied uint64    // the newest event id reflected in blocks
	resyncs int       // snapshots taken after a LOST event
	events  uint64    // events applied
	kinds   [7]uint64 // events applied by kind (kvcache.EventKind)
}

func newBlockIndex() *blockIndex {
	return &blockIndex{blocks: make(map[uint64]kvcache.SnapshotEntry)}
}

// feed drains the engine's pending events into the index. On a LOST event
// it rebuilds the index from a snapshot and skips the events the snapshot
// already holds.
func (ix *blockIndex) feed(c *kvcache.Cache, buf []kvcache.Event) ([]kvcache.Event, error) {
	events, err := c.DrainEvents(buf[:0], false)
	if err != nil {
		return events, err
	}
	for i := range events {
		e := &events[i]
		if e.Kind == kvcache.EventLost {
			s, err := c.Snapshot()
			if err != nil {
				return events, err
			}
			ix.resync(s)
			continue
		}
		if e.ID <= ix.applied {
			continue // in the snapshot already
		}
		if e.ID != ix.applied+1 {
			return events, fmt.Errorf("event %d follows event %d: a gap without a LOST event", e.ID, ix.applied)
		}
		if err := ix.apply(e); err != nil {
			return events, err
		}
		ix.applied = e.ID
		ix.events++
		if int(e.Kind) < len(ix.kinds) {
			ix.kinds[e.Kind]++
		}
	}
	return events, nil
}

func (ix *blockIndex) resync(s kvcache.Snapshot) {
	ix.blocks = make(map[uint64]kvcache.SnapshotEntry, len(s.Entries))
	for _, e := range s.Entries {
		ix.blocks[e.Hash] = e
	}
	ix.applied = s.EventID
	ix.resyncs++
}

// apply is the rule of include/kvcache/events.h for one event.
func (ix *blockIndex) apply(e *kvcache.Event) error {
	switch e.Kind {
	case kvcache.EventStored:
		entry, ok := ix.blocks[e.Hash]
		if !ok {
			entry = kvcache.SnapshotEntry{Hash: e.Hash, ParentHash: e.ParentHash, Tier: e.Tier,
				Priority: e.Priority, NumTokens: e.NumTokens, HasLoRA: e.HasLoRA, LoRAID: e.LoRAID}
		}
		entry.Groups |= e.Groups
		ix.blocks[e.Hash] = entry
	case kvcache.EventRemoved:
		entry, ok := ix.blocks[e.Hash]
		if !ok {
			return fmt.Errorf("event %d removes block %#x, which the index does not hold", e.ID, e.Hash)
		}
		entry.Groups &^= e.Groups
		if entry.Groups == 0 {
			delete(ix.blocks, e.Hash)
		} else {
			ix.blocks[e.Hash] = entry
		}
	case kvcache.EventTierChanged:
		entry := ix.blocks[e.Hash]
		entry.Tier, entry.Groups, entry.Priority = e.Tier, e.Groups, e.Priority
		ix.blocks[e.Hash] = entry
	case kvcache.EventPriorityChanged:
		entry := ix.blocks[e.Hash]
		entry.Priority = e.Priority
		ix.blocks[e.Hash] = entry
	case kvcache.EventCleared:
		ix.blocks = make(map[uint64]kvcache.SnapshotEntry)
	default:
		return fmt.Errorf("event %d of unknown kind %v", e.ID, e.Kind)
	}
	return nil
}

// prefix is how many leading blocks of a prompt (its portable hashes) the
// engine holds.
func (ix *blockIndex) prefix(hashes []uint64) int {
	n := 0
	for n < len(hashes) {
		if _, ok := ix.blocks[hashes[n]]; !ok {
			break
		}
		n++
	}
	return n
}

// matches compares the index with the engine's snapshot; it drains first,
// so that the snapshot and the index describe the same event id.
func (ix *blockIndex) matches(c *kvcache.Cache) error {
	if _, err := ix.feed(c, nil); err != nil {
		return err
	}
	s, err := c.Snapshot()
	if err != nil {
		return err
	}
	if s.EventID != ix.applied {
		return fmt.Errorf("snapshot at event %d, index at %d", s.EventID, ix.applied)
	}
	if len(s.Entries) != len(ix.blocks) {
		return fmt.Errorf("snapshot holds %d blocks, the index %d", len(s.Entries), len(ix.blocks))
	}
	for _, e := range s.Entries {
		if got, ok := ix.blocks[e.Hash]; !ok || got != e {
			return fmt.Errorf("block %#x: index %+v (present %v), snapshot %+v", e.Hash, got, ok, e)
		}
	}
	return nil
}

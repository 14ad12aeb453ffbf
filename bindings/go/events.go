package kvcache

import (
	"kvcache/kvc"
)

// EventKind is what an event reports (kvc_event_kind_t).
type EventKind uint32

// The event kinds of events.h (TestEventConstants checks them against C).
const (
	// EventStored: a block became reusable (commit).
	EventStored EventKind = 1
	// EventRemoved: the block left a tier (or the cache).
	EventRemoved EventKind = 2
	// EventTierChanged: the block moved to another tier.
	EventTierChanged EventKind = 3
	// EventPriorityChanged: a cached block's eviction priority changed.
	EventPriorityChanged EventKind = 4
	// EventCleared: every cached block was dropped (ResetReuse).
	EventCleared EventKind = 5
	// EventLost: events [ID, ID+LostCount) were dropped because the ring
	// was full; rebuild the index from Snapshot.
	EventLost EventKind = 6
)

func (k EventKind) String() string {
	switch k {
	case EventStored:
		return "STORED"
	case EventRemoved:
		return "REMOVED"
	case EventTierChanged:
		return "TIER_CHANGED"
	case EventPriorityChanged:
		return "PRIORITY_CHANGED"
	case EventCleared:
		return "CLEARED"
	case EventLost:
		return "LOST"
	}
	return "EventKind(" + itoa(uint64(k)) + ")"
}

// Tier is where a cached block lives (kvc_tier_t).
type Tier uint32

// The tiers of events.h (TestEventConstants checks them against C).
const (
	TierPrimary Tier = 0 // the cache's device (or CPU) pools
	TierHost    Tier = 1 // the host tier
	TierDisk    Tier = 2 // the disk tier (Config.SetDiskCache): stored/removed of its records
	TierRemote  Tier = 3 // a remote store shared by caches: this cache's own writes only
)

func (t Tier) String() string {
	switch t {
	case TierPrimary:
		return "primary"
	case TierHost:
		return "host"
	case TierDisk:
		return "disk"
	case TierRemote:
		return "remote"
	}
	return "Tier(" + itoa(uint64(t)) + ")"
}

// Event is one event of a cache's event stream (kvc_event_t) as a Go value;
// the fields a kind does not use are zero. A consumer applying the events in
// ID order to an index keyed by (Hash, place) holds exactly Snapshot's
// entries (see include/kvcache/events.h), the place being the tree for
// TierPrimary and TierHost and the store itself for TierDisk and TierRemote
// (a block can have a tree entry and a store entry at once; a store's
// entries are addressed by Hash alone, and the remote tier names only this
// cache's own writes):
//   - EventStored: entry[Hash, place(Tier)] gains Groups (created with
//     ParentHash, Tier, Priority, NumTokens and the LoRA id if absent).
//   - EventRemoved: entry[Hash, place(Tier)] loses Groups; erased when none
//     is left.
//   - EventTierChanged: entry[Hash, tree] moves to Tier, holding Groups.
//   - EventPriorityChanged: entry[Hash, tree] takes Priority.
//   - EventCleared: every tree entry is erased; store entries stay.
//   - EventLost: events [ID, ID+LostCount) were dropped: resynchronize from
//     Snapshot.
type Event struct {
	ID         uint64 // from 1, no gaps; EventLost: the first dropped id
	Kind       EventKind
	Tier       Tier   // stored: TierPrimary, or TierDisk/TierRemote (a store's record); removed: the tier left; tier changed: the new one
	Hash       uint64 // the block's portable hash (0: cleared, lost)
	ParentHash uint64 // stored: the previous block's hash, 0 for a first block
	Groups     uint64 // layer groups, bit g for group g
	HasLoRA    bool   // stored: the block's scope has a LoRA id
	LoRAID     uint64 // stored: the LoRA id if HasLoRA
	Priority   uint32 // stored, tier changed, priority changed: the priority now
	NumTokens  uint32 // stored: tokens in the block
	// Tokens are the token ids of a stored block when the drain asked for
	// them (nil otherwise). Events of one drain share one backing array.
	Tokens    []int32
	LostCount uint64 // lost: how many events were dropped
}

// lastID is the id of the newest event e accounts for.
func (e *Event) lastID() uint64 {
	if e.Kind == EventLost && e.LostCount > 0 {
		return e.ID + e.LostCount - 1
	}
	return e.ID
}

// drainChunk bounds the events one C call drains (80 bytes each in C memory).
const drainChunk = 4096

// DrainEvents moves the pending events of the cache, in id order, into dst
// (appended) and returns the extended slice (kvc_cache_drain_events). It
// drains until nothing is pending, or until it has drained the newest event
// emitted when it started, so a producer on another goroutine cannot keep it
// looping. With withTokens, stored events carry their token ids. When events
// were dropped (the ring was full) the first event is an EventLost. Drained
// events are gone from the cache. Errors: ErrUnsupported when events are off
// (Config.SetEventBufferSize 0).
func (c *Cache) DrainEvents(dst []Event, withTokens bool) ([]Event, error) {
	const op = "kvc_cache_drain_events"
	out := dst
	err := c.with(op, func(h kvc.Cache) error {
		res := kvc.NewKvc_event_drain_t()
		defer kvc.DeleteKvc_event_drain_t(res)
		kvc.Kvc_event_drain_init(res)
		// Capacity 0: learn the sizes and the newest id.
		if err := kvc.Kvc_cache_drain_events(h, kvc.SwigcptrKvc_event_t(0), 0, nil, 0, res); err != nil {
			return wrap(op, err)
		}
		target := res.GetLast_id()
		pending, tokensPending := res.GetEvents_pending(), res.GetTokens_pending()
		if pending == 0 {
			return nil
		}
		capacity := pending
		if capacity > drainChunk {
			capacity = drainChunk
		}
		buf := kvc.Kvcgo_buffer_new(nil, capacity*kvc.Kvcgo_event_size())
		if buf == 0 {
			return &Error{Status: StatusOutOfMemory, Message: "cannot allocate the event buffer", Op: op}
		}
		defer kvc.Kvcgo_buffer_free(buf)
		words := make([]uint64, capacity*eventWords)
		for pending > 0 {
			var tokens []int32
			if withTokens && tokensPending > 0 {
				tokens = make([]int32, tokensPending)
			}
			err := kvc.Kvc_cache_drain_events(h, kvc.SwigcptrKvc_event_t(buf), capacity,
				firstInt32(tokens), uint64(len(tokens)), res)
			if err != nil {
				return wrap(op, err)
			}
			n := res.GetEvents()
			tokens = tokens[:res.GetTokens()] // the ids written: the events' Tokens lie in them
			if n > 0 {
				kvc.Kvcgo_events_read(&words[0], buf, n)
				for i := uint64(0); i < n; i++ {
					out = append(out, decodeEvent(words[i*eventWords:(i+1)*eventWords], tokens))
				}
				if out[len(out)-1].lastID() >= target {
					return nil
				}
			}
			pending, tokensPending = res.GetEvents_pending(), res.GetTokens_pending()
			if n == 0 && tokensPending <= uint64(len(tokens)) && pending > 0 {
				// Nothing fitted and more token room would not help: the
				// library broke its contract; do not spin.
				return &Error{Status: StatusInternal, Message: "kvc_cache_drain_events wrote nothing with room for the pending tokens", Op: op}
			}
		}
		return nil
	})
	return out, err
}

// eventWords is the number of words kvcgo_events_read writes per event.
const eventWords = 12

func decodeEvent(w []uint64, tokens []int32) Event {
	e := Event{
		ID:         w[0],
		Kind:       EventKind(w[1]),
		Tier:       Tier(w[2]),
		Hash:       w[3],
		ParentHash: w[4],
		Groups:     w[5],
		LoRAID:     w[6],
		HasLoRA:    w[7] != 0,
		Priority:   uint32(w[8]),
		NumTokens:  uint32(w[9]),
		LostCount:  w[11],
	}
	if off := w[10]; off != ^uint64(0) && e.Kind == EventStored && off+uint64(e.NumTokens) <= uint64(len(tokens)) {
		e.Tokens = tokens[off : off+uint64(e.NumTokens) : off+uint64(e.NumTokens)]
	}
	return e
}

// SnapshotEntry is one cached block of a snapshot (kvc_snapshot_entry_t).
type SnapshotEntry struct {
	Hash       uint64 // portable hash
	ParentHash uint64 // the previous block's hash, 0 for a first block
	Groups     uint64 // layer groups holding a block here (bit g)
	HasLoRA    bool
	LoRAID     uint64 // if HasLoRA
	Tier       Tier
	Priority   uint32
	NumTokens  uint32
}

// Snapshot is every cached block of a cache (both tiers), parents before
// children, as of event EventID: applying the events with larger ids gives
// the cache's state at any later moment.
type Snapshot struct {
	EventID uint64 // the newest event emitted before the snapshot; 0: none
	Entries []SnapshotEntry
}

// snapshotWords is the number of words kvcgo_snapshot_read writes per entry.
const snapshotWords = 8

// Snapshot lists every cached block (kvc_cache_snapshot). Errors:
// ErrUnsupported when events are off.
func (c *Cache) Snapshot() (Snapshot, error) {
	const op = "kvc_cache_snapshot"
	return withCache(c, op, func(h kvc.Cache) (Snapshot, error) {
		var count, eventID uint64
		err := kvc.Kvc_cache_snapshot(h, kvc.SwigcptrKvc_snapshot_entry_t(0), 0, &count, &eventID)
		for {
			if err == nil {
				if count == 0 {
					return Snapshot{EventID: eventID, Entries: []SnapshotEntry{}}, nil
				}
			} else if e, ok := err.(*kvc.Error); !ok || Status(e.Status) != StatusBufferTooSmall {
				return Snapshot{}, wrap(op, err)
			}
			capacity := count
			buf := kvc.Kvcgo_buffer_new(nil, capacity*kvc.Kvcgo_snapshot_entry_size())
			if buf == 0 {
				return Snapshot{}, &Error{Status: StatusOutOfMemory, Message: "cannot allocate the snapshot buffer", Op: op}
			}
			err = kvc.Kvc_cache_snapshot(h, kvc.SwigcptrKvc_snapshot_entry_t(buf), capacity, &count, &eventID)
			if err != nil {
				kvc.Kvcgo_buffer_free(buf)
				continue // grown meanwhile: BUFFER_TOO_SMALL with the new count
			}
			s := Snapshot{EventID: eventID, Entries: make([]SnapshotEntry, count)}
			if count > 0 {
				words := make([]uint64, count*snapshotWords)
				kvc.Kvcgo_snapshot_read(&words[0], buf, count)
				for i := range s.Entries {
					w := words[uint64(i)*snapshotWords:]
					s.Entries[i] = SnapshotEntry{
						Hash: w[0], ParentHash: w[1], Groups: w[2], LoRAID: w[3],
						HasLoRA: w[4] != 0, Tier: Tier(w[5]), Priority: uint32(w[6]), NumTokens: uint32(w[7]),
					}
				}
			}
			kvc.Kvcgo_buffer_free(buf)
			return s, nil
		}
	})
}

// BlockHashes returns the portable hashes of the full blocks of a prompt
// under opts (nil: no salt, no LoRA, no extra keys), computed from the
// config alone (its tokens per block and event hash seed): what stored
// events of a cache built from an equal config report for them
// (kvc_block_hashes). Needs no cache and no device.
func (c *Config) BlockHashes(tokens []int32, opts *SequenceOptions) ([]uint64, error) {
	return c.AppendBlockHashes(nil, tokens, opts)
}

// AppendBlockHashes appends the hashes of BlockHashes to dst; with enough
// capacity in dst it does not allocate a slice.
func (c *Config) AppendBlockHashes(dst []uint64, tokens []int32, opts *SequenceOptions) ([]uint64, error) {
	const op = "kvc_block_hashes"
	out := dst
	err := c.with(op, func(h kvc.Config) error {
		o, err := newCOptions(opts)
		if err != nil {
			return err
		}
		defer o.free()
		for {
			spare := dst[len(dst):cap(dst)]
			var count uint64
			err := kvc.Kvc_block_hashes(h, firstInt32(tokens), uint64(len(tokens)), o.handle(),
				firstUint64(spare), uint64(len(spare)), &count)
			if err == nil {
				out = dst[:len(dst)+int(count)]
				return nil
			}
			if e, ok := err.(*kvc.Error); !ok || Status(e.Status) != StatusBufferTooSmall || count <= uint64(len(spare)) {
				return err
			}
			grown := make([]uint64, len(dst), len(dst)+int(count))
			copy(grown, dst)
			dst = grown
		}
	})
	return out, err
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}

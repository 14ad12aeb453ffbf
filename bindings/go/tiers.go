package kvcache

import "kvcache/kvc"

// Tiers below the radix tree (include/kvcache/tiers.h): the disk tier's
// setting, the statistics of each such tier and the flush of queued writes.

// SetDiskCache turns the disk tier on: slab files under directory (which
// must exist and be writable when the cache is created), at most bytes of
// them; "" with 0 turns it off. A cache created on a directory that a
// previous cache of the same model geometry and event hash seed used finds
// its blocks (a restart keeps its prefix cache).
func (c *Config) SetDiskCache(directory string, bytes uint64) error {
	const op = "kvc_config_set_disk_cache"
	return c.with(op, func(h kvc.Config) error {
		var dir uintptr
		if directory != "" {
			b := append([]byte(directory), 0)
			dir = kvc.Kvcgo_buffer_new(&b[0], uint64(len(b)))
			if dir == 0 {
				return &Error{Status: StatusOutOfMemory, Message: "cannot copy the directory name", Op: op}
			}
			defer kvc.Kvcgo_buffer_free(dir)
		}
		return kvc.Kvc_config_set_disk_cache(h, dir, bytes)
	})
}

// DiskCache is the disk tier's directory ("" when off) and byte budget.
func (c *Config) DiskCache() (directory string, bytes uint64, err error) {
	err = c.with("kvc_config_get_disk_cache", func(h kvc.Config) error {
		var dir uintptr
		if e := kvc.Kvc_config_get_disk_cache(h, &dir, &bytes); e != nil {
			return e
		}
		if n := kvc.Kvcgo_cstring_length(dir); n > 0 {
			b := make([]byte, n)
			kvc.Kvcgo_buffer_read(&b[0], dir, n)
			directory = string(b)
		}
		return nil
	})
	return directory, bytes, err
}

// DiskCache is Config.SetDiskCache.
func (b *ConfigBuilder) DiskCache(directory string, bytes uint64) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetDiskCache(directory, bytes) })
}

// TierStats are the statistics of one tier below the tree
// (kvc_tier_stats_t). Latencies are over the tier's last 1024 operations,
// in microseconds.
type TierStats struct {
	Tier            Tier   // TierDisk or TierRemote
	Blocks          uint64 // blocks held now
	Bytes           uint64 // bytes they take (header and KV)
	CapacityBytes   uint64 // the tier's byte budget
	Hits            uint64 // lookups the tier answered with a record
	Misses          uint64 // lookups of a block the tier does not hold
	Rejected        uint64 // records refused by the check (torn, corrupted, another block's)
	OnboardedBlocks uint64 // blocks copied into the cache from the tier
	OnboardedBytes  uint64 // their KV bytes
	OfferedBlocks   uint64 // blocks queued for writing (at commit or eviction)
	StoredBlocks    uint64 // blocks written
	DroppedBlocks   uint64 // writes dropped: queue full, no room, a failed write, the tier down
	Errors          uint64 // I/O failures, timeouts, protocol errors
	EvictedBlocks   uint64 // blocks the tier removed to stay in its budget
	QueuedBlocks    uint64 // writes waiting now
	LoadCount       uint64 // lookups (one per run of a prompt's blocks)
	LoadP50Us       uint64 // median lookup latency
	LoadP99Us       uint64 // 99th percentile lookup latency
	LoadMaxUs       uint64 // longest lookup
	WriteCount      uint64 // blocks written (timed)
	WriteP50Us      uint64 // median write latency
	WriteP99Us      uint64 // 99th percentile write latency
	WriteMaxUs      uint64 // longest write
}

// TierStats returns the statistics of tier (TierDisk or TierRemote); a
// cache without that tier is an ErrNotFound error.
func (c *Cache) TierStats(tier Tier) (TierStats, error) {
	const op = "kvc_cache_get_tier_stats"
	return withCache(c, op, func(h kvc.Cache) (TierStats, error) {
		s := kvc.NewKvc_tier_stats_t()
		defer kvc.DeleteKvc_tier_stats_t(s)
		kvc.Kvc_tier_stats_init(s)
		if err := kvc.Kvc_cache_get_tier_stats(h, uint32(tier), s); err != nil {
			return TierStats{}, wrap(op, err)
		}
		return TierStats{
			Tier:            Tier(s.GetTier()),
			Blocks:          s.GetBlocks(),
			Bytes:           s.GetBytes(),
			CapacityBytes:   s.GetCapacity_bytes(),
			Hits:            s.GetHits(),
			Misses:          s.GetMisses(),
			Rejected:        s.GetRejected(),
			OnboardedBlocks: s.GetOnboarded_blocks(),
			OnboardedBytes:  s.GetOnboarded_bytes(),
			OfferedBlocks:   s.GetOffered_blocks(),
			StoredBlocks:    s.GetStored_blocks(),
			DroppedBlocks:   s.GetDropped_blocks(),
			Errors:          s.GetErrors(),
			EvictedBlocks:   s.GetEvicted_blocks(),
			QueuedBlocks:    s.GetQueued_blocks(),
			LoadCount:       s.GetLoad_count(),
			LoadP50Us:       s.GetLoad_p50_us(),
			LoadP99Us:       s.GetLoad_p99_us(),
			LoadMaxUs:       s.GetLoad_max_us(),
			WriteCount:      s.GetWrite_count(),
			WriteP50Us:      s.GetWrite_p50_us(),
			WriteP99Us:      s.GetWrite_p99_us(),
			WriteMaxUs:      s.GetWrite_max_us(),
		}, nil
	})
}

// FlushTiers waits until every block queued for writing to the cache's
// stores is written or dropped; closing the cache waits the same way.
func (c *Cache) FlushTiers() error {
	const op = "kvc_cache_flush_tiers"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_cache_flush_tiers(h))
	})
}

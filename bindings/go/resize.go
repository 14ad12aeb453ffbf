package kvcache

// Resizing the primary pools in place from measured memory
// (kvc_cache_plan_resize, kvc_cache_resize; AutoDeploy's phase 6).

import "kvcache/kvc"

// ResizeInputs is what AutoDeploy measures after a forward pass
// (kvc_resize_inputs_t). The zero value is not usable: start from
// DefaultResizeInputs (fraction 0.9).
type ResizeInputs struct {
	FreeGPUMemoryFraction float64 // share of what is left, in (0, 1]
	FreeBytes             uint64  // measured free memory; 0: the device's now plus the cache's pools
	NonPagedBytes         uint64  // memory outside the paged pools that must stay
	ForwardBytes          uint64  // activation memory of the forward pass
}

// DefaultResizeInputs has the fraction 0.9 and no figures.
func DefaultResizeInputs() ResizeInputs { return ResizeInputs{FreeGPUMemoryFraction: 0.9} }

// ResizePlan is the pools a resize would give (kvc_resize_plan_t).
type ResizePlan struct {
	FreeBytes       uint64   // the free memory the formula used
	MemForPaged     uint64   // (free - non_paged - forward) * fraction, rounded down
	PrimaryBytes    uint64   // what to pass to Resize: MemForPaged held to the ceiling
	MaxPrimaryBytes uint64   // the cache's ceiling
	BlocksPerGroup  uint64   // blocks every layer group gets
	TokenCapacity   uint64   // tokens every layer can hold
	NumBlocks       uint64   // blocks over all pools
	TotalBytes      uint64   // bytes the pools take
	PoolBlocks      []uint64 // blocks of each pool
}

// PlanResize plans a resize from measured memory, changing nothing:
// mem_for_paged = (free_mem - non_paged - forward_mem) * free_gpu_fraction.
func (c *Cache) PlanResize(in ResizeInputs) (ResizePlan, error) {
	const op = "kvc_cache_plan_resize"
	return withCache(c, op, func(h kvc.Cache) (ResizePlan, error) {
		d, err := describeCache(h, op)
		if err != nil {
			return ResizePlan{}, err
		}
		ci := kvc.NewKvc_resize_inputs_t()
		defer kvc.DeleteKvc_resize_inputs_t(ci)
		kvc.Kvc_resize_inputs_init(ci)
		ci.SetFree_gpu_memory_fraction(in.FreeGPUMemoryFraction)
		ci.SetFree_bytes(in.FreeBytes)
		ci.SetNon_paged_bytes(in.NonPagedBytes)
		ci.SetForward_bytes(in.ForwardBytes)
		return planResize(h, op, ci.Swigcptr(), d.NumPools)
	})
}

// Resize resizes the primary pools in place to primaryBytes
// (kvc_cache_resize): base pointers, layer views and the ids of blocks in
// use stay; a grow adds blocks, a shrink evicts cached blocks in victim
// order (to the host tier where they qualify) until the rest fit, moves
// the cached blocks past the new end below it, and is refused
// (StatusOutOfBlocks, nothing changed) over a block in use past the end.
func (c *Cache) Resize(primaryBytes uint64) error {
	const op = "kvc_cache_resize"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_cache_resize(h, primaryBytes))
	})
}

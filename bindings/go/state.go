package kvcache

// State resources beside the paged attention KV (kvcache/state.h): Mamba
// SSM state, causal-conv state, generic per-sequence state and unpaged
// per-token resources, held in per-sequence state slots.

import (
	"unsafe"

	"kvcache/kvc"
)

// StateAll is the resource argument of kvc_batch_state_slots meaning every
// resource (StateSlotsAll).
const StateAll = ^uint32(0) // KVC_STATE_ALL (UINT32_MAX)

// ResourceKind is what a resource is (kvc_resource_kind_t).
type ResourceKind uint32

// Resource kinds.
const (
	ResourceSSM     ResourceKind = 1 // Mamba SSM state [num_heads][head_dim][d_state]
	ResourceConv    ResourceKind = 2 // causal-conv state [conv_dim][d_conv]
	ResourceGeneric ResourceKind = 3 // opaque per-sequence bytes
	ResourceUnpaged ResourceKind = 4 // per-token bytes, one row of MaxTokens per slot
)

// ResourceReason says why a resource is managed or local (kvc_resource_reason_t).
type ResourceReason uint32

// Reasons.
const (
	ReasonManaged          ResourceReason = 0 // managed with the others
	ReasonSSMShapeDiffers  ResourceReason = 1 // SSM shape/dtype differ from the first SSM's
	ReasonNoSSM            ResourceReason = 2 // conv state without an SSM resource
	ReasonNGroups          ResourceReason = 3 // conv_dim fails the n_groups constraint
	ReasonConvShapeDiffers ResourceReason = 4 // conv shape/dtype differ from the first managed conv's
)

// ResourceDesc is one resource of a cache and the view a kernel addresses
// it by (kvc_resource_desc_t): slot s starts at Base + s*SlotStride; the
// strides are in bytes as documented in state.h.
type ResourceDesc struct {
	Kind          ResourceKind
	Managed       bool
	Reason        ResourceReason
	ReasonText    string
	DType         DType // SSM and conv; else 0
	NumHeads      uint32
	HeadDim       uint32
	DState        uint32
	ConvDim       uint32
	DConv         uint32
	NGroups       uint32 // conv meeting the constraint
	NumSlots      uint32
	SlotsUsed     uint32
	BytesPerToken uint64 // unpaged
	MaxTokens     uint64 // unpaged
	Alignment     uint64
	SlotBytes     uint64
	SlotStride    uint64
	Strides       [3]uint64
	Base          uintptr // slot 0; valid while the cache lives
}

func addResource(c *Config, op string, f func(h kvc.Config, index *uint32) error) (uint32, error) {
	var index uint32
	err := c.with(op, func(h kvc.Config) error { return f(h, &index) })
	return index, err
}

// AddSSMState adds a Mamba SSM state resource and returns its index.
func (c *Config) AddSSMState(numHeads, headDim, dState uint32, dtype DType) (uint32, error) {
	return addResource(c, "kvc_config_add_ssm_state", func(h kvc.Config, i *uint32) error {
		return kvc.Kvc_config_add_ssm_state(h, numHeads, headDim, dState, uint32(dtype), i)
	})
}

// AddConvState adds a causal-conv state resource and returns its index.
func (c *Config) AddConvState(convDim, dConv uint32, dtype DType) (uint32, error) {
	return addResource(c, "kvc_config_add_conv_state", func(h kvc.Config, i *uint32) error {
		return kvc.Kvc_config_add_conv_state(h, convDim, dConv, uint32(dtype), i)
	})
}

// AddGenericState adds a generic per-sequence state (alignment 0 = 256).
func (c *Config) AddGenericState(bytes, alignment uint64) (uint32, error) {
	return addResource(c, "kvc_config_add_generic_state", func(h kvc.Config, i *uint32) error {
		return kvc.Kvc_config_add_generic_state(h, bytes, alignment, i)
	})
}

// AddUnpagedResource adds an unpaged per-token resource.
func (c *Config) AddUnpagedResource(bytesPerToken, maxTokens uint64) (uint32, error) {
	return addResource(c, "kvc_config_add_unpaged_resource", func(h kvc.Config, i *uint32) error {
		return kvc.Kvc_config_add_unpaged_resource(h, bytesPerToken, maxTokens, i)
	})
}

// NumResources is the number of resources added.
func (c *Config) NumResources() (n uint32, err error) {
	err = c.with("kvc_config_get_num_resources", func(h kvc.Config) error { return kvc.Kvc_config_get_num_resources(h, &n) })
	return n, err
}

// SetMaxStateSlots sets the number of state slots (0 = planned from the budget).
func (c *Config) SetMaxStateSlots(n uint32) error {
	return c.with("kvc_config_set_max_state_slots", func(h kvc.Config) error { return kvc.Kvc_config_set_max_state_slots(h, n) })
}

// MaxStateSlots is the state slot setting (0 = planned).
func (c *Config) MaxStateSlots() (n uint32, err error) {
	err = c.with("kvc_config_get_max_state_slots", func(h kvc.Config) error { return kvc.Kvc_config_get_max_state_slots(h, &n) })
	return n, err
}

// DescribeResource describes resource index (kvc_cache_describe_resource).
func (c *Cache) DescribeResource(index uint32) (ResourceDesc, error) {
	const op = "kvc_cache_describe_resource"
	return withCache(c, op, func(h kvc.Cache) (ResourceDesc, error) {
		d := kvc.NewKvc_resource_desc_t()
		defer kvc.DeleteKvc_resource_desc_t(d)
		kvc.Kvc_resource_desc_init(d)
		if err := wrap(op, kvc.Kvc_cache_describe_resource(h, index, d)); err != nil {
			return ResourceDesc{}, err
		}
		return ResourceDesc{
			Kind:          ResourceKind(d.GetKind()),
			Managed:       d.GetManaged() != 0,
			Reason:        ResourceReason(d.GetReason()),
			ReasonText:    d.GetReason_text(),
			DType:         DType(d.GetDtype()),
			NumHeads:      d.GetNum_heads(),
			HeadDim:       d.GetHead_dim(),
			DState:        d.GetD_state(),
			ConvDim:       d.GetConv_dim(),
			DConv:         d.GetD_conv(),
			NGroups:       d.GetN_groups(),
			NumSlots:      d.GetNum_slots(),
			SlotsUsed:     d.GetSlots_used(),
			BytesPerToken: d.GetBytes_per_token(),
			MaxTokens:     d.GetMax_tokens(),
			Alignment:     d.GetAlignment(),
			SlotBytes:     d.GetSlot_bytes(),
			SlotStride:    d.GetSlot_stride(),
			Strides:       [3]uint64{d.GetStride0(), d.GetStride1(), d.GetStride2()},
			Base:          d.GetBase(),
		}, nil
	})
}

func stateSlots(c *Cache, ids []uint64, resource uint32, per int) ([]int32, error) {
	const op = "kvc_batch_state_slots"
	return withCache(c, op, func(h kvc.Cache) ([]int32, error) {
		slots := make([]int32, len(ids)*per+1) // never empty: &slots[0]
		var idp *uint64
		if len(ids) > 0 {
			idp = (*uint64)(unsafe.Pointer(&ids[0]))
		}
		if err := wrap(op, kvc.Kvc_batch_state_slots(h, idp, uint64(len(ids)), resource, &slots[0])); err != nil {
			return nil, err
		}
		return slots[:len(ids)*per], nil
	})
}

// StateSlots returns each sequence's slot of resource (AutoDeploy's slot_idx).
func (c *Cache) StateSlots(ids []uint64, resource uint32) ([]int32, error) {
	return stateSlots(c, ids, resource, 1)
}

// StateSlotsAll returns each sequence's slot of every resource, at
// [i*numResources + r].
func (c *Cache) StateSlotsAll(ids []uint64) ([]int32, error) {
	d, err := c.Describe()
	if err != nil {
		return nil, err
	}
	return stateSlots(c, ids, StateAll, int(d.NumResources))
}

// StateSnapshotsNone is SetMaxStateSnapshots' value for no snapshot pool.
const StateSnapshotsNone = ^uint32(0) // KVC_STATE_SNAPSHOTS_NONE (UINT32_MAX)

// SetMaxStateSnapshots sets the number of state snapshot slots (0 =
// planned from the budget, StateSnapshotsNone = none;
// kvc_config_set_max_state_snapshots).
func (c *Config) SetMaxStateSnapshots(n uint32) error {
	return c.with("kvc_config_set_max_state_snapshots", func(h kvc.Config) error { return kvc.Kvc_config_set_max_state_snapshots(h, n) })
}

// MaxStateSnapshots is the snapshot slot setting (0 = planned).
func (c *Config) MaxStateSnapshots() (n uint32, err error) {
	err = c.with("kvc_config_get_max_state_snapshots", func(h kvc.Config) error { return kvc.Kvc_config_get_max_state_snapshots(h, &n) })
	return n, err
}

// PublishState publishes sequence id's state at position (a positive
// multiple of tokens_per_block, at most its committed tokens) as the
// snapshot of its block ending there, copied on stream; a later prompt
// with that prefix reuses it, and a rewind to position restores it
// (kvc_sequence_publish_state).
func (c *Cache) PublishState(id, position uint64, stream Stream) error {
	const op = "kvc_sequence_publish_state"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_sequence_publish_state(h, id, position, uintptr(stream)))
	})
}

// SnapshotStats is the state snapshot pool and its counters
// (kvc_snapshot_stats_t; all 0 without state resources).
type SnapshotStats struct {
	NumSlots         uint32 // snapshot slots of the pool
	SlotsUsed        uint32 // snapshots cached now
	BytesPerSnapshot uint64 // bytes one publish or restore copies
	Bytes            uint64 // bytes of the pool (out of the primary budget)
	Published        uint64 // publishes that stored a snapshot
	Hits             uint64 // adds that reused a prefix (restored a snapshot)
	HitTokens        uint64 // tokens those adds reused
	Restores         uint64 // rewinds that restored a snapshot
	Evicted          uint64 // snapshots a publish into a full pool evicted for good (not offloaded)
	Dropped          uint64 // snapshots dropped with their node, from either pool
	HostNumSlots     uint32 // host snapshot slots (a quarter of host_cache_bytes; 0 without a host tier)
	HostSlotsUsed    uint32 // snapshots in the host pool now
	HostBytes        uint64 // bytes of the host pool (out of host_cache_bytes)
	Offloaded        uint64 // snapshots a publish into a full pool moved to the host pool
	Onboarded        uint64 // reuses and rewinds that restored a host snapshot
	HostEvicted      uint64 // host snapshots evicted to make room for an offload
}

// SnapshotStats returns the snapshot pool and its counters
// (kvc_cache_get_snapshot_stats).
func (c *Cache) SnapshotStats() (SnapshotStats, error) {
	const op = "kvc_cache_get_snapshot_stats"
	return withCache(c, op, func(h kvc.Cache) (SnapshotStats, error) {
		d := kvc.NewKvc_snapshot_stats_t()
		defer kvc.DeleteKvc_snapshot_stats_t(d)
		kvc.Kvc_snapshot_stats_init(d)
		if err := wrap(op, kvc.Kvc_cache_get_snapshot_stats(h, d)); err != nil {
			return SnapshotStats{}, err
		}
		return SnapshotStats{
			NumSlots:         d.GetNum_slots(),
			SlotsUsed:        d.GetSlots_used(),
			BytesPerSnapshot: d.GetBytes_per_snapshot(),
			Bytes:            d.GetBytes(),
			Published:        d.GetPublished(),
			Hits:             d.GetHits(),
			HitTokens:        d.GetHit_tokens(),
			Restores:         d.GetRestores(),
			Evicted:          d.GetEvicted(),
			Dropped:          d.GetDropped(),
			HostNumSlots:     d.GetHost_num_slots(),
			HostSlotsUsed:    d.GetHost_slots_used(),
			HostBytes:        d.GetHost_bytes(),
			Offloaded:        d.GetOffloaded(),
			Onboarded:        d.GetOnboarded(),
			HostEvicted:      d.GetHost_evicted(),
		}, nil
	})
}

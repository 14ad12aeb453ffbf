package kvcache

// Paged KV resources, each with its own geometry (kvcache/kv_resource.h):
// layers with their own kv heads, head_dim, dtype, kv_factor, layout and
// window. Resources matching KV resource 0 on (head_dim, dtype, kv_factor,
// layout) are managed together; the others get pools of their own.

import (
	"unsafe"

	"kvcache/kvc"
)

// KV resource reasons (kvc_resource_reason_t, appended after the state
// resources' reasons).
const (
	ReasonKVHeadDimDiffers ResourceReason = 5 // head_dim differs from KV resource 0's
	ReasonKVDTypeDiffers   ResourceReason = 6 // dtype differs from KV resource 0's
	ReasonKVFactorDiffers  ResourceReason = 7 // kv_factor differs from KV resource 0's
	ReasonKVLayoutDiffers  ResourceReason = 8 // layout differs from KV resource 0's
)

// KVResource is a paged KV resource to add (kvc_kv_resource_t). Zero
// DType, KVFactor and Layout take the defaults of KVC_KV_RESOURCE_INIT
// (bf16, 2, NHD).
type KVResource struct {
	Layers   []uint32 // model layer ids, ascending and distinct
	KVHeads  uint32
	HeadDim  uint32
	DType    DType
	KVFactor uint32
	Layout   Layout
	Window   uint32 // 0: full attention
}

// KVResourceDesc is one KV resource of a cache (kvc_kv_resource_desc_t).
type KVResourceDesc struct {
	Managed     bool           // managed together with KV resource 0, else local (own pools)
	Reason      ResourceReason // ReasonManaged or a ReasonKV* value
	ReasonText  string
	ManagedWith uint32 // the first KV resource of its class
	NumLayers   uint32
	KVHeads     uint32
	HeadDim     uint32
	DType       DType
	KVFactor    uint32
	Layout      Layout
	Window      uint32
	Group       uint32 // the layer group holding its layers
	Pool        uint32 // that group's pool
	BlockBytes  uint64 // bytes of one block of that group
}

// AddKVResource adds a paged KV resource (kvc_config_add_kv_resource) and
// returns its index. It is refused once a global shape setter was called,
// and those are refused after it (StatusInvalidState).
func (c *Config) AddKVResource(r *KVResource) (uint32, error) {
	const op = "kvc_config_add_kv_resource"
	if r == nil {
		return 0, c.with(op, func(kvc.Config) error { return invalidArgument(op, "r is a nil *kvcache.KVResource") })
	}
	var bufs cBuffers
	defer bufs.free()
	var layers uintptr
	if len(r.Layers) > 0 {
		var err error
		if layers, err = bufs.copyIn(op, (*byte)(unsafe.Pointer(&r.Layers[0])), 4*len(r.Layers)); err != nil {
			return 0, err
		}
	}
	return addResource(c, op, func(h kvc.Config, i *uint32) error {
		d := kvc.NewKvc_kv_resource_t()
		defer kvc.DeleteKvc_kv_resource_t(d)
		kvc.Kvc_kv_resource_init(d)
		d.SetLayers(layers)
		d.SetNum_layers(uint32(len(r.Layers)))
		d.SetKv_heads(r.KVHeads)
		d.SetHead_dim(r.HeadDim)
		if r.DType != 0 {
			d.SetDtype(uint32(r.DType))
		}
		if r.KVFactor != 0 {
			d.SetKv_factor(r.KVFactor)
		}
		if r.Layout != 0 {
			d.SetLayout(uint32(r.Layout))
		}
		d.SetWindow(r.Window)
		return kvc.Kvc_config_add_kv_resource(h, d, i)
	})
}

// DescribeKVResource describes KV resource index (kvc_cache_describe_kv_resource).
func (c *Cache) DescribeKVResource(index uint32) (KVResourceDesc, error) {
	const op = "kvc_cache_describe_kv_resource"
	return withCache(c, op, func(h kvc.Cache) (KVResourceDesc, error) {
		d := kvc.NewKvc_kv_resource_desc_t()
		defer kvc.DeleteKvc_kv_resource_desc_t(d)
		kvc.Kvc_kv_resource_desc_init(d)
		if err := wrap(op, kvc.Kvc_cache_describe_kv_resource(h, index, d)); err != nil {
			return KVResourceDesc{}, err
		}
		return KVResourceDesc{
			Managed:     d.GetManaged() != 0,
			Reason:      ResourceReason(d.GetReason()),
			ReasonText:  d.GetReason_text(),
			ManagedWith: d.GetManaged_with(),
			NumLayers:   d.GetNum_layers(),
			KVHeads:     d.GetKv_heads(),
			HeadDim:     d.GetHead_dim(),
			DType:       DType(d.GetDtype()),
			KVFactor:    d.GetKv_factor(),
			Layout:      Layout(d.GetLayout()),
			Window:      d.GetWindow(),
			Group:       d.GetGroup(),
			Pool:        d.GetPool(),
			BlockBytes:  d.GetBlock_bytes(),
		}, nil
	})
}

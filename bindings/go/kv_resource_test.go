package kvcache_test

import (
	"errors"
	"strings"
	"testing"

	"kvcache"
)

// A mixed config (bf16 dim 128 and fp8 dim 64 layers) described: managed
// and local with their reasons, each in its own pool; the global setters
// refused after a resource; bad input.
func TestKVResources(t *testing.T) {
	c, err := kvcache.NewConfig()
	must(t, err)
	defer c.Close()
	i, err := c.AddKVResource(&kvcache.KVResource{Layers: []uint32{0, 2}, KVHeads: 8, HeadDim: 128})
	must(t, err)
	if i != 0 {
		t.Fatalf("index %d", i)
	}
	i, err = c.AddKVResource(&kvcache.KVResource{Layers: []uint32{1}, KVHeads: 4, HeadDim: 64,
		DType: kvcache.DTypeFP8E4M3, Window: 32})
	must(t, err)
	if i != 1 {
		t.Fatalf("index %d", i)
	}
	if err := c.SetNumLayers(4); !errors.Is(err, kvcache.ErrInvalidState) {
		t.Fatalf("SetNumLayers after a KV resource: %v", err)
	}
	_, err = c.AddKVResource(&kvcache.KVResource{Layers: []uint32{2}, KVHeads: 8, HeadDim: 128})
	if err == nil || !strings.Contains(err.Error(), "already has") {
		t.Fatalf("overlap: %v", err)
	}
	_, err = c.AddKVResource(&kvcache.KVResource{KVHeads: 8, HeadDim: 128})
	if !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Fatalf("no layers: %v", err)
	}
	must(t, c.SetMaxTokens(256))
	cache, err := kvcache.NewCache(c)
	must(t, err)
	defer cache.Close()
	d, err := cache.Describe()
	must(t, err)
	if d.NumKVResources != 2 || d.NumLayers != 3 || d.NumGroups != 2 {
		t.Fatalf("describe %+v", d)
	}
	a, err := cache.DescribeKVResource(0)
	must(t, err)
	b, err := cache.DescribeKVResource(1)
	must(t, err)
	if !a.Managed || a.Reason != kvcache.ReasonManaged || a.DType != kvcache.DTypeBF16 ||
		a.KVFactor != 2 || a.Layout != kvcache.LayoutNHD || a.BlockBytes != 2*2*16*8*128*2 {
		t.Fatalf("resource 0 %+v", a)
	}
	if b.Managed || b.Reason != kvcache.ReasonKVHeadDimDiffers || b.ManagedWith != 1 ||
		b.Window != 32 || b.DType != kvcache.DTypeFP8E4M3 || b.NumLayers != 1 || b.KVHeads != 4 ||
		b.HeadDim != 64 || b.Pool == a.Pool || b.Group == a.Group || b.BlockBytes != 2*16*4*64 ||
		!strings.Contains(b.ReasonText, "head_dim") {
		t.Fatalf("resource 1 %+v", b)
	}
	if _, err := cache.DescribeKVResource(2); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Fatalf("index 2: %v", err)
	}
}

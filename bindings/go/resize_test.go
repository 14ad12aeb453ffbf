package kvcache_test

import (
	"errors"
	"strings"
	"testing"

	"kvcache"
)

// 1 layer, 1 kv head of dim 8, f32, 4 tokens per block: 256-byte blocks.
const resizeBlock = 256

func newResizableCache(t *testing.T, blocks, maxBlocks uint64) *kvcache.Cache {
	t.Helper()
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	for _, err := range []error{
		cfg.SetNumLayers(1),
		cfg.SetKVHeads(1),
		cfg.SetHeadDim(8),
		cfg.SetDType(kvcache.DTypeF32),
		cfg.SetTokensPerBlock(4),
		cfg.SetPrimaryBytes(blocks * resizeBlock),
		cfg.SetMaxPrimaryBytes(maxBlocks * resizeBlock),
	} {
		must(t, err)
	}
	if got := mustU64(t)(cfg.MaxPrimaryBytes()); got != maxBlocks*resizeBlock {
		t.Fatalf("MaxPrimaryBytes = %d", got)
	}
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPlanResizeFollowsTheFormula(t *testing.T) {
	c := newResizableCache(t, 16, 1000)
	in := kvcache.DefaultResizeInputs()
	in.FreeBytes, in.NonPagedBytes, in.ForwardBytes, in.FreeGPUMemoryFraction = 200000, 40000, 60000, 0.5
	p, err := c.PlanResize(in)
	must(t, err)
	if p.MemForPaged != 50000 || p.PrimaryBytes != 50000 || p.FreeBytes != 200000 ||
		p.MaxPrimaryBytes != 1000*resizeBlock || p.BlocksPerGroup != 50000/resizeBlock ||
		len(p.PoolBlocks) != 1 || p.PoolBlocks[0] != 50000/resizeBlock ||
		p.NumBlocks != 50000/resizeBlock || p.TokenCapacity != 50000/resizeBlock*4 ||
		p.TotalBytes != 50000/resizeBlock*resizeBlock {
		t.Fatalf("plan %+v", p)
	}
	in.FreeGPUMemoryFraction = 1.5
	_, err = c.PlanResize(in)
	var e *kvcache.Error
	if !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument ||
		!strings.Contains(e.Message, "free_gpu_memory_fraction must be in (0, 1]") {
		t.Fatalf("bad fraction: %v", err)
	}
}

func TestResizeGrowsAndShrinksInPlace(t *testing.T) {
	c := newResizableCache(t, 8, 64)
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	_, err := c.AddSequence(1, toks, nil, 0)
	must(t, err)
	pool, err := c.DescribePool(0)
	must(t, err)
	must(t, c.Resize(64*resizeBlock))
	d, err := c.Describe()
	must(t, err)
	grown, err := c.DescribePool(0)
	must(t, err)
	if d.NumBlocks != 64 || d.PrimaryBytes != 64*resizeBlock || grown.Base != pool.Base {
		t.Fatalf("after grow: %+v, pool %+v (was %+v)", d, grown, pool)
	}
	// The sequence holds blocks 0..3: a shrink to 2 blocks is refused.
	err = c.Resize(2 * resizeBlock)
	if !errors.Is(err, kvcache.ErrOutOfBlocks) || !strings.Contains(err.Error(), "is in use") {
		t.Fatalf("shrink over a block in use: %v", err)
	}
	must(t, c.Resize(4*resizeBlock))
	if st := stats(t, c); st.NumBlocks != 4 {
		t.Fatalf("after shrink: %+v", st)
	}
}

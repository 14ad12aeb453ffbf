package kvcache_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"kvcache"
	"kvcache/kvc"
)

// Tensor parallelism over 2 CPU ranks: the 2 kv heads of the test model
// split one per rank; each rank's bytes are written with its head and read
// back through its own layer view after a reuse.
func TestTensorParallelTwoRanks(t *testing.T) {
	c := newCache(t, 64, func(cfg *kvcache.Config) {
		must(t, cfg.SetRanks(kvcache.DeviceCPU, []int32{0, 1}))
		r, err := cfg.Ranks()
		must(t, err)
		if len(r) != 2 || r[0] != 0 || r[1] != 1 {
			t.Fatalf("Ranks = %v", r)
		}
	})
	d, err := c.Describe()
	must(t, err)
	if d.NumRanks != 2 || d.MaxHeadReplication != 1 {
		t.Fatalf("Describe = %+v", d)
	}
	g, err := c.DescribeGroup(0)
	must(t, err)
	if g.KVHeads != 2 || g.KVHeadsPerRank != 1 || g.HeadReplication != 1 {
		t.Fatalf("DescribeGroup = %+v", g)
	}
	tokens := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	_, err = c.AddSequence(1, tokens, nil, 0)
	must(t, err)
	slots, _, err := c.SlotMapping(0, []uint64{1})
	must(t, err)
	val := func(tok int32, head, d uint32) float32 { return float32(tok)*100 + float32(head*64+d) }
	for rank := uint32(0); rank < 2; rank++ {
		v, err := c.LayerViewRank(rank, 0)
		must(t, err)
		if v.Rank != rank || v.KVHeads != 1 || v.FirstKVHead != rank || v.TotalKVHeads != 2 {
			t.Fatalf("LayerViewRank(%d) = %+v", rank, v)
		}
		kv := make([]byte, 0, len(tokens)*64*4)
		for _, tok := range tokens {
			for d := uint32(0); d < 64; d++ {
				kv = binary.LittleEndian.AppendUint32(kv, math.Float32bits(val(tok, rank, d)))
			}
		}
		must(t, c.StoreKVHost(&kvcache.HostStoreArgs{Layer: 0, Rank: rank, SrcDType: kvcache.DTypeF32,
			Key: kv, Value: kv, SlotMapping: slots}))
	}
	must(t, c.CommitSequence(1, 9))
	must(t, c.RemoveSequence(1))
	cached, err := c.AddSequence(2, tokens, nil, 0)
	must(t, err)
	if cached != 8 {
		t.Fatalf("cached %d, want 8", cached)
	}
	blocks, err := c.SequenceBlockIDs(2, 0)
	must(t, err)
	for rank := uint32(0); rank < 2; rank++ {
		v, err := c.LayerViewRank(rank, 0)
		must(t, err)
		for pos := 0; pos < 8; pos++ {
			for d := uint32(0); d < 64; d++ {
				at := v.Base + uintptr(uint64(blocks[pos/4])*v.BlockStride+uint64(pos%4)*v.TokenStride+uint64(d)*uint64(v.ElemSize))
				var b [4]byte
				kvc.Kvcgo_buffer_read(&b[0], at, 4)
				have := math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
				if have != val(tokens[pos], rank, d) {
					t.Fatalf("rank %d token %d dim %d: %v", rank, pos, d, have)
				}
			}
		}
	}
	if _, err := c.LayerViewRank(2, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Fatalf("LayerViewRank(2, 0) = %v", err)
	}
}

func TestTensorParallelBadInput(t *testing.T) {
	cfg := newConfig(t, 64)
	defer cfg.Close()
	err := cfg.SetRanks(kvcache.DeviceCPU, []int32{3, 3})
	if !errors.Is(err, kvcache.ErrInvalidArgument) || !strings.Contains(err.Error(), "both 3") {
		t.Fatalf("SetRanks duplicate = %v", err)
	}
	must(t, cfg.SetKVHeads(3))
	must(t, cfg.SetRanks(kvcache.DeviceCPU, []int32{0, 1}))
	if _, err := kvcache.NewCache(cfg); err == nil || !strings.Contains(err.Error(), "3 kv heads, which 2 ranks") {
		t.Fatalf("NewCache = %v", err)
	}
}

// Prefix reuse through the Go binding: counts, salts, a refused add, reused bytes read back.
package kvcache_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"kvcache"
)

func TestPrefixReuseCounts(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partial=%v", partial), func(t *testing.T) {
			c := newCache(t, 64, func(cfg *kvcache.Config) { must(t, cfg.SetPartialReuse(partial)) })
			prompt := tokens(100, 10) // 2 full blocks of 4 + 2 tokens
			if n := mustU64(t)(c.AddSequence(1, prompt, nil, 0)); n != 0 {
				t.Fatalf("first add: %d cached, want 0", n)
			}
			// Nothing is reusable before the commit.
			if n := mustU64(t)(c.Probe(prompt, nil)); n != 0 {
				t.Errorf("probe before commit: %d, want 0", n)
			}
			must(t, c.CommitSequence(1, 10))
			must(t, c.RemoveSequence(1))

			// Full blocks are reused; with partial reuse the tail's tokens
			// too, except the last prompt token, always recomputed.
			want := uint64(8)
			if partial {
				want = 9
			}
			if n := mustU64(t)(c.Probe(prompt, nil)); n != want {
				t.Errorf("probe: %d, want %d", n, want)
			}
			if n := mustU64(t)(c.AddSequence(2, prompt, nil, 0)); n != want {
				t.Errorf("second add: %d cached, want %d", n, want)
			}
			s := stats(t, c)
			if s.ReusedBlocks != 2+boolU64(partial) || s.MissedBlocks != 3+1-boolU64(partial) || s.NumSequences != 1 {
				t.Errorf("stats %+v", s)
			}
			if s.FreeBlocks+s.CachedBlocks+s.InUseBlocks != s.NumBlocks {
				t.Errorf("block states do not add up: %+v", s)
			}
			d, err := c.DescribeSequence(2)
			must(t, err)
			if d.NumTokens != 10 || d.PromptTokens != 10 || d.CachedTokens != want || d.NumBlocks != 3 {
				t.Errorf("DescribeSequence(2) = %+v", d)
			}
			// A prompt sharing only the first block.
			other := append(tokens(100, 4), tokens(500, 6)...)
			if n := mustU64(t)(c.AddSequence(3, other, nil, 0)); n != 4 {
				t.Errorf("shared first block: %d cached, want 4", n)
			}
			ids2, err := c.SequenceBlockIDs(2, 0)
			must(t, err)
			ids3, err := c.SequenceBlockIDs(3, 0)
			must(t, err)
			if len(ids2) != 3 || len(ids3) != 3 || ids2[0] != ids3[0] || ids2[1] == ids3[1] {
				t.Errorf("block ids %v and %v: want the first shared only", ids2, ids3)
			}
			must(t, c.Check())
		})
	}
}

func boolU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func TestSaltIsolation(t *testing.T) {
	c := newCache(t, 256, nil)
	prompt := tokens(7, 9) // 2 full blocks + 1 token
	add := func(id uint64, o *kvcache.SequenceOptions) uint64 {
		t.Helper()
		n := mustU64(t)(c.AddSequence(id, prompt, o, 0))
		must(t, c.CommitSequence(id, uint64(len(prompt))))
		return n
	}
	alice := &kvcache.SequenceOptions{Salt: []byte("alice")}
	if n := add(1, alice); n != 0 {
		t.Fatalf("first add: %d", n)
	}
	for _, tc := range []struct {
		name string
		o    *kvcache.SequenceOptions
		want uint64
	}{
		{"same salt", &kvcache.SequenceOptions{Salt: []byte("alice")}, 8},
		{"other salt", &kvcache.SequenceOptions{Salt: []byte("bob")}, 0},
		{"no salt", nil, 0},
		{"empty salt", &kvcache.SequenceOptions{Salt: []byte{}}, 0},
		{"salt as LoRA", &kvcache.SequenceOptions{LoRA: kvcache.LoRA(0)}, 0},
		{"salt and extra key", &kvcache.SequenceOptions{Salt: []byte("alice"),
			ExtraKeys: []kvcache.ExtraKey{{Offset: 4, Length: 2, Data: []byte("image-1")}}}, 4},
	} {
		if n := mustU64(t)(c.Probe(prompt, tc.o)); n != tc.want {
			t.Errorf("%s: probe %d cached, want %d", tc.name, n, tc.want)
		}
	}
	// Absent and empty salts, no LoRA and LoRA 0 are four scopes: each hits
	// only itself.
	scopes := []*kvcache.SequenceOptions{nil, {Salt: []byte{}}, {LoRA: kvcache.LoRA(0)}, {LoRA: kvcache.LoRA(1)}}
	for i, o := range scopes {
		add(uint64(10+i), o)
	}
	for i, o := range scopes {
		if n := mustU64(t)(c.Probe(prompt, o)); n != 8 {
			t.Errorf("scope %d: probe %d cached, want 8", i, n)
		}
	}
	// Priorities go through to the sequence.
	_, err := c.AddSequence(20, tokens(900, 3), &kvcache.SequenceOptions{
		PromptPriority: kvcache.Priority(80), DecodePriority: kvcache.Priority(5)}, 0)
	must(t, err)
	d, err := c.DescribeSequence(20)
	must(t, err)
	if d.PromptPriority != 80 || d.DecodePriority != 5 {
		t.Errorf("priorities %d/%d, want 80/5", d.PromptPriority, d.DecodePriority)
	}
	if _, err := c.AddSequence(21, tokens(900, 3), &kvcache.SequenceOptions{PromptPriority: kvcache.Priority(101)}, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("priority 101: %v", err)
	}
	must(t, c.Check())
}

func TestOutOfBlocksLeavesStateUnchanged(t *testing.T) {
	c := newCache(t, 32, func(cfg *kvcache.Config) { must(t, cfg.SetPartialReuse(false)) }) // 8 blocks
	_, err := c.AddSequence(1, tokens(0, 12), nil, 0)                                       // 3 blocks
	must(t, err)
	must(t, c.CommitSequence(1, 12))
	_, err = c.AddSequence(2, tokens(100, 8), nil, 0) // 2 blocks
	must(t, err)
	must(t, c.CommitSequence(2, 8))
	must(t, c.RemoveSequence(2)) // 2 cached blocks, 3 free

	type snapshot struct {
		stats    kvcache.Stats
		ids      []int32
		desc     kvcache.SequenceDesc
		probeOld uint64
	}
	snap := func() snapshot {
		ids, err := c.SequenceBlockIDs(1, 0)
		must(t, err)
		d, err := c.DescribeSequence(1)
		must(t, err)
		return snapshot{stats(t, c), ids, d, mustU64(t)(c.Probe(tokens(100, 8), nil))}
	}
	before := snap()

	// 6 blocks needed, 3 free + 2 evictable.
	_, err = c.AddSequence(3, tokens(200, 24), nil, 0)
	var e *kvcache.Error
	if !errors.As(err, &e) || e.Status != kvcache.StatusOutOfBlocks || e.Message == "" {
		t.Fatalf("add beyond capacity = %v, want KVC_ERR_OUT_OF_BLOCKS with a message", err)
	}
	if after := snap(); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed add changed the cache\nbefore %+v\n after %+v", before, after)
	}
	if _, err := c.DescribeSequence(3); !errors.Is(err, kvcache.ErrNotFound) {
		t.Errorf("failed add left sequence 3: %v", err)
	}
	// An extend beyond capacity fails the same way.
	if err := c.ExtendSequence(1, tokens(300, 24), 0); !errors.Is(err, kvcache.ErrOutOfBlocks) {
		t.Fatalf("extend beyond capacity = %v", err)
	}
	if after := snap(); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed extend changed the cache\nbefore %+v\n after %+v", before, after)
	}
	// A batch step where one sequence does not fit changes none.
	_, err = c.AddSequence(4, tokens(400, 4), nil, 0)
	must(t, err)
	before = snap()
	if err := c.BatchExtend([]uint64{1, 4, 99}, []int32{1, 2, 3}, 0); !errors.Is(err, kvcache.ErrNotFound) {
		t.Errorf("batch with an unknown id = %v", err)
	}
	if after := snap(); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed batch extend changed the cache\nbefore %+v\n after %+v", before, after)
	}
	must(t, c.Check())
}

// A second request reuses the first one's prefix: it stores K/V only where
// its slot mapping is not -1, and decode attention reads the reused blocks
// written for the first request.
func TestReusedPrefixIsReadBack(t *testing.T) {
	c := newCache(t, 64, func(cfg *kvcache.Config) { must(t, cfg.SetPartialReuse(false)) })
	const heads, dim = 2, 64
	// K is zero, so attention averages V; V of token position p is p+1.
	kv := func(positions []int) (key, value []byte) {
		k := make([]float32, len(positions)*heads*dim)
		v := make([]float32, len(positions)*heads*dim)
		for i, p := range positions {
			for j := 0; j < heads*dim; j++ {
				v[i*heads*dim+j] = float32(p + 1)
			}
		}
		return f32Bytes(k), f32Bytes(v)
	}
	store := func(id uint64) int {
		t.Helper()
		slots, _, err := c.SlotMapping(0, []uint64{id})
		must(t, err)
		var positions []int
		var written []int64
		d, err := c.DescribeSequence(id)
		must(t, err)
		first := int(d.NumTokens) - len(slots)
		for i, s := range slots {
			if s >= 0 {
				positions = append(positions, first+i)
				written = append(written, s)
			}
		}
		if len(written) > 0 {
			k, v := kv(positions)
			for layer := uint32(0); layer < 2; layer++ {
				must(t, c.StoreKVHost(&kvcache.HostStoreArgs{Layer: layer, SrcDType: kvcache.DTypeF32, Key: k, Value: v, SlotMapping: written}))
			}
		}
		return len(written)
	}
	prompt := tokens(40, 10)
	_, err := c.AddSequence(1, prompt, nil, 0)
	must(t, err)
	if n := store(1); n != 10 {
		t.Fatalf("request 1 wrote %d tokens, want 10", n)
	}
	must(t, c.CommitSequence(1, 10))
	must(t, c.RemoveSequence(1))

	cached := mustU64(t)(c.AddSequence(2, prompt, nil, 0))
	if cached != 8 {
		t.Fatalf("request 2: %d cached, want 8", cached)
	}
	if n := store(2); n != 2 {
		t.Fatalf("request 2 wrote %d tokens, want 2 (the rest is reused)", n)
	}
	table, stride, err := c.BlockTable(0, []uint64{2}, -1)
	must(t, err)
	out := make([]byte, heads*dim*4)
	must(t, c.DecodeAttentionHost(&kvcache.HostDecodeArgs{
		Layer: 1, QHeads: heads, QDType: kvcache.DTypeF32, Query: make([]byte, len(out)), Out: out,
		SeqLens: []int32{10}, BlockTable: table, TableStride: uint32(stride), MaxSeqLen: 10,
	}))
	const want = float32(5.5) // mean of 1..10
	for i := 0; i < heads*dim; i++ {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])); math.Abs(float64(got-want)) > 1e-4 {
			t.Fatalf("out[%d] = %g, want %g: reused blocks do not hold request 1's V", i, got, want)
		}
	}
}

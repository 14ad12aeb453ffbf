package kvcache_test

import (
	"errors"
	"strings"
	"testing"

	"kvcache"
	"kvcache/kvc"
)

// A small hybrid: 1 attention layer; SSM 2x4x8 f32, conv 24x4 (n_groups 1),
// conv 17x4 (local), generic 100 B aligned 512, unpaged 16 B x 32 tokens.
func newStateCache(t *testing.T, slots uint32) *kvcache.Cache {
	t.Helper()
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	for _, err := range []error{cfg.SetNumLayers(1), cfg.SetKVHeads(1), cfg.SetHeadDim(8),
		cfg.SetPrimaryBytes(1 << 20), cfg.SetMaxStateSlots(slots)} {
		must(t, err)
	}
	add := func(i uint32, err error) uint32 { must(t, err); return i }
	if add(cfg.AddSSMState(2, 4, 8, kvcache.DTypeF32)) != 0 ||
		add(cfg.AddConvState(24, 4, kvcache.DTypeF32)) != 1 ||
		add(cfg.AddConvState(17, 4, kvcache.DTypeF32)) != 2 ||
		add(cfg.AddGenericState(100, 512)) != 3 ||
		add(cfg.AddUnpagedResource(16, 32)) != 4 {
		t.Fatal("resource indices")
	}
	if n, err := cfg.NumResources(); err != nil || n != 5 {
		t.Fatalf("NumResources = %d, %v", n, err)
	}
	if n, err := cfg.MaxStateSlots(); err != nil || n != slots {
		t.Fatalf("MaxStateSlots = %d, %v", n, err)
	}
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStateDescribeSlotsAndForkCopy(t *testing.T) {
	c := newStateCache(t, 2)
	d, err := c.Describe()
	must(t, err)
	if d.NumResources != 5 || d.NumStateSlots != 2 {
		t.Fatalf("describe: %+v", d)
	}
	conv, err := c.DescribeResource(1)
	must(t, err)
	if conv.Kind != kvcache.ResourceConv || !conv.Managed || conv.NGroups != 1 {
		t.Fatalf("conv: %+v", conv)
	}
	bad, err := c.DescribeResource(2)
	must(t, err)
	if bad.Managed || bad.Reason != kvcache.ReasonNGroups || !strings.Contains(bad.ReasonText, "no integer n_groups") {
		t.Fatalf("local conv: %+v", bad)
	}
	ssm, err := c.DescribeResource(0)
	must(t, err)
	if ssm.Strides != [3]uint64{128, 32, 4} {
		t.Fatalf("ssm strides %v", ssm.Strides)
	}
	_, err = c.AddSequence(1, []int32{1, 2, 3}, nil, 0)
	must(t, err)
	s1, err := c.StateSlotsAll([]uint64{1})
	must(t, err)
	views := make([]kvcache.ResourceDesc, 5)
	for r := range views {
		views[r], err = c.DescribeResource(uint32(r))
		must(t, err)
		v := views[r]
		b := make([]byte, v.SlotBytes)
		for i := range b {
			b[i] = byte(i*13 + r)
		}
		kvc.Kvcgo_buffer_write(v.Base+uintptr(uint64(s1[r])*v.SlotStride), &b[0], v.SlotBytes)
	}
	must(t, c.ForkSequence(1, 2))
	s2, err := c.StateSlotsAll([]uint64{2})
	must(t, err)
	for r, v := range views {
		a := make([]byte, v.SlotBytes)
		b := make([]byte, v.SlotBytes)
		kvc.Kvcgo_buffer_read(&a[0], v.Base+uintptr(uint64(s1[r])*v.SlotStride), v.SlotBytes)
		kvc.Kvcgo_buffer_read(&b[0], v.Base+uintptr(uint64(s2[r])*v.SlotStride), v.SlotBytes)
		if string(a) != string(b) {
			t.Fatalf("resource %d: the fork's state differs", r)
		}
	}
	var e *kvcache.Error
	_, err = c.AddSequence(3, []int32{1}, nil, 0)
	if !errors.As(err, &e) || e.Status != kvcache.StatusOutOfBlocks || !strings.Contains(e.Message, "no free state slot") {
		t.Fatalf("add over the slots: %v", err)
	}
	must(t, c.RemoveSequence(1))
	got, err := c.StateSlots([]uint64{2}, 0)
	must(t, err)
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("StateSlots = %v", got)
	}
	must(t, c.Check())
	err = c.RewindSequence(2, 1)
	if !errors.As(err, &e) || e.Status != kvcache.StatusInvalidState {
		t.Fatalf("rewind: %v", err)
	}
}

func TestStateBadInput(t *testing.T) {
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	var e *kvcache.Error
	_, err = cfg.AddSSMState(0, 4, 8, kvcache.DTypeF32)
	if !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument || !strings.Contains(e.Message, "num_heads must be > 0, got 0") {
		t.Fatalf("AddSSMState(0): %v", err)
	}
	c := newStateCache(t, 2)
	if _, err := c.DescribeResource(5); !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument {
		t.Fatalf("DescribeResource(5): %v", err)
	}
	if _, err := c.StateSlots([]uint64{7}, 0); !errors.As(err, &e) || e.Status != kvcache.StatusNotFound {
		t.Fatalf("StateSlots(7): %v", err)
	}
}

// writeOrCheck writes seed's pattern into every slot of sequence id, or
// reports whether the slots hold it.
func writeOrCheck(t *testing.T, c *kvcache.Cache, id uint64, seed byte, write bool) bool {
	t.Helper()
	slots, err := c.StateSlotsAll([]uint64{id})
	must(t, err)
	same := true
	for r, s := range slots {
		v, err := c.DescribeResource(uint32(r))
		must(t, err)
		want := make([]byte, v.SlotBytes)
		for i := range want {
			want[i] = byte(i*7) + seed + byte(r)
		}
		at := v.Base + uintptr(uint64(s)*v.SlotStride)
		if write {
			kvc.Kvcgo_buffer_write(at, &want[0], v.SlotBytes)
			continue
		}
		have := make([]byte, v.SlotBytes)
		kvc.Kvcgo_buffer_read(&have[0], at, v.SlotBytes)
		same = same && string(have) == string(want)
	}
	return same
}

func TestStateSnapshotsPublishReuseRewind(t *testing.T) {
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	for _, err := range []error{cfg.SetNumLayers(1), cfg.SetKVHeads(1), cfg.SetHeadDim(8),
		cfg.SetTokensPerBlock(4), cfg.SetPrimaryBytes(1 << 20), cfg.SetMaxStateSlots(4),
		cfg.SetMaxStateSnapshots(3)} {
		must(t, err)
	}
	if n, err := cfg.MaxStateSnapshots(); err != nil || n != 3 {
		t.Fatalf("MaxStateSnapshots = %d, %v", n, err)
	}
	_, err = cfg.AddSSMState(2, 4, 8, kvcache.DTypeF32)
	must(t, err)
	_, err = cfg.AddConvState(24, 4, kvcache.DTypeF32)
	must(t, err)
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	defer c.Close()
	tokens := make([]int32, 12)
	for i := range tokens {
		tokens[i] = int32(100 + i)
	}
	_, err = c.AddSequence(1, tokens[:10], nil, 0)
	must(t, err)
	writeOrCheck(t, c, 1, 8, true)
	must(t, c.CommitSequence(1, 8))
	must(t, c.PublishState(1, 8, 0))
	var e *kvcache.Error
	if err := c.PublishState(1, 6, 0); !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument ||
		!strings.Contains(e.Message, "position 6 is not a positive multiple") {
		t.Fatalf("PublishState(6): %v", err)
	}
	// Speculative decoding: drafts run; the state goes back to 8 only.
	must(t, c.ExtendSequence(1, tokens[10:12], 0))
	writeOrCheck(t, c, 1, 99, true)
	if err := c.RewindSequence(1, 3); !errors.As(err, &e) || e.Status != kvcache.StatusInvalidState {
		t.Fatalf("rewind to 9: %v", err)
	}
	must(t, c.RewindSequence(1, 4))
	if !writeOrCheck(t, c, 1, 8, false) {
		t.Fatal("rewind did not restore the published state")
	}
	must(t, c.RemoveSequence(1))
	cached, err := c.AddSequence(2, tokens, nil, 0)
	must(t, err)
	if cached != 8 || !writeOrCheck(t, c, 2, 8, false) {
		t.Fatalf("reuse: cached %d, or the state differs", cached)
	}
	s, err := c.SnapshotStats()
	must(t, err)
	if s.NumSlots != 3 || s.SlotsUsed != 1 || s.Published != 1 || s.Hits != 1 || s.HitTokens != 8 ||
		s.Restores != 1 || s.Evicted != 0 || s.Dropped != 0 || s.BytesPerSnapshot != 256+384 ||
		s.Bytes != 3*(256+512) {
		t.Fatalf("SnapshotStats: %+v", s)
	}
	must(t, c.Check())
}

// With a host tier, a quarter of its bytes holds host snapshots: a full
// device pool moves its victim there, and a reuse restores it bit for bit.
func TestStateSnapshotsOffloadToHost(t *testing.T) {
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	// A slot of every resource is 256 + 512 bytes: 4096 host bytes hold one.
	for _, err := range []error{cfg.SetNumLayers(1), cfg.SetKVHeads(1), cfg.SetHeadDim(8),
		cfg.SetTokensPerBlock(4), cfg.SetPrimaryBytes(1 << 20), cfg.SetMaxStateSlots(4),
		cfg.SetMaxStateSnapshots(1), cfg.SetHostCacheBytes(4096)} {
		must(t, err)
	}
	_, err = cfg.AddSSMState(2, 4, 8, kvcache.DTypeF32)
	must(t, err)
	_, err = cfg.AddConvState(24, 4, kvcache.DTypeF32)
	must(t, err)
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	defer c.Close()
	a := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	b := []int32{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	for i, p := range [][]int32{a, b} {
		id := uint64(i + 1)
		_, err = c.AddSequence(id, p, nil, 0)
		must(t, err)
		writeOrCheck(t, c, id, byte(8+i), true)
		must(t, c.CommitSequence(id, 8))
		must(t, c.PublishState(id, 8, 0)) // b's publish moves a's snapshot to the host
		must(t, c.RemoveSequence(id))
	}
	cached, err := c.AddSequence(3, a, nil, 0)
	must(t, err)
	if cached != 8 || !writeOrCheck(t, c, 3, 8, false) {
		t.Fatalf("reuse from the host: cached %d, or the state differs", cached)
	}
	s, err := c.SnapshotStats()
	must(t, err)
	if s.HostNumSlots != 1 || s.HostSlotsUsed != 1 || s.HostBytes != 256+512 || s.Offloaded != 1 ||
		s.Onboarded != 1 || s.HostEvicted != 0 || s.Evicted != 0 || s.Hits != 1 {
		t.Fatalf("SnapshotStats: %+v", s)
	}
	must(t, c.Check())
}

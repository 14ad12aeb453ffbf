package kvcache_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"kvcache"
	"kvcache/kvc"
)

// blockBytes reads block id of group 0 of a CPU cache.
func blockBytes(t *testing.T, c *kvcache.Cache, id int32) []byte {
	t.Helper()
	v, err := c.LayerView(0)
	must(t, err)
	g, err := c.DescribeGroup(0)
	must(t, err)
	out := make([]byte, g.BlockBytes)
	kvc.Kvcgo_buffer_read(&out[0], v.Base+uintptr(uint64(id)*v.BlockStride), g.BlockBytes)
	return out
}

func writeBlock(t *testing.T, c *kvcache.Cache, id int32, b []byte) {
	t.Helper()
	v, err := c.LayerView(0)
	must(t, err)
	kvc.Kvcgo_buffer_write(v.Base+uintptr(uint64(id)*v.BlockStride), &b[0], uint64(len(b)))
}

// prefillBlocks adds sequence id, writes a pattern into each full block and
// commits every token.
func prefillBlocks(t *testing.T, c *kvcache.Cache, id uint64, prompt []int32) {
	t.Helper()
	_, err := c.AddSequence(id, prompt, nil, 0)
	must(t, err)
	ids, err := c.SequenceBlockIDs(id, 0)
	must(t, err)
	for b, blk := range ids {
		data := blockBytes(t, c, blk)
		for i := range data {
			data[i] = byte(b*31 + i*7)
		}
		writeBlock(t, c, blk, data)
	}
	must(t, c.CommitSequence(id, uint64(len(prompt))))
}

func TestTransferMovesBlocksBitForBit(t *testing.T) {
	a := newCache(t, 256, nil)
	b := newCache(t, 256, nil)
	prompt := tokens(100, 6*4+1)
	prefillBlocks(t, a, 1, prompt)
	exp, err := a.ExportSequence(1, 0)
	must(t, err)
	defer exp.Close()
	d, err := exp.Describe()
	must(t, err)
	if d.NumBlocks != 6 || d.NumTokens != 24 || d.FirstBlock != 0 || d.SeqID != 1 || d.NumGroups != 1 || d.TokensPerBlock != 4 {
		t.Fatalf("export %+v", d)
	}
	keys, err := exp.Keys()
	must(t, err)
	if uint64(len(keys)) != d.KeysBytes || string(keys[:8]) != "KVCXFERK" {
		t.Fatalf("keys of %d bytes", len(keys))
	}
	src, err := exp.BlockIDs(0)
	must(t, err)

	imp, err := b.ImportBegin(7, prompt, nil, keys)
	must(t, err)
	defer imp.Close()
	di, err := imp.Describe()
	must(t, err)
	if di.FirstBlock != 0 || di.NumBlocks != 6 || di.SeqID != 7 {
		t.Fatalf("import %+v", di)
	}
	dst, err := imp.BlockIDs(0)
	must(t, err)
	for i, to := range dst {
		writeBlock(t, b, to, blockBytes(t, a, src[i]))
	}
	var e *kvcache.Error
	if err := imp.Complete(1); !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument ||
		!strings.Contains(e.Message, "expects 6") {
		t.Fatalf("wrong count: %v", err)
	}
	must(t, imp.Complete(uint64(len(dst))))
	if err := imp.Abort(); !errors.As(err, &e) || e.Status != kvcache.StatusInvalidState {
		t.Fatalf("abort after complete: %v", err)
	}
	must(t, imp.Close())
	must(t, exp.Close())
	must(t, b.RemoveSequence(7))

	cached, err := b.AddSequence(8, prompt, nil, 0)
	must(t, err)
	if cached != 24 {
		t.Fatalf("cached %d, want 24", cached)
	}
	ids, err := b.SequenceBlockIDs(8, 0)
	must(t, err)
	for i := 0; i < 6; i++ {
		if !bytes.Equal(blockBytes(t, b, ids[i]), blockBytes(t, a, src[i])) {
			t.Fatalf("block %d differs", i)
		}
	}
}

func TestTransferRefusesAnotherPromptOrSalt(t *testing.T) {
	a := newCache(t, 256, nil)
	b := newCache(t, 256, nil)
	prompt := tokens(5, 24)
	prefillBlocks(t, a, 1, prompt)
	exp, err := a.ExportSequence(1, 0)
	must(t, err)
	keys, err := exp.Keys()
	must(t, err)
	must(t, exp.Close())
	before := stats(t, b)

	other := append([]int32(nil), prompt...)
	other[9]++
	var e *kvcache.Error
	if _, err := b.ImportBegin(7, other, nil, keys); !errors.As(err, &e) ||
		e.Status != kvcache.StatusInvalidArgument || !strings.Contains(e.Message, "block 2 differs") {
		t.Fatalf("other prompt: %v", err)
	}
	if _, err := b.ImportBegin(7, prompt, &kvcache.SequenceOptions{Salt: []byte("tenant")}, keys); !errors.As(err, &e) ||
		!strings.Contains(e.Message, "another cache salt") {
		t.Fatalf("salt: %v", err)
	}
	if _, err := b.ImportBegin(7, prompt, nil, keys[:len(keys)-1]); !errors.As(err, &e) ||
		!strings.Contains(e.Message, "truncated") {
		t.Fatalf("truncated: %v", err)
	}
	if got := stats(t, b); got != before {
		t.Fatalf("stats changed: %+v", got)
	}
	imp, err := b.ImportBegin(7, prompt, nil, keys)
	must(t, err)
	must(t, imp.Abort())
	must(t, imp.Close())
	if after := stats(t, b); after != before {
		t.Fatalf("abort left %+v, before %+v", after, before)
	}
	if _, err := exp.Describe(); !errors.Is(err, kvcache.ErrClosed) {
		t.Fatalf("closed export: %v", err)
	}
}

// Sharing pool memory with another process is the CUDA backend's
// (tests/gpu/test_ipc_transfer_gpu.cpp): the CPU backend refuses both
// calls with the reason; bad indices are named.
func TestPoolShareRefusedOnTheCPUBackend(t *testing.T) {
	c := newCache(t, 256, nil)
	var e *kvcache.Error
	if _, err := c.DescribePoolShare(0, 0); !errors.As(err, &e) || e.Status != kvcache.StatusUnsupported ||
		!strings.Contains(e.Message, "the cpu device cannot share pool memory with another process") {
		t.Fatalf("describe: %v", err)
	}
	if _, err := c.ExportPoolChunk(0, 0, 0); !errors.As(err, &e) || e.Status != kvcache.StatusUnsupported {
		t.Fatalf("export: %v", err)
	}
	if _, err := c.DescribePoolShare(1, 0); !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument ||
		!strings.Contains(e.Message, "rank must be < num_ranks (1), got 1") {
		t.Fatalf("rank: %v", err)
	}
	if _, err := c.ExportPoolChunk(0, 9, 0); !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument ||
		!strings.Contains(e.Message, "pool must be < num_pools (1), got 9") {
		t.Fatalf("pool: %v", err)
	}
	if kvcache.ShareHandlePosixFD != kvc.KVC_SHARE_HANDLE_POSIX_FD {
		t.Fatalf("ShareHandlePosixFD %d, C %d", kvcache.ShareHandlePosixFD, kvc.KVC_SHARE_HANDLE_POSIX_FD)
	}
}

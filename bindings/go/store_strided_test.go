package kvcache_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"kvcache"
	"kvcache/kvc"
)

// poolBytes copies pool 0 of a CPU cache out of C memory.
func poolBytes(t *testing.T, c *kvcache.Cache) []byte {
	t.Helper()
	p, err := c.DescribePool(0)
	must(t, err)
	out := make([]byte, p.Bytes)
	kvc.Kvcgo_buffer_read(&out[0], p.Base, p.Bytes)
	return out
}

// StoreKVStridedHost reads a model's [batch][kv_heads][n][head_dim] tensors
// (a slice of longer ones) and leaves the pool as StoreKVHost leaves it
// from the contiguous copy; a bad seq_len changes nothing.
func TestStoreKVStrided(t *testing.T) {
	const batch, heads, nAlloc, first, n, dim = 2, 2, 5, 1, 3, 64
	strided := newCache(t, 64, nil)
	plain := newCache(t, 64, nil)
	for _, c := range []*kvcache.Cache{strided, plain} {
		p, err := c.DescribePool(0)
		must(t, err)
		zero := make([]byte, p.Bytes)
		kvc.Kvcgo_buffer_write(p.Base, &zero[0], p.Bytes)
	}
	key := make([]float32, batch*heads*nAlloc*dim)
	value := make([]float32, len(key))
	for i := range key {
		key[i] = float32(i)*0.5 + 1
		value[i] = -float32(i)
	}
	slots := []int64{3, 9, -1, 20, 21, 0}
	// The gathered [batch*n][heads][dim] copy, for StoreKVHost.
	var gk, gv []float32
	for b := 0; b < batch; b++ {
		for tok := first; tok < first+n; tok++ {
			for h := 0; h < heads; h++ {
				at := ((b*heads+h)*nAlloc + tok) * dim
				gk = append(gk, key[at:at+dim]...)
				gv = append(gv, value[at:at+dim]...)
			}
		}
	}
	must(t, plain.StoreKVHost(&kvcache.HostStoreArgs{
		Layer: 1, SrcDType: kvcache.DTypeF32, Key: f32Bytes(gk), Value: f32Bytes(gv), SlotMapping: slots,
	}))
	st := &kvcache.StoreStrides{
		SeqLen: n,
		Key:    [3]int64{heads * nAlloc * dim, dim, nAlloc * dim},
		Value:  [3]int64{heads * nAlloc * dim, dim, nAlloc * dim},
	}
	off := first * dim * 4
	must(t, strided.StoreKVStridedHost(&kvcache.HostStoreArgs{
		Layer: 1, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key)[off:], Value: f32Bytes(value)[off:], SlotMapping: slots,
	}, st))
	want := poolBytes(t, plain)
	if !bytes.Equal(poolBytes(t, strided), want) {
		t.Fatal("the strided store differs from the contiguous one")
	}
	bad := *st
	bad.SeqLen = 4
	err := strided.StoreKVStridedHost(&kvcache.HostStoreArgs{
		Layer: 1, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key), Value: f32Bytes(value), SlotMapping: slots,
	}, &bad)
	var e *kvcache.Error
	if !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument || e.Op != "kvc_store_kv_strided" ||
		!strings.Contains(e.Message, "num_tokens (6) must be a multiple of strides->seq_len (4)") {
		t.Errorf("seq_len 4 for 6 tokens = %v", err)
	}
	if !bytes.Equal(poolBytes(t, strided), want) {
		t.Error("a refused store changed the pool")
	}
	if err := strided.StoreKVStrided(&kvcache.StoreArgs{Layer: 0, NumTokens: 1, SrcDType: kvcache.DTypeF32}, st, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("StoreKVStrided with NULL buffers = %v", err)
	}
}

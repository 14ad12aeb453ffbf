// The CPU kernels (store, gather, decode) through the Go binding, on host memory.
package kvcache_test

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"kvcache"
	"kvcache/kvc"
)

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestKernelsOnHostMemory(t *testing.T) {
	c := newCache(t, 64, nil)
	_, err := c.AddSequence(1, tokens(0, 3), nil, 0)
	must(t, err)
	slots, _, err := c.SlotMapping(0, []uint64{1})
	must(t, err)
	const heads, dim = 2, 64
	key := make([]float32, 3*heads*dim)
	value := make([]float32, 3*heads*dim)
	for i := range key {
		key[i] = float32(i%7) * 0.01
		value[i] = float32(i)
	}
	must(t, c.StoreKVHost(&kvcache.HostStoreArgs{
		Layer: 1, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key), Value: f32Bytes(value), SlotMapping: slots,
	}))
	// With keys all zero, attention averages V over the 3 tokens.
	for i := range key {
		key[i] = 0
	}
	must(t, c.StoreKVHost(&kvcache.HostStoreArgs{
		Layer: 1, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key), Value: f32Bytes(value), SlotMapping: slots,
	}))
	table, stride, err := c.BlockTable(0, []uint64{1}, -1)
	must(t, err)
	query := f32Bytes(make([]float32, 4*dim)) // 4 query heads: GQA over 2 kv heads
	out := make([]byte, len(query))
	// kvc_decode_workspace_size checks that the pointers are set (though it
	// does not read them): give it a C buffer.
	scratch := kvc.Kvcgo_buffer_new(nil, 64)
	defer kvc.Kvcgo_buffer_free(scratch)
	ws, err := c.DecodeWorkspaceSize(&kvcache.DecodeArgs{Layer: 1, Batch: 1, QHeads: 4, QDType: kvcache.DTypeF32, MaxSeqLen: 3,
		Query: scratch, Out: scratch, SeqLens: scratch, BlockTable: scratch, TableStride: 1})
	must(t, err)
	if ws != 0 {
		t.Errorf("workspace on a CPU cache: %d", ws)
	}
	must(t, c.DecodeAttentionHost(&kvcache.HostDecodeArgs{
		Layer: 1, QHeads: 4, QDType: kvcache.DTypeF32, Query: query, Out: out,
		SeqLens: []int32{3}, BlockTable: table, TableStride: uint32(stride), MaxSeqLen: 3,
	}))
	for h := 0; h < 4; h++ {
		kvh := h / 2
		for d := 0; d < dim; d++ {
			want := (value[(0*heads+kvh)*dim+d] + value[(1*heads+kvh)*dim+d] + value[(2*heads+kvh)*dim+d]) / 3
			got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*(h*dim+d):]))
			if math.Abs(float64(got-want)) > 1e-3*math.Abs(float64(want))+1e-4 {
				t.Fatalf("out[head %d][%d] = %g, want %g", h, d, got, want)
			}
		}
	}
	// CSR gives the same.
	csr, err := c.BlockTableCSR(0, []uint64{1})
	must(t, err)
	out2 := make([]byte, len(out))
	must(t, c.DecodeAttentionHost(&kvcache.HostDecodeArgs{
		Layer: 1, QHeads: 4, QDType: kvcache.DTypeF32, Query: query, Out: out2,
		SeqLens: []int32{3}, BlockTable: csr.Indices, Indptr: csr.Indptr, MaxSeqLen: 3,
	}))
	if !reflect.DeepEqual(out, out2) {
		t.Errorf("CSR and padded tables differ")
	}
	// Block copies, and their argument checks.
	ids, err := c.SequenceBlockIDs(1, 0)
	must(t, err)
	must(t, c.CopyBlocks(0, []int32{ids[0]}, []int32{15}, []uint32{2}, 0))
	if err := c.CopyBlocks(0, []int32{ids[0]}, []int32{16}, nil, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("copy to block 16 of 16 = %v", err)
	}
	// Argument errors of the kernels carry the library's message.
	err = c.StoreKVHost(&kvcache.HostStoreArgs{Layer: 5, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key[:heads*dim]),
		Value: f32Bytes(value[:heads*dim]), SlotMapping: []int64{0}})
	var e *kvcache.Error
	if !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument || e.Op != "kvc_store_kv" || !strings.Contains(e.Message, "5") {
		t.Errorf("store to layer 5 = %v", err)
	}
	err = c.StoreKVHost(&kvcache.HostStoreArgs{Layer: 0, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key[:heads*dim]),
		Value: f32Bytes(value[:heads*dim]), SlotMapping: []int64{64}})
	if !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("store to slot 64 of 64 = %v", err)
	}
	if err := c.StoreKV(&kvcache.StoreArgs{Layer: 0, NumTokens: 1, SrcDType: kvcache.DTypeF32}, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("StoreKV with NULL buffers = %v", err)
	}
	if err := c.DecodeAttention(&kvcache.DecodeArgs{Layer: 0, Batch: 1, QHeads: 3, QDType: kvcache.DTypeF32, MaxSeqLen: 3}, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("DecodeAttention with 3 query heads = %v", err)
	}
	must(t, c.AsyncError(0))
	must(t, c.Check())
}

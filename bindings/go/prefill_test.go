package kvcache_test

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"kvcache"
)

// Prefill attention on a CPU cache: with every key zero, query row i of a
// chunk averages V over the tokens it sees causally, and its log-sum-exp
// is log(tokens seen).
func TestPrefillAttentionOnHostMemory(t *testing.T) {
	c := newCache(t, 64, nil)
	_, err := c.AddSequence(1, tokens(0, 3), nil, 0)
	must(t, err)
	slots, _, err := c.SlotMapping(0, []uint64{1})
	must(t, err)
	const heads, dim, qHeads = 2, 64, 4
	key := make([]float32, 3*heads*dim)
	value := make([]float32, 3*heads*dim)
	for i := range value {
		value[i] = float32(i % 11)
	}
	must(t, c.StoreKVHost(&kvcache.HostStoreArgs{
		Layer: 1, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key), Value: f32Bytes(value), SlotMapping: slots,
	}))
	table, stride, err := c.BlockTable(0, []uint64{1}, -1)
	must(t, err)
	// The last 2 of the 3 tokens are new: rows at positions 1 and 2.
	query := f32Bytes(make([]float32, 2*qHeads*dim))
	out := make([]byte, len(query))
	lse := make([]float32, 2*qHeads)
	ws, err := c.PrefillWorkspaceSize(&kvcache.PrefillArgs{Layer: 1, QHeads: qHeads, QDType: kvcache.DTypeF32,
		KVLens: []int32{3}, TotalQ: 2, MaxKVLen: 3, TableStride: uint32(stride)})
	must(t, err)
	if ws != 0 {
		t.Errorf("workspace on a CPU cache: %d", ws)
	}
	args := kvcache.HostPrefillArgs{
		Layer: 1, QHeads: qHeads, QDType: kvcache.DTypeF32, QOIndptr: []int32{0, 2}, KVLens: []int32{3},
		Query: query, Out: out, LSE: lse, BlockTable: table, TableStride: uint32(stride), MaxKVLen: 3,
	}
	must(t, c.PrefillAttentionHost(&args))
	for row := 0; row < 2; row++ {
		seen := row + 2
		for h := 0; h < qHeads; h++ {
			kvh := h / 2
			for d := 0; d < dim; d++ {
				want := float32(0)
				for tok := 0; tok < seen; tok++ {
					want += value[(tok*heads+kvh)*dim+d]
				}
				want /= float32(seen)
				got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*((row*qHeads+h)*dim+d):]))
				if math.Abs(float64(got-want)) > 1e-4*math.Abs(float64(want))+1e-5 {
					t.Fatalf("out[row %d][head %d][%d] = %g, want %g", row, h, d, got, want)
				}
			}
			if got, want := lse[row*qHeads+h], float32(math.Log(float64(seen))); math.Abs(float64(got-want)) > 1e-5 {
				t.Errorf("lse[row %d][head %d] = %g, want %g", row, h, got, want)
			}
		}
	}
	// CSR gives the same.
	csr, err := c.BlockTableCSR(0, []uint64{1})
	must(t, err)
	out2 := make([]byte, len(out))
	csrArgs := args
	csrArgs.Out, csrArgs.LSE, csrArgs.BlockTable, csrArgs.Indptr, csrArgs.TableStride = out2, nil, csr.Indices, csr.Indptr, 0
	must(t, c.PrefillAttentionHost(&csrArgs))
	if !reflect.DeepEqual(out, out2) {
		t.Errorf("CSR and padded tables differ")
	}
	// More new tokens than the sequence holds: the library's message.
	bad := args
	bad.KVLens = []int32{1}
	err = c.PrefillAttentionHost(&bad)
	var e *kvcache.Error
	if !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument ||
		!strings.Contains(e.Message, "q_len 2 (qo_indptr) above its kv_len 1") {
		t.Errorf("q_len above kv_len = %v", err)
	}
	// A Go buffer shorter than the rows need: refused before the call.
	short := args
	short.Query = query[:8]
	if err := c.PrefillAttentionHost(&short); !errors.Is(err, kvcache.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "Query and Out must hold") {
		t.Errorf("short Query = %v", err)
	}
	if err := c.PrefillAttention(&kvcache.PrefillArgs{Layer: 0, QHeads: 3, QDType: kvcache.DTypeF32,
		QOIndptr: []int32{0, 1}, KVLens: []int32{1}, MaxKVLen: 1}, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("PrefillAttention with 3 query heads = %v", err)
	}
	must(t, c.AsyncError(0))
}

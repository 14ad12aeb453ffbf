package kvcache_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"

	"kvcache"
	"kvcache/kvc"
)

const (
	sB = 4  // beams
	sH = 2  // kv heads
	sD = 64 // head dim
)

func newStateful(t *testing.T, layers uint32, o kvcache.StatefulOptions) *kvcache.StatefulCache {
	t.Helper()
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	must(t, cfg.SetNumLayers(layers))
	must(t, cfg.SetKVHeads(sH))
	must(t, cfg.SetHeadDim(sD))
	must(t, cfg.SetDType(kvcache.DTypeF32))
	c, err := kvcache.NewStatefulCache(cfg, &o)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func randomF32(r *rand.Rand, n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(r.Float32()*2-1))
	}
	return b
}

// history[row][kv][head] holds a beam's positions, head-dim floats each.
type history [][][][]byte

// appendStep appends n random tokens to every row (HND input) and records them.
func appendStep(t *testing.T, c *kvcache.StatefulCache, h history, r *rand.Rand, n int) {
	t.Helper()
	k, v := randomF32(r, sB*sH*n*sD), randomF32(r, sB*sH*n*sD)
	must(t, c.AppendHost(0, uint32(n), kvcache.DTypeF32, k, v, nil))
	for row := 0; row < sB; row++ {
		for kv, src := range [][]byte{k, v} {
			for head := 0; head < sH; head++ {
				at := 4 * (row*sH + head) * n * sD
				h[row][kv][head] = append(h[row][kv][head], src[at:at+4*n*sD]...)
			}
		}
	}
}

// readRow reads a row's K/V through the view and its beam table.
func readRow(t *testing.T, c *kvcache.StatefulCache, row int) [][][]byte {
	t.Helper()
	v, err := c.View(0)
	must(t, err)
	lens, err := c.Lengths(0)
	must(t, err)
	out := [][][]byte{make([][]byte, sH), make([][]byte, sH)}
	for kv, base := range []uintptr{v.Key, v.Value} {
		for head := 0; head < sH; head++ {
			for pos := 0; pos < int(lens[row]); pos++ {
				src := uint64(row)
				if v.BeamTable != 0 {
					var e [4]byte
					kvc.Kvcgo_buffer_read(&e[0], v.BeamTable+uintptr(4*(row*int(v.BeamTableStride)+pos)), 4)
					src = uint64(binary.LittleEndian.Uint32(e[:]))
				}
				buf := make([]byte, 4*sD)
				addr := base + uintptr(src*v.RowStride+uint64(head)*v.HeadStride+uint64(pos)*v.TokenStride)
				kvc.Kvcgo_buffer_read(&buf[0], addr, uint64(len(buf)))
				out[kv][head] = append(out[kv][head], buf...)
			}
		}
	}
	return out
}

func TestStatefulBeamSearch(t *testing.T) {
	c := newStateful(t, 1, kvcache.StatefulOptions{Batch: sB, GrowthStep: 16})
	r := rand.New(rand.NewSource(3))
	h := make(history, sB)
	for i := range h {
		h[i] = [][][]byte{make([][]byte, sH), make([][]byte, sH)}
	}
	appendStep(t, c, h, r, 5)
	for step := 0; step < 40; step++ {
		idx := make([]int32, sB)
		for i := range idx {
			idx[i] = int32(r.Intn(2))
		}
		must(t, c.Reorder(idx, 0))
		next := make(history, sB)
		for i, s := range idx {
			next[i] = [][][]byte{make([][]byte, sH), make([][]byte, sH)}
			for kv := 0; kv < 2; kv++ {
				for head := 0; head < sH; head++ {
					next[i][kv][head] = append([]byte{}, h[s][kv][head]...)
				}
			}
		}
		h = next
		appendStep(t, c, h, r, 1)
	}
	for row := 0; row < sB; row++ {
		got := readRow(t, c, row)
		for kv := 0; kv < 2; kv++ {
			for head := 0; head < sH; head++ {
				if !bytes.Equal(got[kv][head], h[row][kv][head]) {
					t.Fatalf("row %d kv %d head %d differs from the beam's history", row, kv, head)
				}
			}
		}
	}
	q := randomF32(r, sB*4*sD)
	indirect := make([]byte, len(q))
	must(t, c.DecodeHost(0, 4, kvcache.DTypeF32, q, indirect))
	st, err := c.Stats()
	must(t, err)
	if st.Reorders != 40 || st.TableBytes == 0 || st.NumLayers != 1 {
		t.Fatalf("stats %+v", st)
	}
	must(t, c.Compact(0))
	gathered := make([]byte, len(q))
	must(t, c.DecodeHost(0, 4, kvcache.DTypeF32, q, gathered))
	if !bytes.Equal(indirect, gathered) {
		t.Fatal("decode through the beam table differs from decode after compaction")
	}
	if v, _ := c.View(0); v.BeamTable != 0 {
		t.Fatal("compaction left a beam table")
	}
	ws, err := c.DecodeWorkspaceSize(&kvcache.StatefulDecodeArgs{QHeads: 4, QDType: kvcache.DTypeF32})
	must(t, err)
	if ws != 0 {
		t.Fatalf("a CPU cache needs no workspace, got %d", ws)
	}
	must(t, c.AsyncError(0))
}

func TestStatefulGrowthTrimExportImport(t *testing.T) {
	c := newStateful(t, 2, kvcache.StatefulOptions{Batch: sB, GrowthStep: 8, Layout: kvcache.LayoutNHD,
		GrowthPolicy: kvcache.GrowthUniform, MaxLength: 64})
	r := rand.New(rand.NewSource(5))
	for i := 0; i < 3; i++ {
		for layer := uint32(0); layer < 2; layer++ {
			k := randomF32(r, sB*sH*5*sD)
			must(t, c.AppendHost(layer, 5, kvcache.DTypeF32, k, k, []uint32{5, 5, 2, 0}))
		}
	}
	ls, err := c.LayerStats(1)
	must(t, err)
	if ls.Capacity != 16 || ls.GrowthOffset != 0 || ls.MaxLength != 15 || ls.Reallocations == 0 ||
		ls.Bytes == 0 || ls.LastGrowthLength == 0 || ls.Layer != 1 {
		t.Fatalf("layer stats %+v", ls)
	}
	must(t, c.Trim(1, 3, 0))
	state, err := c.ExportRow(1, 0)
	must(t, err)
	must(t, c.ImportRow(3, state, 0))
	lens, err := c.Lengths(0)
	must(t, err)
	if lens[0] != 15 || lens[1] != 12 || lens[2] != 6 || lens[3] != 12 {
		t.Fatalf("lengths %v", lens)
	}
	again, err := c.ExportRow(3, 0)
	must(t, err)
	if !bytes.Equal(again, state) {
		t.Fatal("the imported row exports different bytes")
	}
	v, err := c.View(1)
	must(t, err)
	if v.Layout != kvcache.LayoutNHD || v.Capacity != 16 || v.Batch != sB || v.KVHeads != sH ||
		v.HeadDim != sD || v.DType != kvcache.DTypeF32 || v.MaxLength != 15 || v.Layer != 1 ||
		v.Lengths == 0 || v.BeamTable != 0 || v.BeamTableStride != 0 {
		t.Fatalf("view %+v", v)
	}
	must(t, c.Reset(true, 0))
	st, err := c.Stats()
	must(t, err)
	if st.KVBytes != 0 || st.BytesAllocated == 0 || st.PeakBytes < st.BytesAllocated ||
		st.Reallocations == 0 || st.Compactions != 0 || st.TableEntriesCopied != 0 {
		t.Fatalf("stats after reset %+v", st)
	}
}

func TestStatefulErrors(t *testing.T) {
	c := newStateful(t, 1, kvcache.StatefulOptions{Batch: sB})
	var e *kvcache.Error
	err := c.Reorder([]int32{0, 1, 5, 0}, 0)
	if !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument ||
		!strings.Contains(e.Message, "beam_idx[2] = 5 is outside [0, 4)") {
		t.Fatalf("reorder: %v", err)
	}
	if err := c.Trim(kvcache.AllRows, 1, 0); err == nil || !strings.Contains(err.Error(), "cannot trim 1 tokens from row 0, which has 0") {
		t.Fatalf("trim: %v", err)
	}
	if _, err := c.View(2); err == nil || !strings.Contains(err.Error(), "layer must be < num_layers (1), got 2") {
		t.Fatalf("view: %v", err)
	}
	if err := c.ImportRow(0, []byte("not a state"), 0); err == nil || !strings.Contains(err.Error(), "shorter than its 48-byte header") {
		t.Fatalf("import: %v", err)
	}
	if err := c.Append(&kvcache.StatefulAppendArgs{NumTokens: 1, RowTokens: []uint32{1}}, 0); err == nil {
		t.Fatal("a RowTokens of the wrong length was accepted")
	}
	if _, err := kvcache.NewStatefulCache(newConfig(t, 64), &kvcache.StatefulOptions{}); err == nil ||
		!strings.Contains(err.Error(), "batch must be in 1..1024, got 0") {
		t.Fatalf("create: %v", err)
	}
	c.Close()
	if _, err := c.Stats(); !errors.Is(err, kvcache.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if c.Batch() != sB {
		t.Fatal("Batch")
	}
}

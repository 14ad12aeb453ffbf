// Command beamsearch runs a beam search loop on kvcache's stateful cache
// (OpenVINO's stateful mode) with random K/V: a prompt in every beam, then
// per step a reorder by the surviving beams (only beam table entries move,
// no K/V), one new token per beam and layer appended in place, and decode
// attention reading each beam's history through the beam table. At the end
// the beams are compacted and the decode output must not change.
//
// Run from examples/go: go run ./beamsearch (PKG_CONFIG_PATH as for the
// other example).
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"

	"kvcache"
)

const (
	layers  = 4
	kvHeads = 2
	qHeads  = 8
	headDim = 64
	beams   = 4
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "beam search example failed:", err)
		os.Exit(1)
	}
}

func randomF32(r *rand.Rand, n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(r.Float32()*2-1))
	}
	return b
}

func appendAll(c *kvcache.StatefulCache, r *rand.Rand, tokens int) error {
	for layer := uint32(0); layer < layers; layer++ {
		n := beams * kvHeads * tokens * headDim
		if err := c.AppendHost(layer, uint32(tokens), kvcache.DTypeF32, randomF32(r, n), randomF32(r, n), nil); err != nil {
			return err
		}
	}
	return nil
}

func run() error {
	cfg, err := kvcache.NewConfig()
	if err != nil {
		return err
	}
	defer cfg.Close()
	for _, err := range []error{cfg.SetNumLayers(layers), cfg.SetKVHeads(kvHeads),
		cfg.SetHeadDim(headDim), cfg.SetDType(kvcache.DTypeF32)} {
		if err != nil {
			return err
		}
	}
	cache, err := kvcache.NewStatefulCache(cfg, &kvcache.StatefulOptions{Batch: beams, GrowthStep: 32})
	if err != nil {
		return err
	}
	defer cache.Close()
	r := rand.New(rand.NewSource(2024))

	if err := appendAll(cache, r, 20); err != nil { // the prompt, in every beam
		return err
	}
	query := randomF32(r, beams*qHeads*headDim)
	out := make([]byte, len(query))
	gathered := 0 // positions a gather of every beam would copy per layer
	for step := 0; step < 100; step++ {
		// The two best beams survive, each forked in two.
		a, b := int32(r.Intn(beams)), int32(r.Intn(beams))
		beamIdx := []int32{a, a, b, b}
		if err := cache.Reorder(beamIdx, 0); err != nil {
			return err
		}
		lens, err := cache.Lengths(0)
		if err != nil {
			return err
		}
		gathered += beams * int(lens[0])
		if err := appendAll(cache, r, 1); err != nil {
			return err
		}
		for layer := uint32(0); layer < layers; layer++ {
			if err := cache.DecodeHost(layer, qHeads, kvcache.DTypeF32, query, out); err != nil {
				return err
			}
		}
		if step%25 == 0 {
			fmt.Printf("step %d: beams from %v, lengths %v\n", step, beamIdx, lens)
		}
	}
	st, err := cache.Stats()
	if err != nil {
		return err
	}
	fmt.Printf("%d reorders moved %d table entries (a gather would have copied %d positions per layer); %d bytes held, peak %d, %d layer growths\n",
		st.Reorders, st.TableEntriesCopied, gathered, st.BytesAllocated, st.PeakBytes, st.Reallocations)
	for layer := uint32(0); layer < layers; layer++ {
		ls, err := cache.LayerStats(layer)
		if err != nil {
			return err
		}
		fmt.Printf("layer %d: capacity %d (offset %d), %d growths\n", layer, ls.Capacity, ls.GrowthOffset, ls.Reallocations)
	}

	// Compaction gathers the K/V by the table: the same attention after it.
	before := append([]byte{}, out...)
	if err := cache.Compact(0); err != nil {
		return err
	}
	if err := cache.DecodeHost(layers-1, qHeads, kvcache.DTypeF32, query, out); err != nil {
		return err
	}
	if !bytes.Equal(out, before) {
		return fmt.Errorf("decode after compaction differs from decode through the beam table")
	}
	state, err := cache.ExportRow(0, 0)
	if err != nil {
		return err
	}
	fmt.Printf("beam 0 saved: %d bytes; compaction kept the output\n", len(state))
	return nil
}

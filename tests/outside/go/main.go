// main.go
// The user program of tests/outside in Go (see program.c, the reference
// whose output this must print byte for byte).
package main

import (
	"errors"
	"fmt"
	"log"

	"kvcache"
)

func main() {
	cache, err := kvcache.NewConfigBuilder().
		NumLayers(32).KVHeads(8).HeadDim(128).
		DType(kvcache.DTypeBF16).TokensPerBlock(16).
		Device(kvcache.DeviceCPU, 0).MaxTokens(4096).
		NewCache()
	if err != nil {
		log.Fatal(err)
	}
	defer cache.Close()
	if err := run(cache); err != nil {
		log.Fatal(err)
	}
	if err := cache.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("closed")
}

func run(cache *kvcache.Cache) error {
	d, err := cache.Describe()
	if err != nil {
		return err
	}
	fmt.Printf("cache: %d layers in %d group, %d tokens per block, %d blocks, %d bytes\n",
		d.NumLayers, d.NumGroups, d.TokensPerBlock, d.NumBlocks, d.PrimaryBytes)

	first := make([]int32, 1000)
	second := make([]int32, 1000)
	for i := range first {
		first[i] = int32(1000 + i)
		second[i] = int32(5000 + i)
		if i < 512 {
			second[i] = first[i]
		}
	}
	cached, err := cache.AddSequence(1, first, nil, 0)
	if err != nil {
		return err
	}
	fmt.Printf("request 1: 1000 prompt tokens, %d cached\n", cached)
	if err := cache.CommitSequence(1, 1000); err != nil {
		return err
	}
	if cached, err = cache.AddSequence(2, second, nil, 0); err != nil {
		return err
	}
	fmt.Printf("request 2: 1000 prompt tokens, %d cached\n", cached)
	if err := cache.CommitSequence(2, 1000); err != nil {
		return err
	}

	ids := []uint64{1, 2}
	slots, _, err := cache.SlotMapping(0, ids)
	if err != nil {
		return err
	}
	cachedSlots := 0
	for _, s := range slots {
		if s == -1 {
			cachedSlots++
		}
	}
	fmt.Printf("prompt slots: %d, %d of them cached\n", len(slots), cachedSlots)
	decodeSlots := 0
	for step := int32(0); step < 10; step++ {
		if err := cache.BatchExtend(ids, []int32{7000 + step, 8000 + step}, 0); err != nil {
			return err
		}
		if slots, err = cache.SlotMappingInto(slots, nil, 0, ids); err != nil {
			return err
		}
		decodeSlots += len(slots)
	}
	lengths, err := cache.SequenceLengths(ids)
	if err != nil {
		return err
	}
	fmt.Printf("decode: 10 steps of 2 sequences, %d slots, lengths %d %d\n", decodeSlots, lengths[0], lengths[1])

	s, err := cache.Stats()
	if err != nil {
		return err
	}
	fmt.Printf("stats: %d reused blocks, %d missed blocks, %d in use, %d sequences\n",
		s.ReusedBlocks, s.MissedBlocks, s.InUseBlocks, s.NumSequences)

	var kerr *kvcache.Error
	if err := cache.ExtendSequence(99, []int32{1}, 0); !errors.As(err, &kerr) || !errors.Is(err, kvcache.ErrNotFound) {
		return fmt.Errorf("extending sequence 99: %v, want ErrNotFound", err)
	}
	fmt.Printf("error: status %d: %s\n", kerr.Status, kerr.Message)

	for _, id := range ids {
		if err := cache.RemoveSequence(id); err != nil {
			return err
		}
	}
	if s, err = cache.Stats(); err != nil {
		return err
	}
	fmt.Printf("removed: %d sequences, %d cached blocks\n", s.NumSequences, s.CachedBlocks)
	return nil
}

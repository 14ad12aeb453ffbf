// Command kvcache-example walks through the Go binding on the CPU backend:
// two requests sharing a system prompt, prefix reuse, a decode step, the
// tables an attention kernel takes, statistics and an error. It exits
// non-zero when a result is not the expected one (ctest runs it).
//
//	PKG_CONFIG_PATH=<build dir> go run .
package main

import (
	"errors"
	"fmt"
	"os"

	"kvcache"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kvcache-example:", err)
		os.Exit(1)
	}
}

func run() error {
	fmt.Printf("kvcache %s (ABI %d)\n", kvcache.VersionString(), kvcache.ABIVersion())

	// A small Llama-like shape: 4 layers, 2 KV heads of dim 64, bf16, 16
	// tokens per block, room for 4096 tokens in host memory.
	cfg, err := kvcache.NewConfig()
	if err != nil {
		return err
	}
	defer cfg.Close()
	for _, err := range []error{
		cfg.SetNumLayers(4), cfg.SetKVHeads(2), cfg.SetHeadDim(64),
		cfg.SetDType(kvcache.DTypeBF16), cfg.SetTokensPerBlock(16),
		cfg.SetMaxTokens(4096), cfg.SetPartialReuse(false),
	} {
		if err != nil {
			return err
		}
	}
	cache, err := kvcache.NewCache(cfg)
	if err != nil {
		return err
	}
	defer cache.Close() // required: the cache owns its pool; there is no finalizer
	desc, err := cache.Describe()
	if err != nil {
		return err
	}
	fmt.Printf("cache: %d blocks of %d tokens, %d KiB\n", desc.NumBlocks, desc.TokensPerBlock, desc.PrimaryBytes/1024)

	// Request 1: a 40-token system prompt plus its question.
	system := seq(1000, 40)
	prompt1 := append(append([]int32{}, system...), seq(1, 8)...)
	cached, err := cache.AddSequence(1, prompt1, nil, 0)
	if err != nil {
		return err
	}
	fmt.Printf("request 1: %d prompt tokens, %d cached\n", len(prompt1), cached)
	// The model computes the prompt's KV (the store kernel writes it through
	// the slot mapping), then the request says so.
	slots, _, err := cache.SlotMapping(0, []uint64{1})
	if err != nil {
		return err
	}
	fmt.Printf("request 1: %d slots to write, first %v\n", len(slots), slots[:4])
	if err := cache.CommitSequence(1, uint64(len(prompt1))); err != nil {
		return err
	}

	// Request 2 shares the system prompt: its 2 full blocks (32 tokens) are
	// reused and need not be computed.
	prompt2 := append(append([]int32{}, system...), seq(500, 12)...)
	cached, err = cache.AddSequence(2, prompt2, nil, 0)
	if err != nil {
		return err
	}
	fmt.Printf("request 2: %d prompt tokens, %d cached\n", len(prompt2), cached)
	if cached != 32 {
		return fmt.Errorf("request 2 reused %d tokens, want 32", cached)
	}

	// One decode step for both, then the tables of the batch.
	ids := []uint64{1, 2}
	if err := cache.BatchExtend(ids, []int32{7, 8}, 0); err != nil {
		return err
	}
	table, stride, err := cache.BlockTable(0, ids, -1)
	if err != nil {
		return err
	}
	lengths, err := cache.SequenceLengths(ids)
	if err != nil {
		return err
	}
	for i, id := range ids {
		fmt.Printf("request %d: %d tokens, blocks %v\n", id, lengths[i], table[i*stride:(i+1)*stride])
	}
	if table[0] != table[stride] || table[1] != table[stride+1] {
		return errors.New("the two requests do not share their first two blocks")
	}

	// Errors carry the status and the library's message.
	_, err = cache.AddSequence(1, prompt1, nil, 0)
	var kerr *kvcache.Error
	if !errors.As(err, &kerr) || kerr.Status != kvcache.StatusAlreadyExists {
		return fmt.Errorf("adding request 1 twice: %v", err)
	}
	fmt.Printf("expected error: %v\n", err)

	for _, id := range ids {
		if err := cache.RemoveSequence(id); err != nil {
			return err
		}
	}
	st, err := cache.Stats()
	if err != nil {
		return err
	}
	fmt.Printf("stats: %d free, %d cached, %d in use; %d blocks reused, %d missed (hit rate %.2f)\n",
		st.FreeBlocks, st.CachedBlocks, st.InUseBlocks, st.ReusedBlocks, st.MissedBlocks, st.HitRate)
	if st.InUseBlocks != 0 || st.ReusedBlocks != 2 {
		return fmt.Errorf("unexpected statistics %+v", st)
	}

	if err := cache.Close(); err != nil {
		return err
	}
	if _, err := cache.Stats(); !errors.Is(err, kvcache.ErrClosed) {
		return fmt.Errorf("Stats after Close: %v", err)
	}
	fmt.Println("closed; further calls return:", kvcache.ErrClosed)
	return nil
}

func seq(from int32, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = from + int32(i)
	}
	return s
}

// Goroutines sharing one cache, and Close while calls are in flight.
package kvcache_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"kvcache"
)

func TestConcurrentGoroutines(t *testing.T) {
	c := newCache(t, 4096, nil)
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	shared := tokens(1000, 16) // every worker's prompts share this prefix
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				id := uint64(w*rounds + r + 1)
				prompt := append(append([]int32{}, shared...), tokens(w*100000+r*10, 5)...)
				if _, err := c.AddSequence(id, prompt, nil, 0); err != nil {
					errs <- err
					return
				}
				if err := c.ExtendSequence(id, []int32{int32(r)}, 0); err != nil {
					errs <- err
					return
				}
				if _, _, err := c.SlotMapping(0, []uint64{id}); err != nil {
					errs <- err
					return
				}
				if err := c.CommitSequence(id, uint64(len(prompt)+1)); err != nil {
					errs <- err
					return
				}
				if _, err := c.Stats(); err != nil {
					errs <- err
					return
				}
				if err := c.RemoveSequence(id); err != nil {
					errs <- err
					return
				}
				// An expected failure from every goroutine, with its own message.
				_, err := c.DescribeSequence(id)
				var e *kvcache.Error
				if !errors.As(err, &e) || e.Status != kvcache.StatusNotFound || !strings.Contains(e.Message, fmt.Sprint(id)) {
					errs <- fmt.Errorf("describe removed %d: %v", id, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := stats(t, c)
	if s.NumSequences != 0 || s.InUseBlocks != 0 || s.ReusedBlocks == 0 {
		t.Errorf("after the workers: %+v", s)
	}
	must(t, c.Check())
}

// Close racing with calls on other goroutines: every call either works or
// returns ErrClosed; nothing crashes.
func TestCloseWhileInUse(t *testing.T) {
	for round := 0; round < 20; round++ {
		cfg := newConfig(t, 1024)
		c, err := kvcache.NewCache(cfg)
		must(t, err)
		cfg.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					id := uint64(w*1000 + i)
					_, err := c.AddSequence(id, tokens(i, 5), nil, 0)
					if err == nil {
						err = c.RemoveSequence(id)
					}
					if errors.Is(err, kvcache.ErrClosed) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}(w)
		}
		runtime.Gosched()
		must(t, c.Close())
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

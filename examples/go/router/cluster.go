package main

import (
	"errors"
	"fmt"
	"math/rand"

	"kvcache"
)

// Policy picks the engine of each request.
type Policy int

const (
	KVAware Policy = iota // longest cached prefix (from the index), under a load cap
	RoundRobin
	Random
)

func (p Policy) String() string {
	return [...]string{"kv-aware", "round-robin", "random"}[p]
}

// Options of a run.
type Options struct {
	Engines        int     // engine instances
	Blocks         uint64  // primary blocks of each engine
	HostBlocks     uint64  // host-tier blocks of each engine (0: no host tier)
	TokensPerBlock uint32  // tokens per block (engines and router)
	Window         int     // requests in flight over all engines
	CapFactor      float64 // kv-aware: at most ceil(CapFactor * Window / Engines) in flight per engine
	Ring           uint32  // event ring of each engine, in events
	HashSeed       uint64  // event hash seed (engines and router)
	Seed           int64   // random policy
}

// Result of one policy over the trace.
type Result struct {
	Policy          Policy
	Requests        int
	PromptTokens    uint64
	CachedTokens    uint64    // reported cached by the engines' AddSequence
	PredictedTokens uint64    // the router's index prefix for the chosen engine, in tokens
	Events          uint64    // events applied to the index
	Kinds           [7]uint64 // of which, by kvcache.EventKind
	Resyncs         int       // snapshots taken after LOST events
	MaxInFlight     int       // most requests in flight on one engine
	EarlyFinishes   int       // requests removed before their window ended, to make room
	Skipped         int       // requests that did not fit an empty engine
	IndexBlocks     []int     // blocks in each engine's index at the end, equal to its snapshot
}

// engineConfig is the configuration of every engine. The block count is
// that of a Llama-3-8B engine (see README); the pool is allocated with a
// 1-layer, 1-head, head-dim-1 shape (4 bytes per token) because no K/V is
// ever written here: blocks, reuse, eviction and events are the same.
func engineConfig(o Options) (*kvcache.Config, error) {
	cfg, err := kvcache.NewConfig()
	if err != nil {
		return nil, err
	}
	for _, err := range []error{
		cfg.SetNumLayers(1), cfg.SetKVHeads(1), cfg.SetHeadDim(1), cfg.SetDType(kvcache.DTypeBF16),
		cfg.SetTokensPerBlock(o.TokensPerBlock),
		cfg.SetMaxTokens(o.Blocks * uint64(o.TokensPerBlock)),
		cfg.SetPartialReuse(false), // routers match whole blocks
		// The host tier mirrors the pool: 2 (K, V) x 2 bytes per token.
		cfg.SetHostCacheBytes(o.HostBlocks * uint64(o.TokensPerBlock) * 4),
		cfg.SetEventBufferSize(o.Ring),
		cfg.SetEventHashSeed(o.HashSeed),
	} {
		if err != nil {
			cfg.Close()
			return nil, err
		}
	}
	return cfg, nil
}

type flight struct {
	engine int
	seq    uint64
}

// cluster is the engines, their load and the router's indexes.
type cluster struct {
	o        Options
	router   *kvcache.Config // for BlockHashes: equal tokens per block and seed
	engines  []*kvcache.Cache
	indexes  []*blockIndex
	inFlight []int
	window   []flight // oldest first
	events   []kvcache.Event
	hashes   []uint64
	rr       int
	rng      *rand.Rand
}

func newCluster(o Options) (*cluster, error) {
	cfg, err := engineConfig(o)
	if err != nil {
		return nil, err
	}
	c := &cluster{o: o, router: cfg, inFlight: make([]int, o.Engines), rng: rand.New(rand.NewSource(o.Seed))}
	for i := 0; i < o.Engines; i++ {
		e, err := kvcache.NewCache(cfg)
		if err != nil {
			c.close()
			return nil, err
		}
		c.engines = append(c.engines, e)
		c.indexes = append(c.indexes, newBlockIndex())
	}
	d, err := c.engines[0].Describe()
	if err != nil || d.NumBlocks != o.Blocks || d.HostCacheBytes != o.HostBlocks*uint64(o.TokensPerBlock)*4 {
		c.close()
		return nil, fmt.Errorf("engine of %d blocks and %d host bytes, want %d blocks and %d host blocks (%v)",
			d.NumBlocks, d.HostCacheBytes, o.Blocks, o.HostBlocks, err)
	}
	return c, nil
}

func (c *cluster) close() {
	for _, e := range c.engines {
		e.Close()
	}
	c.router.Close()
}

// pick chooses the engine of a prompt; predicted is the prefix the index
// promises on it, in blocks.
func (c *cluster) pick(p Policy, hashes []uint64) (engine, predicted int) {
	n := c.o.Engines
	switch p {
	case RoundRobin:
		engine = c.rr
		c.rr = (c.rr + 1) % n
	case Random:
		engine = c.rng.Intn(n)
	default:
		limit := int(c.o.CapFactor*float64(c.o.Window)/float64(n) + 0.999999)
		if limit < 1 {
			limit = 1
		}
		engine = -1
		best := -1
		for i := 0; i < n; i++ {
			if c.inFlight[i] >= limit {
				continue
			}
			m := c.indexes[i].prefix(hashes)
			if m > best || (m == best && c.inFlight[i] < c.inFlight[engine]) {
				engine, best = i, m
			}
		}
		if engine < 0 { // every engine at the cap: the least loaded
			engine = 0
			for i := 1; i < n; i++ {
				if c.inFlight[i] < c.inFlight[engine] {
					engine = i
				}
			}
		}
	}
	return engine, c.indexes[engine].prefix(hashes)
}

// finish removes the request in flight at window position w.
func (c *cluster) finish(w int) error {
	f := c.window[w]
	c.window = append(c.window[:w], c.window[w+1:]...)
	c.inFlight[f.engine]--
	return c.engines[f.engine].RemoveSequence(f.seq)
}

// makeRoom finishes the oldest request in flight on engine e; false when
// none is.
func (c *cluster) makeRoom(e int) (bool, error) {
	for w, f := range c.window {
		if f.engine == e {
			return true, c.finish(w)
		}
	}
	return false, nil
}

// serve runs one request on engine e: add the prompt (the engine reports
// the cached prefix), decode its output, commit everything, keep it in
// flight until Window later requests have started. It returns the cached
// prompt tokens, or ok false when the request does not fit the empty engine.
func (c *cluster) serve(e int, seq uint64, prompt, output []int32, r *Result) (cached uint64, ok bool, err error) {
	cache := c.engines[e]
	for {
		cached, err = cache.AddSequence(seq, prompt, nil, 0)
		if !errors.Is(err, kvcache.ErrOutOfBlocks) {
			break
		}
		if room, err := c.makeRoom(e); err != nil || !room {
			return 0, false, err
		}
		r.EarlyFinishes++
	}
	if err != nil {
		return 0, false, err
	}
	committed := uint64(len(prompt))
	for len(output) > 0 {
		err = cache.ExtendSequence(seq, output, 0)
		if err == nil {
			committed += uint64(len(output))
			break
		}
		if !errors.Is(err, kvcache.ErrOutOfBlocks) {
			return 0, false, err
		}
		if room, err := c.makeRoom(e); err != nil {
			return 0, false, err
		} else if !room {
			break // no room to decode: keep the prompt only
		}
		r.EarlyFinishes++
	}
	if err := cache.CommitSequence(seq, committed); err != nil {
		return 0, false, err
	}
	c.window = append(c.window, flight{engine: e, seq: seq})
	c.inFlight[e]++
	if c.inFlight[e] > r.MaxInFlight {
		r.MaxInFlight = c.inFlight[e]
	}
	return cached, true, nil
}

// run replays the trace under policy p.
func run(p Policy, trace []Request, o Options) (Result, error) {
	c, err := newCluster(o)
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	r := Result{Policy: p}
	var prompt, output []int32
	for k := range trace {
		req := &trace[k]
		if len(c.window) >= o.Window {
			if err := c.finish(0); err != nil {
				return r, err
			}
		}
		prompt = appendPrompt(prompt[:0], req)
		output = appendOutput(output[:0], k, req)
		if c.hashes, err = c.router.AppendBlockHashes(c.hashes[:0], prompt, nil); err != nil {
			return r, err
		}
		e, predicted := c.pick(p, c.hashes)
		cached, ok, err := c.serve(e, uint64(k), prompt, output, &r)
		if err != nil {
			return r, fmt.Errorf("request %d on engine %d: %w", k, e, err)
		}
		if !ok {
			r.Skipped++
			continue
		}
		r.Requests++
		r.PromptTokens += uint64(len(prompt))
		r.CachedTokens += cached
		r.PredictedTokens += uint64(predicted) * uint64(o.TokensPerBlock)
		// The router's feeder: every engine's new events, after each request.
		for i, cache := range c.engines {
			if c.events, err = c.indexes[i].feed(cache, c.events); err != nil {
				return r, fmt.Errorf("engine %d: %w", i, err)
			}
		}
	}
	for i, cache := range c.engines {
		if err := c.indexes[i].matches(cache); err != nil {
			return r, fmt.Errorf("%v: engine %d: the router's index differs from the snapshot: %w", p, i, err)
		}
		r.Events += c.indexes[i].events
		for k, n := range c.indexes[i].kinds {
			r.Kinds[k] += n
		}
		r.Resyncs += c.indexes[i].resyncs
		r.IndexBlocks = append(r.IndexBlocks, len(c.indexes[i].blocks))
	}
	return r, nil
}

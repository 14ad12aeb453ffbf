// Command router is a KV-aware router over several kvcache engines: each
// engine is an in-process kvcache cache with events on, the router keeps an
// index of which engine holds which blocks fed only by the engines' drained
// events (and a snapshot after a LOST event), computes a prompt's block
// hashes with Config.BlockHashes (no cache needed), and sends each request
// to the engine holding its longest cached prefix, under a load cap. It
// replays a Mooncake trace under that policy, round-robin and random, prints
// the prompt-token hit rate of each, and checks at the end that the router's
// index equals every engine's snapshot (exit status 1 otherwise).
//
//	PKG_CONFIG_PATH=<build dir> go run ./router -trace conversation_trace.jsonl
//	PKG_CONFIG_PATH=<build dir> go run ./router -synthetic 200   # no trace needed
//
// Serving is simulated simply: a request is added (the engine reports its
// cached prefix), its output tokens are appended, everything is committed,
// and it stays in flight until -window later requests have started; then it
// is removed and its blocks stay cached until evicted. An engine out of
// blocks finishes its oldest request early. Mooncake traces carry one hash
// id per 512 prompt tokens, not tokens: each hash id becomes 512
// deterministic token ids (as the serving simulator makes them), so equal
// hash ids give equal tokens.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"kvcache"
)

func main() {
	tracePath := flag.String("trace", "", "Mooncake trace (JSON Lines: timestamp, input_length, output_length, hash_ids)")
	limit := flag.Int("requests", 0, "replay only the first N requests of the trace (0: all)")
	synthetic := flag.Int("synthetic", 0, "replay N synthetic conversation requests instead of a trace")
	var o Options
	flag.IntVar(&o.Engines, "engines", 4, "engine instances")
	flag.Uint64Var(&o.Blocks, "blocks", 24576, "primary blocks per engine (24576 x 16 tokens: Llama-3-8B with 48 GiB of bf16 KV)")
	flag.Uint64Var(&o.HostBlocks, "host-blocks", 0, "host-tier blocks per engine: evicted blocks are offloaded there and onboarded on a hit (0: no host tier)")
	tpb := flag.Uint("tokens-per-block", 16, "tokens per block")
	flag.IntVar(&o.Window, "window", 32, "requests in flight over all engines")
	flag.Float64Var(&o.CapFactor, "cap", 1.25, "kv-aware load cap: at most ceil(cap * window / engines) requests in flight per engine")
	ring := flag.Uint("ring", 1<<16, "event ring of each engine, in events (small rings force LOST events and snapshot resyncs)")
	flag.Uint64Var(&o.HashSeed, "hash-seed", 0, "event hash seed of the engines and the router")
	flag.Int64Var(&o.Seed, "seed", 1, "seed of the random policy")
	expectGain := flag.Bool("expect-gain", false, "exit 1 unless kv-aware beats round-robin and random")
	flag.Parse()
	o.TokensPerBlock, o.Ring = uint32(*tpb), uint32(*ring)

	var trace []Request
	source := ""
	switch {
	case *synthetic > 0 && *tracePath == "":
		trace = synthesize(*synthetic, 42)
		source = fmt.Sprintf("synthetic conversations, %d requests", len(trace))
	case *tracePath != "" && *synthetic == 0:
		var err error
		if trace, err = readTrace(*tracePath, *limit); err != nil {
			fail(err)
		}
		source = fmt.Sprintf("%s, %d requests", *tracePath, len(trace))
	default:
		fail(fmt.Errorf("give -trace FILE or -synthetic N (see -help)"))
	}
	fmt.Printf("trace: %s\n", source)
	fmt.Printf("engines: %d x %d blocks of %d tokens (%d tokens each)", o.Engines, o.Blocks, o.TokensPerBlock, o.Blocks*uint64(o.TokensPerBlock))
	if o.HostBlocks > 0 {
		fmt.Printf(" + a host tier of %d blocks each", o.HostBlocks)
	}
	fmt.Printf("; window %d requests in flight, kv-aware cap %.2fx; event ring %d\n\n", o.Window, o.CapFactor, o.Ring)

	var results []Result
	for _, p := range []Policy{KVAware, RoundRobin, Random} {
		start := time.Now()
		r, err := run(p, trace, o)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "%s: %.1f s\n", p, time.Since(start).Seconds())
		results = append(results, r)
	}
	printTable(results)
	fmt.Println("\nindex == snapshot for every engine under every policy")
	if *expectGain && !(results[0].hitRate() > results[1].hitRate() && results[0].hitRate() > results[2].hitRate()) {
		fail(fmt.Errorf("kv-aware (%.2f%%) does not beat round-robin (%.2f%%) and random (%.2f%%)",
			100*results[0].hitRate(), 100*results[1].hitRate(), 100*results[2].hitRate()))
	}
}

func (r Result) hitRate() float64 {
	if r.PromptTokens == 0 {
		return 0
	}
	return float64(r.CachedTokens) / float64(r.PromptTokens)
}

func printTable(results []Result) {
	fmt.Println("| policy | requests | prompt tokens | cached tokens | hit rate | predicted by the index | events | resyncs | max in flight | early finishes |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Printf("| %s | %d | %s | %s | %.2f%% | %s | %s | %d | %d | %d |\n",
			r.Policy, r.Requests, thousands(r.PromptTokens), thousands(r.CachedTokens), 100*r.hitRate(),
			thousands(r.PredictedTokens), thousands(r.Events), r.Resyncs, r.MaxInFlight, r.EarlyFinishes)
	}
	fmt.Println()
	for _, r := range results {
		fmt.Printf("%s events:", r.Policy)
		for k := kvcache.EventStored; k <= kvcache.EventCleared; k++ {
			fmt.Printf(" %s %s", k, thousands(r.Kinds[k]))
		}
		fmt.Println()
	}
	for _, r := range results {
		if r.Skipped > 0 {
			fmt.Printf("%s: %d requests did not fit an empty engine and were skipped\n", r.Policy, r.Skipped)
		}
	}
}

func thousands(v uint64) string {
	s := fmt.Sprint(v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "router:", err)
	os.Exit(1)
}

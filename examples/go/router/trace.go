package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
)

// traceBlockTokens is the number of prompt tokens one Mooncake hash id names.
const traceBlockTokens = 512

// Request is one record of a Mooncake trace (FAST'25, JSON Lines):
// {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}.
// The trace carries no tokens: hash id i names prompt tokens
// [512 i, 512 (i+1)) of the request (the last block may be shorter), and
// equal hash ids at equal positions name equal prefixes.
type Request struct {
	Timestamp    int64    `json:"timestamp"`
	InputLength  int      `json:"input_length"`
	OutputLength int      `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// readTrace reads at most limit records (all if limit <= 0) and checks that
// every record has the hash ids its input length needs.
func readTrace(path string, limit int) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Request
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; scanner.Scan(); line++ {
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var r Request
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if r.InputLength < 1 || r.OutputLength < 0 {
			return nil, fmt.Errorf("%s:%d: input_length must be >= 1 and output_length >= 0", path, line)
		}
		if want := (r.InputLength + traceBlockTokens - 1) / traceBlockTokens; len(r.HashIDs) != want {
			return nil, fmt.Errorf("%s:%d: input_length %d needs %d hash ids, got %d",
				path, line, r.InputLength, want, len(r.HashIDs))
		}
		out = append(out, r)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no records", path)
	}
	return out, nil
}

// Token ids are synthesized as the serving simulator does
// (examples/simulator/tokens.h), so both replay a trace with the same
// tokens: a seed names a token stream (its top byte a namespace), and the
// token at a position depends only on (seed, position).
const (
	seedTraceBlock = 1 // a Mooncake hash id: 512 tokens
	seedOutput     = 2 // the tokens a request decodes
	vocab          = 128256
)

func makeSeed(space, value uint64) uint64 { return space<<56 ^ value&(1<<56-1) }

func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

func tokenID(seed uint64, position uint32) int32 {
	return int32(splitmix64(splitmix64(seed)^uint64(position)) % vocab)
}

// appendPrompt appends the prompt tokens of r: 512 tokens per hash id, the
// last block cut at input_length. Equal hash ids give equal tokens.
func appendPrompt(dst []int32, r *Request) []int32 {
	for i, id := range r.HashIDs {
		n := r.InputLength - i*traceBlockTokens
		if n > traceBlockTokens {
			n = traceBlockTokens
		}
		seed := makeSeed(seedTraceBlock, id)
		for p := 0; p < n; p++ {
			dst = append(dst, tokenID(seed, uint32(p)))
		}
	}
	return dst
}

// appendOutput appends the output_length tokens request number k decodes.
func appendOutput(dst []int32, k int, r *Request) []int32 {
	seed := makeSeed(seedOutput, uint64(k))
	for p := 0; p < r.OutputLength; p++ {
		dst = append(dst, tokenID(seed, uint32(p)))
	}
	return dst
}

// synthesize makes n requests shaped like Mooncake's conversation trace
// (the ctest runs on it, as the trace itself is not in the repository):
// every prompt starts with the shared hash id 0 (a system prompt), and
// multi-turn conversations resend their history: a turn's prompt is the
// previous turn's full blocks plus new ones (the answer and the new
// question), its last block partial. Conversations interleave.
func synthesize(n int, seed int64) []Request {
	rng := rand.New(rand.NewSource(seed))
	nextID := uint64(1)
	newIDs := func(ids []uint64, k int) []uint64 {
		for i := 0; i < k; i++ {
			ids = append(ids, nextID)
			nextID++
		}
		return ids
	}
	var open [][]uint64 // the full blocks of each open conversation
	out := make([]Request, 0, n)
	for len(out) < n {
		var full []uint64
		pick := -1
		if len(open) == 0 || rng.Float64() < 0.3 {
			full = newIDs([]uint64{0}, rng.Intn(6))
			open = append(open, nil)
			pick = len(open) - 1
		} else {
			pick = rng.Intn(len(open))
			full = newIDs(open[pick], 1+rng.Intn(3))
		}
		ids := newIDs(append([]uint64(nil), full...), 1) // the partial last block
		open[pick] = full
		if len(full) > 24 || rng.Float64() < 0.15 { // the conversation ends
			open[pick] = open[len(open)-1]
			open = open[:len(open)-1]
		}
		out = append(out, Request{
			Timestamp:    int64(len(out)) * 100,
			InputLength:  len(full)*traceBlockTokens + 1 + rng.Intn(traceBlockTokens),
			OutputLength: 16 + rng.Intn(400),
			HashIDs:      ids,
		})
	}
	return out
}

// Deterministic token ids for simulated prompts and outputs.
//
// A prompt is a list of segments; a segment is (seed, length) and expands to
// `length` token ids that depend only on (seed, position in the segment).
// Two requests that name the same trace hash id therefore send the same 512
// tokens, and a multi-turn chat that resends its history sends exactly the
// tokens the simulator decoded for the previous turn.
#pragma once

#include <cstdint>
#include <vector>

namespace sim {

// Seeds carry a namespace in their top byte so that trace hash ids, decoded
// outputs and generator text can never name the same token stream.
enum SeedSpace : uint64_t {
  kSeedTraceBlock = 1,  // a Mooncake hash id (512 tokens)
  kSeedOutput = 2,      // the tokens a request decodes
  kSeedSystem = 3,      // a generated system prompt
  kSeedText = 4,        // a generated user question or assistant answer
};

inline uint64_t make_seed(SeedSpace space, uint64_t value) {
  return (static_cast<uint64_t>(space) << 56) ^ (value & ((uint64_t{1} << 56) - 1));
}

struct Segment {
  uint64_t seed = 0;
  uint32_t length = 0;
};

// Llama-3's vocabulary size; only the spread of ids matters here.
constexpr uint32_t kVocab = 128256;

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline int32_t token_id(uint64_t seed, uint32_t position) {
  uint64_t h = splitmix64(splitmix64(seed) ^ position);
  return static_cast<int32_t>(h % kVocab);
}

// Appends the tokens of `segments` to `out`.
void append_tokens(const std::vector<Segment> &segments, std::vector<int32_t> &out);

// Total tokens of `segments`.
uint64_t segments_length(const std::vector<Segment> &segments);

}  // namespace sim

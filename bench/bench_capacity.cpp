// Capacity benchmark (issue 4): at a fixed KV memory budget, how many
// sequences does one kvcache cache for the whole model admit, and how many
// prompt tokens does it reuse, compared with a static split of the memory
// between the layer groups (what TensorRT-LLM does: each group gets a share
// in proportion to window x layers x bytes per token, a full-attention
// layer's window being the run's maximum sequence length).
//
// "shared": one cache configured with every layer of the model.
// "static": one cache PER LAYER GROUP, each configured with only that
//   group's layers and window, and primary_bytes = its share of the budget.
//   A sequence is admitted only if every per-group cache accepts it (if one
//   refuses with KVC_ERR_OUT_OF_BLOCKS it is removed from the others);
//   commits, extends and removes go to all of them; its reused tokens are
//   the least of what the per-group adds returned (a token that one group
//   lacks has to be recomputed for every layer).
//
// Procedure, per model x mix x prefill mode x scheme: requests are admitted
// in order, each one fully before the next: add its prompt, commit it (the
// prompt was computed), decode D = 64 tokens (extend by one token + commit,
// per token). Every admitted sequence stays live. Admission stops at the
// first KVC_ERR_OUT_OF_BLOCKS (at the add, during a chunked prefill or
// during the decode of the newest request, which is then removed and not
// counted). Phase 2 removes every sequence (their committed blocks stay
// cached) and replays the same mix from its first request: it measures
// reuse from a warm cache.
//
// Prefill modes, applied identically to both schemes:
//   whole    the whole prompt is added at once (kvc_sequence_add) and then
//            committed, as issue 4's procedure says: a windowed group holds
//            a block for every prompt position until that commit.
//   chunked  chunked prefill, 1024-token chunks: the add takes the first
//            max(1024, reusable prefix + 1) tokens, each further chunk is
//            extended and committed, so a windowed group never holds more
//            than about (W + 1024) / T + 1 blocks of a sequence. A real
//            per-window manager (TensorRT-LLM allocates at most
//            window-many tokens of context blocks for a windowed layer)
//            never needs a prompt-sized windowed allocation; without this
//            mode the static split could not admit any prompt longer than
//            its windowed share, which would overstate the shared cache.
//
// Scale: the byte sizes are those of the real model divided by 16 (head_dim
// 128 -> 8; kv heads, layers, windows, dtype and tokens per block are
// real), and so is the budget: 8 GiB of real KV -> 512 MiB allocated here.
// Every block count, and so every admission and reuse figure, is what the
// real shapes give; the bytes printed are real-model bytes.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kvcache/kvcache.h"

namespace {

constexpr uint32_t kTokensPerBlock = 16;
constexpr uint32_t kDecodeTokens = 64;
constexpr uint32_t kChunk = 1024;
constexpr uint64_t kScale = 16;                       // real bytes / bytes allocated here
constexpr uint64_t kBudgetReal = 8ull << 30;          // 8 GiB of real KV
constexpr uint32_t kRealHeadDim = 128;
constexpr uint32_t kHeadDim = kRealHeadDim / kScale;  // 8
constexpr uint32_t kRequests = 3000;                  // more than any run admits
constexpr uint64_t kSeed = 20261122;

#define CHECK_OK(call)                                                              \
  do {                                                                              \
    const kvc_status_t s_ = (call);                                                 \
    if (s_ != KVC_OK) {                                                             \
      std::fprintf(stderr, "%s:%d %s failed: %s\n", __FILE__, __LINE__, #call,      \
                   kvc_last_error_message());                                       \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

// ---------------------------------------------------------------- model --

struct Group {
  uint32_t window;    // 0 = full attention
  uint32_t kv_heads;
  uint32_t layers;
};

struct Model {
  const char* name;
  const char* desc;
  uint32_t num_layers;
  std::vector<uint32_t> windows;   // repeats over the layers
  std::vector<uint32_t> kv_heads;  // per layer
  std::vector<Group> groups;       // for the static split
};

// bf16, K and V: 2 * 2 bytes per head dim element.
uint64_t real_bytes_per_token(uint32_t kv_heads, uint32_t layers) {
  return uint64_t(layers) * 2 * kv_heads * kRealHeadDim * 2;
}

Model model_a() {
  Model m{"A", "24 layers alternating full / window 1024, 8 kv heads each, head_dim 128, bf16 "
               "(gemma-2/3-like); one block size",
          24, {0, 1024}, std::vector<uint32_t>(24, 8), {{0, 8, 12}, {1024, 8, 12}}};
  return m;
}

Model model_b() {
  Model m{"B", "24 layers alternating full (8 kv heads) / window 1024 (2 kv heads), head_dim 128, "
               "bf16; two block sizes (4:1)",
          24, {0, 1024}, {}, {{0, 8, 12}, {1024, 2, 12}}};
  for (uint32_t l = 0; l < 24; ++l) m.kv_heads.push_back(l % 2 == 0 ? 8 : 2);
  return m;
}

kvc_config_t* base_config(uint32_t num_layers, const std::vector<uint32_t>& windows,
                          const std::vector<uint32_t>& kv_heads, uint64_t bytes) {
  kvc_config_t* c = nullptr;
  CHECK_OK(kvc_config_create(&c));
  CHECK_OK(kvc_config_set_num_layers(c, num_layers));
  CHECK_OK(kvc_config_set_kv_heads_per_layer(c, kv_heads.data(), kv_heads.size()));
  CHECK_OK(kvc_config_set_head_dim(c, kHeadDim));
  CHECK_OK(kvc_config_set_dtype(c, KVC_DTYPE_BF16));
  CHECK_OK(kvc_config_set_tokens_per_block(c, kTokensPerBlock));
  CHECK_OK(kvc_config_set_attention_windows(c, windows.data(), windows.size()));
  CHECK_OK(kvc_config_set_primary_bytes(c, bytes));
  return c;
}

kvc_cache_t* make_cache(kvc_config_t* c) {
  kvc_cache_t* cache = nullptr;
  CHECK_OK(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

// ---------------------------------------------------------------- mixes --

struct Request {
  std::vector<int32_t> prompt;
  uint64_t seed;
};

struct Mix {
  const char* name;
  const char* desc;
  std::vector<Request> requests;
  uint32_t max_seq_len = 0;  // longest prompt + decode tokens
};

struct Rng {
  uint64_t s;
  uint64_t next() {  // splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t uniform(uint32_t lo, uint32_t hi) { return lo + uint32_t(next() % (hi - lo + 1)); }
};

int32_t token(uint64_t domain, uint64_t i) {
  Rng r{domain * 0x100000001b3ull + i};
  return int32_t(r.next() % 128000);
}

// 4 system prompts of 512, 1024, 1536 and 2048 tokens. A request of L tokens
// starts with the first min(its system prompt, L / 2) tokens of one of them
// (chosen uniformly), the rest is its own.
constexpr uint32_t kSystemLens[4] = {512, 1024, 1536, 2048};

Mix make_mix(const char* name, const char* desc, uint64_t salt,
             uint32_t (*length)(Rng&)) {
  Mix m{name, desc, {}, 0};
  Rng rng{kSeed ^ salt};
  for (uint32_t i = 0; i < kRequests; ++i) {
    const uint32_t len = length(rng);
    const uint32_t sys = uint32_t(rng.next() % 4);
    const uint32_t shared = std::min(kSystemLens[sys], len / 2);
    Request r;
    r.seed = (salt << 32) | i;
    r.prompt.reserve(len);
    for (uint32_t t = 0; t < shared; ++t) r.prompt.push_back(token(1000 + sys, t));
    for (uint32_t t = shared; t < len; ++t) r.prompt.push_back(token(r.seed * 7 + 3, t));
    m.max_seq_len = std::max(m.max_seq_len, len + kDecodeTokens);
    m.requests.push_back(std::move(r));
  }
  return m;
}

uint32_t len_short(Rng& r) { return r.uniform(256, 2048); }
uint32_t len_long(Rng& r) { return r.uniform(8192, 32768); }
uint32_t len_skewed(Rng& r) { return r.next() % 10 == 0 ? len_long(r) : len_short(r); }
uint32_t len_uniform(Rng& r) { return r.uniform(256, 32768); }

// ---------------------------------------------------------------- schemes --

// A scheme is a list of caches a sequence must be in (1 for shared).
struct Scheme {
  std::vector<kvc_cache_t*> caches;
  ~Scheme() {
    for (auto* c : caches) kvc_cache_destroy(c);
  }
};

void make_shared(const Model& m, Scheme& s) {
  s.caches.push_back(make_cache(base_config(m.num_layers, m.windows, m.kv_heads, kBudgetReal / kScale)));
}

// The static split: group g gets budget * w_g * layers_g * bytes_g / sum,
// with w = max_seq_len for full attention (TensorRT-LLM's proportion).
std::vector<uint64_t> static_shares(const Model& m, uint32_t max_seq_len) {
  std::vector<double> weight;
  double sum = 0;
  for (const Group& g : m.groups) {
    const double w = double(g.window ? std::min(g.window, max_seq_len) : max_seq_len) *
                     double(real_bytes_per_token(g.kv_heads, g.layers));
    weight.push_back(w);
    sum += w;
  }
  std::vector<uint64_t> bytes;
  for (double w : weight) bytes.push_back(uint64_t(double(kBudgetReal / kScale) * w / sum));
  return bytes;
}

void make_static(const Model& m, uint32_t max_seq_len, Scheme& s) {
  const auto bytes = static_shares(m, max_seq_len);
  for (size_t i = 0; i < m.groups.size(); ++i) {
    const Group& g = m.groups[i];
    s.caches.push_back(make_cache(base_config(g.layers, {g.window},
                                              std::vector<uint32_t>(g.layers, g.kv_heads), bytes[i])));
  }
}

// ---------------------------------------------------------------- runs --

enum class Prefill { kWhole, kChunked };

struct Outcome {
  uint32_t admitted = 0;
  uint64_t reused = 0;
  uint64_t prompt_tokens = 0;
  std::string stop;  // why admission stopped
};

// Removes `id` from the first n caches of s.
void remove_from(Scheme& s, size_t n, uint64_t id) {
  for (size_t i = 0; i < n; ++i) CHECK_OK(kvc_sequence_remove(s.caches[i], id));
}

bool out_of_blocks(kvc_status_t st, const char* what) {
  if (st == KVC_OK) return false;
  if (st != KVC_ERR_OUT_OF_BLOCKS) {
    std::fprintf(stderr, "%s failed: %s\n", what, kvc_last_error_message());
    std::abort();
  }
  return true;
}

// Extends every cache of s by `n` tokens and commits `commit_to`; on
// OUT_OF_BLOCKS removes the sequence everywhere and returns false.
bool extend_all(Scheme& s, uint64_t id, const int32_t* tokens, size_t n, uint64_t commit_to) {
  for (auto* c : s.caches)
    if (out_of_blocks(kvc_sequence_extend(c, id, tokens, n, nullptr), "extend")) {
      remove_from(s, s.caches.size(), id);
      return false;
    }
  for (auto* c : s.caches) CHECK_OK(kvc_sequence_commit(c, id, commit_to));
  return true;
}

std::string group_state(const Scheme& s) {
  std::string out;
  for (size_t ci = 0; ci < s.caches.size(); ++ci) {
    kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
    CHECK_OK(kvc_cache_describe(s.caches[ci], &d));
    for (uint32_t g = 0; g < d.num_groups; ++g) {
      kvc_group_desc_t gd = KVC_GROUP_DESC_INIT;
      kvc_group_stats_t gs = KVC_GROUP_STATS_INIT;
      kvc_pool_desc_t pd = KVC_POOL_DESC_INIT;
      CHECK_OK(kvc_cache_describe_group(s.caches[ci], g, &gd));
      CHECK_OK(kvc_cache_get_group_stats(s.caches[ci], g, &gs));
      CHECK_OK(kvc_cache_describe_pool(s.caches[ci], gs.pool, &pd));
      char buf[200];
      std::snprintf(buf, sizeof buf, "%s%s: in use %" PRIu64 ", cached %" PRIu64
                    ", pool %u free %" PRIu64 "/%" PRIu64,
                    out.empty() ? "" : "; ", gd.window ? "win" : "full", gs.in_use_blocks,
                    gs.cached_blocks, ci * 10 + gs.pool, gs.pool_free_blocks, pd.num_blocks);
      out += buf;
    }
  }
  return out;
}

// Admits the mix's requests in order until the first OUT_OF_BLOCKS.
Outcome admit(Scheme& s, const Mix& mix, Prefill mode, uint64_t id_base,
              std::vector<uint64_t>& live) {
  Outcome o;
  const size_t n = s.caches.size();
  std::vector<int32_t> decode(1);
  for (size_t ri = 0; ri < mix.requests.size(); ++ri) {
    const Request& r = mix.requests[ri];
    const uint64_t id = id_base + ri;
    const size_t len = r.prompt.size();
    // First part, per cache: the whole prompt, or the first chunk (at
    // least that cache's reusable prefix + 1, so that its add can reuse all
    // of it; the per-group caches of the static split may reuse different
    // lengths, and each keeps what it found).
    std::vector<size_t> first(n, len);
    if (mode == Prefill::kChunked)
      for (size_t i = 0; i < n; ++i) {
        uint64_t p = 0;
        CHECK_OK(kvc_cache_probe(s.caches[i], r.prompt.data(), len, nullptr, &p));
        first[i] = std::min<size_t>(len, std::max<size_t>(kChunk, p + 1));
      }
    uint64_t reused = UINT64_MAX;
    size_t added = 0;
    for (; added < n; ++added) {
      uint64_t cached = 0;
      if (out_of_blocks(kvc_sequence_add(s.caches[added], id, r.prompt.data(), first[added], nullptr,
                                         nullptr, &cached),
                        "add"))
        break;
      reused = std::min(reused, cached);
    }
    char why[160];
    if (added < n) {
      remove_from(s, added, id);
      std::snprintf(why, sizeof why, "request %zu (%zu tokens): add refused by %s", ri, len,
                    n == 1 ? "the cache" : (added == 0 ? "the full-attention cache" : "the windowed cache"));
      o.stop = why;
      return o;
    }
    for (size_t i = 0; i < n; ++i) CHECK_OK(kvc_sequence_commit(s.caches[i], id, first[i]));
    // The rest of the prompt, chunk by chunk, cache by cache.
    bool ok = true;
    for (size_t i = 0; ok && i < n; ++i)
      for (size_t pos = first[i]; ok && pos < len; pos += kChunk) {
        const size_t k = std::min<size_t>(kChunk, len - pos);
        if (out_of_blocks(kvc_sequence_extend(s.caches[i], id, r.prompt.data() + pos, k, nullptr),
                          "extend")) {
          remove_from(s, n, id);
          ok = false;
          std::snprintf(why, sizeof why, "request %zu (%zu tokens): prefill chunk at %zu refused by %s",
                        ri, len, pos, n == 1 ? "the cache" : (i == 0 ? "the full-attention cache" : "the windowed cache"));
        } else {
          CHECK_OK(kvc_sequence_commit(s.caches[i], id, pos + k));
        }
      }
    for (uint32_t t = 0; ok && t < kDecodeTokens; ++t) {
      decode[0] = token(r.seed * 7 + 5, t);
      ok = extend_all(s, id, decode.data(), 1, len + t + 1);
      if (!ok) std::snprintf(why, sizeof why, "request %zu (%zu tokens): decode token %u refused", ri, len, t);
    }
    if (!ok) {
      o.stop = why;
      return o;
    }
    live.push_back(id);
    ++o.admitted;
    o.reused += reused;
    o.prompt_tokens += len;
  }
  o.stop = "every request admitted";
  return o;
}

struct RunResult {
  Outcome phase1, phase2;
  std::string state;  // per-group blocks at the end of phase 1
  std::string layout; // pools and blocks
};

std::string describe_layout(const Scheme& s) {
  std::string out;
  for (auto* c : s.caches) {
    kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
    CHECK_OK(kvc_cache_describe(c, &d));
    for (uint32_t p = 0; p < d.num_pools; ++p) {
      kvc_pool_desc_t pd = KVC_POOL_DESC_INIT;
      CHECK_OK(kvc_cache_describe_pool(c, p, &pd));
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s%" PRIu64 " x %" PRIu64 " KiB (%.2f GiB)", out.empty() ? "" : " + ",
                    pd.num_blocks, pd.block_bytes * kScale >> 10,
                    double(pd.bytes * kScale) / double(1ull << 30));
      out += buf;
    }
  }
  return out;
}

RunResult run(Scheme& s, const Mix& mix, Prefill mode) {
  RunResult rr;
  rr.layout = describe_layout(s);
  std::vector<uint64_t> live;
  rr.phase1 = admit(s, mix, mode, 1000000, live);
  rr.state = group_state(s);
  for (uint64_t id : live)
    for (auto* c : s.caches) CHECK_OK(kvc_sequence_remove(c, id));
  live.clear();
  rr.phase2 = admit(s, mix, mode, 2000000, live);
  for (uint64_t id : live)
    for (auto* c : s.caches) CHECK_OK(kvc_sequence_remove(c, id));
  return rr;
}

std::string ktok(uint64_t t) {
  char buf[32];
  if (t >= 10000) std::snprintf(buf, sizeof buf, "%.1fk", double(t) / 1000.0);
  else std::snprintf(buf, sizeof buf, "%" PRIu64, t);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  bool verbose = argc > 1 && std::strcmp(argv[1], "-v") == 0;
  const auto t0 = std::chrono::steady_clock::now();
  const Model models[2] = {model_a(), model_b()};
  const Mix mixes[4] = {
      make_mix("short", "prompts U[256, 2048]", 1, len_short),
      make_mix("long", "prompts U[8K, 32K]", 2, len_long),
      make_mix("skewed", "90% U[256, 2048], 10% U[8K, 32K]", 3, len_skewed),
      make_mix("uniform", "prompts U[256, 32K]", 4, len_uniform),
  };
  std::printf("kvcache capacity benchmark (issue 4), %s\n", kvc_version_string());
  std::printf("budget: %.0f GiB of real KV per scheme; byte sizes scaled down %" PRIu64
              "x (head_dim %u -> %u, all ratios real): %.0f MiB allocated\n",
              double(kBudgetReal) / double(1ull << 30), kScale, kRealHeadDim, kHeadDim,
              double(kBudgetReal / kScale) / double(1ull << 20));
  std::printf("blocks of %u tokens; decode %u tokens per request (extend + commit per token); "
              "chunked prefill: %u-token chunks\n",
              kTokensPerBlock, kDecodeTokens, kChunk);
  std::printf("requests: 4 system prompts (512/1K/1.5K/2K tokens); each request starts with "
              "min(system, L/2) tokens of one, the rest unique; seed %" PRIu64 "\n",
              kSeed);
  for (const Model& m : models) std::printf("model %s: %s\n", m.name, m.desc);
  for (const Mix& x : mixes)
    std::printf("mix %-7s: %s (max sequence length %u)\n", x.name, x.desc, x.max_seq_len);
  std::printf("\nshared = one kvcache cache for the model; static = one cache per layer group, "
              "memory split in proportion\nto window x layers x bytes/token (full window = max "
              "sequence length of the mix), as TensorRT-LLM does.\n");
  std::printf("admitted = sequences live at once when the first add/extend ran out of blocks; "
              "reused = prompt tokens found\ncached (sum of kvc_sequence_add's counts; static: "
              "least over the group caches); warm = phase 2, the same\nmix replayed after "
              "removing every sequence. Target: shared >= 1.3x static admitted on skewed, never "
              "fewer.\n\n");

  std::printf("| model | mix     | prefill | admitted static | admitted shared | ratio | reused static | reused shared | warm: adm st/sh | warm: reused st/sh | target |\n");
  std::printf("|-------|---------|---------|-----------------|-----------------|-------|---------------|---------------|-----------------|--------------------|--------|\n");
  std::vector<std::string> notes;
  bool all_pass = true;
  for (const Prefill mode : {Prefill::kWhole, Prefill::kChunked}) {
    for (const Model& m : models) {
      for (const Mix& x : mixes) {
        Scheme st, sh;
        make_static(m, x.max_seq_len, st);
        make_shared(m, sh);
        const RunResult rs = run(st, x, mode);
        const RunResult rh = run(sh, x, mode);
        const uint32_t a = rs.phase1.admitted, b = rh.phase1.admitted;
        const double ratio = a ? double(b) / double(a) : 0.0;
        const bool skewed = std::strcmp(x.name, "skewed") == 0;
        const bool pass = b >= a && (!skewed || double(b) >= 1.3 * double(a));
        all_pass = all_pass && pass;
        char rat[16];
        if (a) std::snprintf(rat, sizeof rat, "%.2fx", ratio);
        else std::snprintf(rat, sizeof rat, "inf");
        char warm_a[32], warm_r[48];
        std::snprintf(warm_a, sizeof warm_a, "%u / %u", rs.phase2.admitted, rh.phase2.admitted);
        std::snprintf(warm_r, sizeof warm_r, "%s / %s", ktok(rs.phase2.reused).c_str(),
                      ktok(rh.phase2.reused).c_str());
        std::printf("| %-5s | %-7s | %-7s | %15u | %15u | %5s | %13s | %13s | %15s | %18s | %-6s |\n",
                    m.name, x.name, mode == Prefill::kWhole ? "whole" : "chunked", a, b, rat,
                    ktok(rs.phase1.reused).c_str(), ktok(rh.phase1.reused).c_str(), warm_a, warm_r,
                    pass ? "PASS" : "MISS");
        std::fflush(stdout);
        char head[96];
        std::snprintf(head, sizeof head, "%s/%s/%s", m.name, x.name,
                      mode == Prefill::kWhole ? "whole" : "chunked");
        notes.push_back(std::string(head) + " static: " + rs.layout + "\n    stop: " + rs.phase1.stop +
                        "\n    warm stop: " + rs.phase2.stop +
                        "\n    end of phase 1: " + rs.state);
        notes.push_back(std::string(head) + " shared: " + rh.layout + "\n    stop: " + rh.phase1.stop +
                        "\n    warm stop: " + rh.phase2.stop +
                        "\n    end of phase 1: " + rh.state);
      }
    }
  }
  std::printf("\ntarget: PASS on skewed = shared >= 1.3x static admitted; PASS elsewhere = shared admits no fewer than static. %s\n",
              all_pass ? "All met." : "Some MISSED.");
  if (verbose) {
    std::printf("\nper run: pools (blocks x real block bytes), why admission stopped, and the "
                "per-group blocks at the end of phase 1\n");
    for (const auto& n : notes) std::printf("  %s\n", n.c_str());
  }
  std::printf("\nwall time %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

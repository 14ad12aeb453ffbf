// The ranks configuration (KVC_FUZZ_RANKS): programs over a paged cache of
// 2 or 4 CPU ranks (kvc_config_set_ranks, config.h): 1-2 layers of 1, 2, 4
// or 8 kv heads (split over the ranks or, with fewer heads than ranks, one
// head replicated), f32 or f16, K and V or K only, sometimes a host tier;
// a few blocks per rank, so that eviction, offload and onboarding happen.
// The harness computes the K/V of a token as a function of its prefix, the
// layer, the model's kv head, K or V and the dim, writes it on every rank
// (directly through kvc_cache_layer_view_rank's view, or with
// kvc_store_kv and the rank field) and checks, after every call, every
// computed token of every live sequence on every rank's view: a reused,
// copied (copy-on-write, fork, onboard) or kept byte that differs on any
// rank is a finding, as is a view whose heads are not the rank's share.
#include <cstdio>
#include <cstring>
#include <vector>

#include "fuzz_feedback.h"
#include "fuzz_input.h"
#include "fuzz_model.h"
#include "fuzz_ops.h"
#include "fuzz_ranks.h"

namespace kvc_fuzz {

RanksCounters g_ranks;

namespace {

constexpr uint32_t T = 4;
constexpr uint32_t kMaxIds = 6;
constexpr uint32_t kMaxLen = 36;

using Tokens = std::vector<int32_t>;

void must(kvc_status_t st, const char* what) {
  ++g_count.check_calls;
  if (st != KVC_OK) finding("%s failed: %s: %s", what, kvc_status_string(st), kvc_last_error_message());
}

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 32);
}

struct Seq {
  bool live = false;
  Tokens tokens;
  uint64_t computed = 0;  // tokens whose K/V the harness wrote and committed
};

class RanksProgram {
 public:
  explicit RanksProgram(Input& in) : in_(in) {}
  ~RanksProgram() {
    if (cache_ != nullptr) kvc_cache_destroy(cache_);
  }
  void run();

 private:
  void create();
  // The byte `i` of element (kv, dim) of model head `head` of layer `l` for
  // the token at position t of `tokens` (a function of tokens[0..t]): a
  // finite value in f32 and f16.
  void element(const Tokens& tokens, uint64_t t, uint32_t l, uint32_t head, uint32_t kv, uint32_t d,
               unsigned char* out) const;
  uint64_t prefix_hash(const Tokens& tokens, uint64_t t) const {
    uint64_t h = 0x1234;
    for (uint64_t i = 0; i <= t; ++i) h = mix(h ^ uint64_t(uint32_t(tokens[i])));
    return h;
  }
  std::vector<int32_t> blocks(uint64_t id, uint32_t group) const;
  unsigned char* at(const kvc_layer_view_t& v, int32_t block, uint64_t t, uint32_t kv, uint32_t h) const {
    return static_cast<unsigned char*>(v.base) + uint64_t(block) * v.block_stride + kv * v.kv_stride +
           (t % T) * v.token_stride + uint64_t(h) * v.head_stride;
  }
  void verify(const char* what);
  void after(const char* what, kvc_status_t st, std::initializer_list<kvc_status_t> allowed);
  Tokens prompt();
  uint64_t pick_id() { return in_.below(kMaxIds); }

  void add();
  void compute(bool through_store);
  void extend();
  void fork();
  void rewind();
  void remove();
  void reset_reuse();
  void bad_input();

  Input& in_;
  kvc_cache_t* cache_ = nullptr;
  uint32_t R_ = 0, L_ = 0, D_ = 0, kv_ = 0, es_ = 0;
  kvc_dtype_t dtype_ = KVC_DTYPE_F32;
  std::vector<uint32_t> heads_;                       // per layer, the model's
  std::vector<std::vector<kvc_layer_view_t>> views_;  // [rank][layer]
  Seq seqs_[kMaxIds];
  std::vector<Tokens> history_;
};

void RanksProgram::create() {
  const uint8_t a = in_.u8(), b = in_.u8();
  static const uint32_t kHeads[4] = {1, 2, 4, 8};
  R_ = (a & 1) ? 4 : 2;
  L_ = 1 + ((a >> 1) & 1);
  for (uint32_t l = 0; l < L_; ++l) heads_.push_back(kHeads[(a >> (2 + 2 * l)) & 3]);
  D_ = (b & 1) ? 4 : 2;
  dtype_ = (b & 2) ? KVC_DTYPE_F16 : KVC_DTYPE_F32;
  es_ = dtype_ == KVC_DTYPE_F16 ? 2 : 4;
  kv_ = (b & 4) ? 1 : 2;
  const bool host = (b & 8) != 0;
  const bool hnd = (b & 16) != 0;
  uint64_t block_bytes = 0;  // one block of every layer on one rank, at most
  for (uint32_t h : heads_) block_bytes += uint64_t(T) * (h >= R_ ? h / R_ : 1) * D_ * es_ * kv_;
  const uint64_t blocks = 6 + (b >> 5) * 2;
  kvc_config_t* cfg = nullptr;
  must(kvc_config_create(&cfg), "kvc_config_create");
  must(kvc_config_set_num_layers(cfg, L_), "set_num_layers");
  must(kvc_config_set_kv_heads_per_layer(cfg, heads_.data(), L_), "set_kv_heads_per_layer");
  must(kvc_config_set_head_dim(cfg, D_), "set_head_dim");
  must(kvc_config_set_dtype(cfg, dtype_), "set_dtype");
  must(kvc_config_set_kv_factor(cfg, kv_), "set_kv_factor");
  must(kvc_config_set_tokens_per_block(cfg, T), "set_tokens_per_block");
  must(kvc_config_set_layout(cfg, hnd ? KVC_LAYOUT_HND : KVC_LAYOUT_NHD), "set_layout");
  must(kvc_config_set_primary_bytes(cfg, blocks * block_bytes), "set_primary_bytes");
  if (host) must(kvc_config_set_host_cache_bytes(cfg, 8 * block_bytes), "set_host_cache_bytes");
  const int32_t ordinals[4] = {0, 1, 2, 3};
  must(kvc_config_set_ranks(cfg, KVC_DEVICE_CPU, ordinals, R_), "kvc_config_set_ranks");
  ++g_count.calls;
  set_current(0, "kvc_cache_create");
  must(kvc_cache_create(cfg, &cache_), "kvc_cache_create of a ranks config");
  kvc_config_destroy(cfg);
  kvc_cache_desc_t cd;
  kvc_cache_desc_init(&cd);
  must(kvc_cache_describe(cache_, &cd), "kvc_cache_describe");
  if (cd.num_ranks != R_) finding("cache of %u ranks, configured %u", cd.num_ranks, R_);
  views_.assign(R_, std::vector<kvc_layer_view_t>(L_));
  for (uint32_t r = 0; r < R_; ++r)
    for (uint32_t l = 0; l < L_; ++l) {
      kvc_layer_view_t& v = views_[r][l];
      kvc_layer_view_init(&v);
      must(kvc_cache_layer_view_rank(cache_, r, l, &v), "kvc_cache_layer_view_rank");
      const uint32_t H = heads_[l];
      const uint32_t share = H >= R_ ? H / R_ : 1;
      const uint32_t first = H >= R_ ? r * share : r / (R_ / H);
      if (v.rank != r || v.kv_heads != share || v.first_kv_head != first || v.total_kv_heads != H ||
          v.head_dim != D_ || v.kv_factor != kv_ || v.elem_size != es_ || v.tokens_per_block != T)
        finding("rank %u layer %u: view of %u heads from %u of %u (rank %u), expected %u from %u of %u",
                r, l, v.kv_heads, v.first_kv_head, v.total_kv_heads, v.rank, share, first, H);
      for (uint32_t o = 0; o < r; ++o)
        if (views_[o][l].base == v.base) finding("ranks %u and %u share layer %u's pool", o, r, l);
    }
  if (g_trace)
    std::printf("ranks cache: %u ranks, %u layers (heads %u/%u), D %u, dtype %u, kv %u, %s, host %d, %llu blocks\n",
                R_, L_, heads_[0], L_ > 1 ? heads_[1] : 0, D_, dtype_, kv_, hnd ? "HND" : "NHD", host,
                (unsigned long long)cd.num_blocks);
}

void RanksProgram::element(const Tokens& tokens, uint64_t t, uint32_t l, uint32_t head, uint32_t kv,
                           uint32_t d, unsigned char* out) const {
  const uint64_t h = mix(prefix_hash(tokens, t) ^ (uint64_t(l) << 40 | uint64_t(head) << 24 | kv << 16 | d));
  for (uint32_t i = 0; i < es_; ++i) out[i] = (unsigned char)(h >> (8 * i));
  out[es_ - 1] &= 0x3B;  // sign 0, exponent below its maximum: finite in f32 and f16
}

std::vector<int32_t> RanksProgram::blocks(uint64_t id, uint32_t group) const {
  size_t n = 0;
  ++g_count.check_calls;
  kvc_status_t st = kvc_sequence_block_ids(cache_, id, group, nullptr, 0, &n);
  if (st != KVC_OK && st != KVC_ERR_BUFFER_TOO_SMALL) finding("kvc_sequence_block_ids: %s", kvc_status_string(st));
  std::vector<int32_t> ids(n);
  must(kvc_sequence_block_ids(cache_, id, group, ids.data(), n, &n), "kvc_sequence_block_ids");
  return ids;
}

// Every computed token of every live sequence, on every rank and layer.
void RanksProgram::verify(const char* what) {
  must(kvc_cache_check(cache_), "kvc_cache_check");
  unsigned char want[4];
  for (uint64_t id = 0; id < kMaxIds; ++id) {
    const Seq& s = seqs_[id];
    kvc_sequence_desc_t d;
    kvc_sequence_desc_init(&d);
    ++g_count.check_calls;
    const kvc_status_t st = kvc_sequence_describe(cache_, id, &d);
    if (!s.live) {
      if (st != KVC_ERR_NOT_FOUND) finding("after %s: sequence %llu exists", what, (unsigned long long)id);
      continue;
    }
    if (st != KVC_OK || d.num_tokens != s.tokens.size() || d.committed_tokens < s.computed)
      finding("after %s: sequence %llu has %llu tokens, %llu committed (mirror %zu, %llu)", what,
              (unsigned long long)id, (unsigned long long)d.num_tokens,
              (unsigned long long)d.committed_tokens, s.tokens.size(), (unsigned long long)s.computed);
    for (uint32_t l = 0; l < L_; ++l) {
      const std::vector<int32_t> ids = blocks(id, views_[0][l].group);
      for (uint64_t t = 0; t < s.computed; ++t) {
        if (t / T >= ids.size()) finding("after %s: sequence %llu has %zu blocks for %llu tokens", what, (unsigned long long)id, ids.size(), (unsigned long long)s.computed);
        for (uint32_t r = 0; r < R_; ++r) {
          const kvc_layer_view_t& v = views_[r][l];
          for (uint32_t k = 0; k < kv_; ++k)
            for (uint32_t h = 0; h < v.kv_heads; ++h) {
              const unsigned char* p = at(v, ids[t / T], t, k, h);
              for (uint32_t dd = 0; dd < D_; ++dd) {
                element(s.tokens, t, l, v.first_kv_head + h, k, dd, want);
                if (std::memcmp(p + dd * es_, want, es_) != 0)
                  finding("after %s: sequence %llu token %llu layer %u rank %u head %u (model head %u) %s "
                          "dim %u in block %d: wrong bytes", what, (unsigned long long)id,
                          (unsigned long long)t, l, r, h, v.first_kv_head + h, k ? "V" : "K", dd,
                          ids[t / T]);
              }
            }
        }
      }
    }
  }
}

void RanksProgram::after(const char* what, kvc_status_t st, std::initializer_list<kvc_status_t> allowed) {
  bool ok = false;
  for (kvc_status_t a : allowed) ok |= a == st;
  if (!ok) finding("%s: unexpected %s: %s", what, kvc_status_string(st), kvc_last_error_message());
  if (st != KVC_OK) {
    ++g_count.failed_calls;
    if (kvc_last_error_message()[0] == '\0') finding("%s failed with an empty message", what);
  }
  feedback(kOpStatus, g_op, uint32_t(st) & 31);
}

Tokens RanksProgram::prompt() {
  Tokens t;
  const uint8_t k = in_.u8();
  if (!history_.empty() && (k & 3) != 0) {
    const Tokens& h = history_[in_.below(uint32_t(history_.size()))];
    const size_t n = (k & 3) == 3 ? h.size() : std::min<size_t>(h.size(), 1 + (k >> 2) % 12);
    t.assign(h.begin(), h.begin() + n);
  }
  const uint32_t tail = t.empty() ? 1 + (k >> 4) % 16 : (k >> 5) % 6;
  for (uint32_t i = 0; i < tail && t.size() < 20; ++i) t.push_back(int32_t(1 + in_.below(3)));
  if (t.empty()) t.push_back(1);
  return t;
}

void RanksProgram::add() {
  uint64_t id = pick_id();
  if (seqs_[id].live && !in_.one_in(4))
    for (uint64_t i = 1; i < kMaxIds && seqs_[id].live; ++i) id = (id + 1) % kMaxIds;
  const Tokens t = prompt();
  uint64_t cached = 12345;
  ++g_count.calls;
  set_current(0, "kvc_sequence_add");
  const kvc_status_t st = kvc_sequence_add(cache_, id, t.data(), t.size(), nullptr, nullptr, &cached);
  if (g_trace) std::printf("add %llu (%zu tokens): %s, cached %llu\n", (unsigned long long)id, t.size(), kvc_status_string(st), (unsigned long long)cached);
  if (seqs_[id].live) after("add of a live id", st, {KVC_ERR_ALREADY_EXISTS});
  else after("kvc_sequence_add", st, {KVC_OK, KVC_ERR_OUT_OF_BLOCKS});
  if (st != KVC_OK) return verify("a refused add");
  history_.push_back(t);
  if (history_.size() > 16) history_.erase(history_.begin());
  seqs_[id].live = true;
  seqs_[id].tokens = t;
  seqs_[id].computed = cached;  // the reused tokens' K/V are checked on every rank
  if (cached > 0) {
    ++g_ranks.reused_adds;
    g_ranks.reused_tokens += cached;
  }
  feedback(kAddScope, cached == 0 ? 0 : cached % T ? 1 : 2, R_);
  verify("kvc_sequence_add");
}

// The model's forward pass over tokens [computed, to) of a sequence: K/V on
// every rank, then the commit.
void RanksProgram::compute(bool through_store) {
  const uint64_t id = pick_id();
  Seq& s = seqs_[id];
  if (!s.live || s.computed == s.tokens.size()) return;
  const uint64_t to = s.computed + 1 + in_.below(uint32_t(s.tokens.size() - s.computed));
  unsigned char e[4];
  for (uint32_t l = 0; l < L_; ++l) {
    const std::vector<int32_t> ids = blocks(id, views_[0][l].group);
    for (uint32_t r = 0; r < R_; ++r) {
      const kvc_layer_view_t& v = views_[r][l];
      if (!through_store) {
        for (uint64_t t = s.computed; t < to; ++t)
          for (uint32_t k = 0; k < kv_; ++k)
            for (uint32_t h = 0; h < v.kv_heads; ++h)
              for (uint32_t d = 0; d < D_; ++d) {
                element(s.tokens, t, l, v.first_kv_head + h, k, d, e);
                std::memcpy(at(v, ids[t / T], t, k, h) + d * es_, e, es_);
              }
        continue;
      }
      // kvc_store_kv on rank r: [n][rank's heads][D] of key and value.
      const uint64_t n = to - s.computed;
      std::vector<unsigned char> key(n * v.kv_heads * D_ * es_), value(key.size());
      std::vector<int64_t> slots(n);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t t = s.computed + i;
        slots[i] = int64_t(ids[t / T]) * T + int64_t(t % T);
        for (uint32_t h = 0; h < v.kv_heads; ++h)
          for (uint32_t d = 0; d < D_; ++d) {
            const size_t o = ((i * v.kv_heads + h) * D_ + d) * es_;
            element(s.tokens, t, l, v.first_kv_head + h, 0, d, &key[o]);
            element(s.tokens, t, l, v.first_kv_head + h, 1, d, &value[o]);
          }
      }
      kvc_store_args_t args;
      kvc_store_args_init(&args);
      args.layer = l;
      args.num_tokens = uint32_t(n);
      args.src_dtype = dtype_;
      args.key = key.data();
      args.value = kv_ == 2 ? value.data() : nullptr;
      args.slot_mapping = slots.data();
      args.rank = r;
      ++g_count.calls;
      set_current(0, "kvc_store_kv");
      after("kvc_store_kv on a rank", kvc_store_kv(cache_, &args, nullptr), {KVC_OK});
      ++g_ranks.stores;
    }
  }
  ++g_count.calls;
  set_current(0, "kvc_sequence_commit");
  after("kvc_sequence_commit", kvc_sequence_commit(cache_, id, to), {KVC_OK});
  s.computed = to;
  ++g_ranks.computes;
  verify(through_store ? "a forward pass through kvc_store_kv" : "a forward pass through the views");
}

void RanksProgram::extend() {
  const uint64_t id = pick_id();
  Seq& s = seqs_[id];
  Tokens t;
  for (uint32_t i = 0, n = 1 + in_.below(6); i < n; ++i) t.push_back(int32_t(1 + in_.below(3)));
  if (s.live && s.tokens.size() + t.size() > kMaxLen) return;
  ++g_count.calls;
  set_current(0, "kvc_sequence_extend");
  const kvc_status_t st = kvc_sequence_extend(cache_, id, t.data(), t.size(), nullptr);
  if (!s.live) after("extend of an absent id", st, {KVC_ERR_NOT_FOUND});
  else after("kvc_sequence_extend", st, {KVC_OK, KVC_ERR_OUT_OF_BLOCKS});
  if (st == KVC_OK) s.tokens.insert(s.tokens.end(), t.begin(), t.end());
  verify("kvc_sequence_extend");
}

void RanksProgram::fork() {
  const uint64_t parent = pick_id(), child = pick_id();
  ++g_count.calls;
  set_current(0, "kvc_sequence_fork");
  const kvc_status_t st = kvc_sequence_fork(cache_, parent, child);
  if (!seqs_[parent].live) after("fork of an absent parent", st, {KVC_ERR_NOT_FOUND});
  else if (seqs_[child].live) after("fork into a live id", st, {KVC_ERR_ALREADY_EXISTS});
  else after("kvc_sequence_fork", st, {KVC_OK});
  if (st == KVC_OK) {
    seqs_[child] = seqs_[parent];
    ++g_ranks.forks;
  }
  verify("kvc_sequence_fork");
}

void RanksProgram::rewind() {
  const uint64_t id = pick_id();
  Seq& s = seqs_[id];
  const uint64_t len = s.tokens.size();
  const uint64_t n = in_.one_in(8) ? len + 1 : in_.below(uint32_t(len) + 1);
  ++g_count.calls;
  set_current(0, "kvc_sequence_rewind");
  const kvc_status_t st = kvc_sequence_rewind(cache_, id, n);
  if (!s.live) after("rewind of an absent id", st, {KVC_ERR_NOT_FOUND});
  else if (n > len) after("rewind past the start", st, {KVC_ERR_INVALID_ARGUMENT});
  else after("kvc_sequence_rewind", st, {KVC_OK});
  if (st == KVC_OK) {
    s.tokens.resize(len - n);
    s.computed = std::min<uint64_t>(s.computed, len - n);
  }
  verify("kvc_sequence_rewind");
}

void RanksProgram::remove() {
  const uint64_t id = pick_id();
  ++g_count.calls;
  set_current(0, "kvc_sequence_remove");
  const kvc_status_t st = kvc_sequence_remove(cache_, id);
  after("kvc_sequence_remove", st, {seqs_[id].live ? KVC_OK : KVC_ERR_NOT_FOUND});
  seqs_[id].live = false;
  verify("kvc_sequence_remove");
}

void RanksProgram::reset_reuse() {
  bool any = false;
  for (const Seq& s : seqs_) any |= s.live && !s.tokens.empty();  // holds blocks
  ++g_count.calls;
  set_current(0, "kvc_cache_reset_reuse");
  after("kvc_cache_reset_reuse", kvc_cache_reset_reuse(cache_), {any ? KVC_ERR_INVALID_STATE : KVC_OK});
  verify("kvc_cache_reset_reuse");
}

void RanksProgram::bad_input() {
  const uint8_t k = in_.u8();
  kvc_status_t st = KVC_OK;
  ++g_count.calls;
  set_current(0, "a ranks call with a bad argument");
  kvc_layer_view_t v;
  kvc_layer_view_init(&v);
  switch (k % 4) {
    case 0: st = kvc_cache_layer_view_rank(cache_, R_ + k / 4, 0, &v); break;
    case 1: st = kvc_cache_layer_view_rank(cache_, 0, L_ + k / 4, &v); break;
    case 2: st = kvc_cache_layer_view_rank(cache_, 0, 0, nullptr); break;
    default: {
      unsigned char kv[64] = {};
      int64_t slot = 0;
      kvc_store_args_t a;
      kvc_store_args_init(&a);
      a.num_tokens = 1;
      a.src_dtype = dtype_;
      a.key = kv;
      a.value = kv_ == 2 ? kv : nullptr;
      a.slot_mapping = &slot;
      a.rank = R_ + k / 4;  // out of range: nothing written
      st = kvc_store_kv(cache_, &a, nullptr);
      break;
    }
  }
  after("a ranks call with a bad argument", st, {KVC_ERR_INVALID_ARGUMENT});
  ++g_ranks.bad_inputs;
  verify("a ranks call with a bad argument");
}

void RanksProgram::run() {
  create();
  verify("kvc_cache_create");
  for (int i = 0; i < kMaxCalls && !in_.empty(); ++i) {
    const uint8_t op = in_.u8();
    g_op = op % 16;
    ++g_ranks.ops[g_op];
    switch (op % 16) {
      case 0: case 1: case 2: add(); break;
      case 3: case 4: compute(false); break;
      case 5: case 6: compute(true); break;
      case 7: case 8: extend(); break;
      case 9: fork(); break;
      case 10: case 11: rewind(); break;
      case 12: case 13: remove(); break;
      case 14: reset_reuse(); break;
      default: bad_input(); break;
    }
  }
}

}  // namespace

void ranks_one_input(Input& in) {
  RanksProgram p(in);
  p.run();
}

void ranks_report() {
  std::fprintf(stderr,
               "kvcache_fuzz ranks: %llu adds reused %llu tokens (checked on every rank), %llu forward "
               "passes (%llu kvc_store_kv calls with a rank), %llu forks, %llu bad inputs\n",
               (unsigned long long)g_ranks.reused_adds, (unsigned long long)g_ranks.reused_tokens,
               (unsigned long long)g_ranks.computes, (unsigned long long)g_ranks.stores,
               (unsigned long long)g_ranks.forks, (unsigned long long)g_ranks.bad_inputs);
  std::fprintf(stderr, "kvcache_fuzz ranks ops:");
  for (int i = 0; i < 16; ++i) std::fprintf(stderr, " %llu", (unsigned long long)g_ranks.ops[i]);
  std::fprintf(stderr, "\n");
}

}  // namespace kvc_fuzz

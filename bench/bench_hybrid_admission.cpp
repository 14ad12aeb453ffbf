// Admission benchmark for a hybrid model (issue 21): with the same byte
// budget, how many sequences of a prompt/output mix run at once
//   - with kvcache's plan: state slots planned from the budget
//     (state.h: N = min(256, floor((budget - one block set) / 2 / S)), the
//     paged pools get the rest; with or without the planned snapshot pool);
//   - sized as AutoDeploy does: the state for a fixed max batch M up front
//     (every state buffer [M, ...]), the paged KV gets what is left
//     (mem_for_paged = free - non_paged - forward); here max_state_slots = M
//     with no snapshot pool, which gives the paged pools budget - M * S;
//   - the best fixed split for the mix (the M that admits the most), found
//     by trying every M with the same library: what a deployment tuned for
//     exactly this mix would get.
//
// Procedure, per budget x mix x scheme: one CPU cache; sequences of P + O
// tokens (prompt P, output O: every sequence holds its whole lifetime's
// blocks, so the ones admitted can all run to completion), distinct tokens
// (no prefix reuse), are added one after another until kvc_sequence_add
// refuses (KVC_ERR_OUT_OF_BLOCKS); the count and what ran out (state slots
// or KV blocks) are printed. It counts admissions, not time.
//
// Model: the simulator's nemotron-h-8b preset (examples/simulator/
// presets.cpp): 4 attention layers (8 KV heads of 128, bf16, 16-token
// blocks: 256 KiB a block set) and 24 Mamba-2 layers (SSM 128 heads x 64 x
// d_state 128 bf16 = 2 MiB; conv 10240 x 4 bf16 = 80 KiB): 49.9 MiB of state
// a sequence. Scale: every byte size divided by 16, as bench_capacity does
// (KV head_dim 128 -> 8; SSM heads 128 -> 8; conv_dim 10240 -> 640, which
// fails the n_groups constraint at this scale so the conv resources are
// local: the same slot count, so the same admissions), and the budget too:
// every count is what the real sizes give; the bytes printed are real.
//
//   bench_hybrid_admission [budget GiB ...]   (default 8 16 24 40)
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <kvcache/kvcache.h>

namespace {

constexpr uint64_t kScale = 16;
constexpr uint32_t kTokensPerBlock = 16;
constexpr uint32_t kMambaLayers = 24;
constexpr uint64_t kGiB = uint64_t(1) << 30;

void must(kvc_status_t st, const char* what) {
  if (st == KVC_OK) return;
  std::fprintf(stderr, "%s: %s: %s\n", what, kvc_status_string(st), kvc_last_error_message());
  std::exit(1);
}

// The scaled model with `budget` real bytes; slots 0 = planned;
// snapshots: KVC_STATE_SNAPSHOTS_NONE or 0 (planned).
kvc_config_t* config(uint64_t budget, uint32_t slots, uint32_t snapshots) {
  kvc_config_t* c = nullptr;
  must(kvc_config_create(&c), "config");
  must(kvc_config_set_num_layers(c, 4), "layers");
  must(kvc_config_set_kv_heads(c, 8), "kv heads");
  must(kvc_config_set_head_dim(c, 128 / kScale), "head dim");
  must(kvc_config_set_dtype(c, KVC_DTYPE_BF16), "dtype");
  must(kvc_config_set_tokens_per_block(c, kTokensPerBlock), "tokens per block");
  must(kvc_config_set_primary_bytes(c, budget / kScale), "primary bytes");
  must(kvc_config_set_block_reuse(c, 0), "block reuse");
  uint32_t idx = 0;
  for (uint32_t l = 0; l < kMambaLayers; ++l) {
    must(kvc_config_add_ssm_state(c, 128 / kScale, 64, 128, KVC_DTYPE_BF16, &idx), "ssm");
    must(kvc_config_add_conv_state(c, 10240 / kScale, 4, KVC_DTYPE_BF16, &idx), "conv");
  }
  must(kvc_config_set_max_state_slots(c, slots), "slots");
  must(kvc_config_set_max_state_snapshots(c, snapshots), "snapshots");
  return c;
}

struct Result {
  bool created = false;
  std::string why_not;   // creation refused
  uint32_t admitted = 0;
  uint32_t slots = 0;    // state slots
  uint64_t kv_blocks = 0;
  uint32_t snapshot_slots = 0;
  bool slot_bound = false;  // the add refused for a state slot (else KV blocks)
};

Result run(uint64_t budget, uint32_t slots, uint32_t snapshots, uint64_t tokens) {
  Result r;
  kvc_config_t* c = config(budget, slots, snapshots);
  kvc_cache_t* cache = nullptr;
  const kvc_status_t st = kvc_cache_create(c, &cache);
  kvc_config_destroy(c);
  if (st != KVC_OK) {
    r.why_not = kvc_last_error_message();
    return r;
  }
  r.created = true;
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  must(kvc_cache_describe(cache, &d), "describe");
  r.slots = d.num_state_slots;
  r.kv_blocks = d.num_blocks;
  kvc_snapshot_stats_t s = KVC_SNAPSHOT_STATS_INIT;
  must(kvc_cache_get_snapshot_stats(cache, &s), "snapshot stats");
  r.snapshot_slots = s.num_slots;
  std::vector<int32_t> t(tokens);
  for (uint64_t id = 1;; ++id) {
    for (uint64_t i = 0; i < tokens; ++i) t[i] = int32_t(id * 1000003 + i);
    uint64_t cached = 0;
    const kvc_status_t a = kvc_sequence_add(cache, id, t.data(), tokens, nullptr, nullptr, &cached);
    if (a == KVC_ERR_OUT_OF_BLOCKS) {
      r.slot_bound = std::strstr(kvc_last_error_message(), "no free state slot") != nullptr;
      break;
    }
    must(a, "add");
    ++r.admitted;
  }
  kvc_cache_destroy(cache);
  return r;
}

std::string cell(const Result& r) {
  if (!r.created) return "does not fit";
  return std::to_string(r.admitted) + (r.slot_bound ? " (slots)" : " (KV)");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> budgets;
  for (int i = 1; i < argc; ++i) budgets.push_back(std::strtoull(argv[i], nullptr, 10));
  if (budgets.empty()) budgets = {8, 16, 24, 40};
  struct Mix {
    uint64_t prompt, output;
  };
  const Mix mixes[] = {{512, 128}, {1024, 256}, {4096, 512}, {8192, 1024}, {32768, 1024}};
  const uint32_t max_batches[] = {8, 64, 128, 256};
  std::printf("| budget | prompt + output | kvcache planned: seqs (limit) [slots, KV blocks] "
              "| + planned snapshots [snapshot slots] | AutoDeploy M=8 | M=64 | M=128 | M=256 "
              "| best fixed M: seqs |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (uint64_t gib : budgets) {
    const uint64_t budget = gib * kGiB;
    for (const Mix& m : mixes) {
      const uint64_t tokens = m.prompt + m.output;
      const Result planned = run(budget, 0, KVC_STATE_SNAPSHOTS_NONE, tokens);
      const Result snaps = run(budget, 0, 0, tokens);
      std::string ad[4];
      for (int k = 0; k < 4; ++k) ad[k] = cell(run(budget, max_batches[k], KVC_STATE_SNAPSHOTS_NONE, tokens));
      // The best fixed split: admissions equal M while the state slots
      // bind and fall once the KV does: the best M is where they cross.
      // Double M until the KV binds (or the state does not fit), then
      // bisect for the last M the slots bind at.
      uint32_t best = 0, best_m = 0;
      auto try_m = [&](uint32_t mm) {
        const Result r = run(budget, mm, KVC_STATE_SNAPSHOTS_NONE, tokens);
        if (r.created && (r.admitted > best || (r.admitted == best && mm < best_m))) {
          best = r.admitted;
          best_m = mm;
        }
        return r.created && r.slot_bound;
      };
      uint32_t lo = 0, hi = 1;
      while (try_m(hi)) {
        lo = hi;
        hi *= 2;
      }
      while (hi - lo > 1) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (try_m(mid))
          lo = mid;
        else
          hi = mid;
      }
      std::printf("| %" PRIu64 " GiB | %" PRIu64 " + %" PRIu64 " | %s [%u, %" PRIu64
                  "] | %s [%u] | %s | %s | %s | %s | %u (M=%u) |\n",
                  gib, m.prompt, m.output, cell(planned).c_str(), planned.slots,
                  planned.kv_blocks, cell(snaps).c_str(), snaps.snapshot_slots, ad[0].c_str(),
                  ad[1].c_str(), ad[2].c_str(), ad[3].c_str(), best, best_m);
      std::fflush(stdout);
    }
  }
  return 0;
}

#include "report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <string>

namespace sim {
namespace {

std::string fmt(const char *f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// 1234567 -> "1.23M": the table stays narrow, the JSON keeps exact counts.
std::string count(uint64_t n) {
  const double v = static_cast<double>(n);
  if (n < 10000) return std::to_string(n);
  if (n < 10000000) return fmt("%.1fk", v / 1e3);
  if (n < 10000000000ull) return fmt("%.2fM", v / 1e6);
  return fmt("%.2fG", v / 1e9);
}

std::string bytes(uint64_t n) {
  const double v = static_cast<double>(n);
  if (n >= (1ull << 30)) return fmt("%.1f GiB", v / static_cast<double>(1ull << 30));
  if (n >= (1ull << 20)) return fmt("%.1f MiB", v / static_cast<double>(1ull << 20));
  if (n >= 1024) return fmt("%.1f KiB", v / 1024.0);
  return std::to_string(n) + " B";
}

std::string percent(uint64_t part, uint64_t whole) {
  return whole ? fmt("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole))
               : "-";
}

std::string micros(double us) { return us < 100 ? fmt("%.1f", us) : fmt("%.0f", us); }

struct Row {
  std::string label;
  std::vector<std::string> values;
  std::string meaning;
};

void json_string(std::FILE *out, const std::string &s) {
  std::fputc('"', out);
  for (char c : s) {
    if (c == '"' || c == '\\') std::fputc('\\', out);
    if (static_cast<unsigned char>(c) < 0x20) {
      std::fprintf(out, "\\u%04x", c);
      continue;
    }
    std::fputc(c, out);
  }
  std::fputc('"', out);
}

// --profile: where each run's bookkeeping went, per kind of call.
void print_profiles(std::FILE *out, const std::vector<RunResult> &runs) {
  for (const RunResult &r : runs) {
    if (r.profile.empty()) continue;
    double all = 0;
    for (const CallProfile &p : r.profile) all += p.total_s;
    std::fprintf(out, "\nprofile (%s): wall time of each kvcache call, by kind\n", r.policy.c_str());
    std::fprintf(out, "%-30s %10s %10s %6s %9s %9s %9s %9s %9s\n", "call", "calls", "total", "share",
                 "p50 us", "p99 us", "p99.9 us", "max us", "slow 1%");
    for (const CallProfile &p : r.profile)
      std::fprintf(out, "%-30s %10s %8.3f s %5.1f%% %9s %9s %9s %9s %8.1f%%\n", p.kind.c_str(),
                   count(p.calls).c_str(), p.total_s, all > 0 ? 100.0 * p.total_s / all : 0.0,
                   micros(p.per_call.p50).c_str(), micros(p.per_call.p99).c_str(),
                   micros(p.per_call.p999).c_str(), micros(p.per_call.max).c_str(),
                   100.0 * p.slow_share);
    std::fprintf(out, "(slow 1%%: each kind's share of the call time in the slowest 1%% of steps)\n");
    std::fprintf(out, "(a CPU-time reading costs %.2f us here; it is taken off each step's CPU time)\n",
                 r.cpu_reading_us);
  }
}

}  // namespace

void print_table(std::FILE *out, const Workload &workload, const std::vector<RunResult> &runs) {
  if (runs.empty()) return;
  const RunResult &first = runs.front();
  const SimConfig &c = first.config;
  std::fprintf(out, "workload: %s: %zu requests, %s prompt tokens, %s output tokens\n",
               workload.name.c_str(), workload.requests.size(),
               count(workload.prompt_tokens()).c_str(), count(workload.output_tokens()).c_str());
  std::fprintf(out, "model:    %s\n", c.model.description.c_str());
  std::fprintf(out,
               "cache:    %s, %s blocks of %u tokens (%s, %s per token)%s%s%s%s\n",
               c.device.c_str(), count(first.capacity_blocks).c_str(), c.tokens_per_block,
               bytes(first.primary_bytes).c_str(),
               bytes(first.block_bytes_per_token).c_str(),
               c.unlimited ? ", unlimited (sized to never evict)" : "",
               c.partial_reuse ? ", partial reuse" : "",
               c.host_cache_bytes ? (", host tier " + bytes(c.host_cache_bytes)).c_str() : "",
               c.disk_cache_dir.empty()
                   ? ""
                   : (", disk tier " + bytes(c.disk_cache_bytes) + " in " + c.disk_cache_dir).c_str());
  if (!c.remote_cache_url.empty()) {
    const bool shared = runs.size() == 1 || runs[1].config.remote_namespace == c.remote_namespace;
    std::fprintf(out, "remote:   %s, at most %s per instance, %zu instance%s%s\n",
                 c.remote_cache_url.c_str(), bytes(c.remote_cache_bytes).c_str(), runs.size(),
                 runs.size() == 1 ? "" : "s",
                 shared ? "" : ", each in a namespace of its own (nothing shared)");
  }
  std::fprintf(out, "\n");

  std::vector<Row> rows;
  auto add = [&](const std::string &label, const std::string &meaning, auto value) {
    Row row{label, {}, meaning};
    for (const RunResult &r : runs) row.values.push_back(value(r));
    rows.push_back(std::move(row));
  };
  add("policy", "reuse off | LRU | blocks kept at a higher eviction priority",
      [](const RunResult &r) { return r.policy; });
  add("prompt tokens reused", "prompt tokens found in the cache instead of computed",
      [](const RunResult &r) { return count(r.reused_tokens); });
  add("hit rate", "reused / all prompt tokens",
      [](const RunResult &r) { return percent(r.reused_tokens, r.prompt_tokens); });
  add("blocks reused", "cached blocks that new requests used again",
      [](const RunResult &r) { return count(r.counters.reused); });
  add("blocks evicted", "cached blocks dropped to make room",
      [](const RunResult &r) { return count(r.counters.evicted); });
  add("blocks offloaded", "evicted blocks copied to the host tier (n/a: no --host-cache)",
      [](const RunResult &r) { return r.counters.has_tiers ? count(r.counters.offloaded) : "n/a"; });
  add("blocks onboarded", "host-tier blocks copied back on a hit",
      [](const RunResult &r) { return r.counters.has_tiers ? count(r.counters.onboarded) : "n/a"; });
  if (c.model.mamba_layers > 0) {
    add("state snapshots", "published every N blocks (--publish-every); slots of the pool",
        [](const RunResult &r) {
          return (r.config.publish_every ? "every " + std::to_string(r.config.publish_every)
                                         : std::string("never")) +
                 ", " + std::to_string(r.counters.snapshot_slots) + " slots of " +
                 bytes(r.counters.snapshot_bytes);
        });
    add("snapshots published", "publishes (bytes copied)", [](const RunResult &r) {
      return count(r.counters.snapshots_published) + " (" +
             bytes(r.counters.snapshots_published * r.counters.snapshot_bytes) + ")";
    });
    add("snapshot hits", "adds that restored a snapshot (tokens reused through them)",
        [](const RunResult &r) {
          return count(r.counters.snapshot_hits) + " (" + count(r.counters.snapshot_hit_tokens) +
                 ")";
        });
    add("snapshots evicted", "by a publish into a full pool (dropped with their blocks)",
        [](const RunResult &r) {
          return count(r.counters.snapshots_evicted) + " (" +
                 count(r.counters.snapshots_dropped) + ")";
        });
  }
  if (!c.disk_cache_dir.empty()) {
    add("blocks to disk",
        "blocks queued for the disk tier: at commit on cpu, at eviction on cuda (dropped writes)",
        [](const RunResult &r) {
          return count(r.counters.disk_offered) + " (" + count(r.counters.disk_dropped) + ")";
        });
    add("blocks from disk", "disk-tier blocks loaded on a hit (records refused)",
        [](const RunResult &r) {
          return count(r.counters.disk_onboarded) + " (" + count(r.counters.disk_rejected) + ")";
        });
  }
  if (!c.remote_cache_url.empty()) {
    add("blocks to remote",
        "blocks queued for the Redis tier: at commit on cpu, at eviction on cuda (dropped writes)",
        [](const RunResult &r) {
          return count(r.counters.remote_offered) + " (" + count(r.counters.remote_dropped) + ")";
        });
    add("blocks from remote", "Redis-tier blocks loaded on a hit (records refused, errors)",
        [](const RunResult &r) {
          return count(r.counters.remote_onboarded) + " (" + count(r.counters.remote_rejected) +
                 ", " + count(r.counters.remote_errors) + ")";
        });
  }
  add("peak blocks in use", "most blocks held by running requests (share of all)",
      [](const RunResult &r) {
        return count(r.peak_in_use) + " (" + percent(r.peak_in_use, r.capacity_blocks) + ")";
      });
  add("preemptions", "requests stopped for lack of blocks, recomputed later",
      [](const RunResult &r) { return count(r.preemptions); });
  add("recomputed tokens", "tokens computed again after preemptions",
      [](const RunResult &r) { return count(r.recomputed_tokens); });
  add("completed / rejected", "rejected: prompt larger than the whole cache",
      [](const RunResult &r) { return count(r.completed) + " / " + count(r.rejected); });
  add("scheduling steps", "forward passes simulated",
      [](const RunResult &r) { return count(r.steps); });
  add("prefill chunks", "later chunks of prompts longer than a step (--chunked-prefill)",
      [](const RunResult &r) { return count(r.prefill_chunks); });
  add("bookkeeping/step p50", "us of kvcache calls per step (add, extend, commit, ...), wall",
      [](const RunResult &r) { return micros(r.bookkeeping_wall.p50) + " us"; });
  add("bookkeeping/step p99", "99th percentile of the same",
      [](const RunResult &r) { return micros(r.bookkeeping_wall.p99) + " us"; });
  add("bookkeeping/step p99.9", "99.9th percentile of the same",
      [](const RunResult &r) { return micros(r.bookkeeping_wall.p999) + " us"; });
  add("bookkeeping/step max", "the slowest step's",
      [](const RunResult &r) { return micros(r.bookkeeping_wall.max) + " us"; });
  add("bookkeeping CPU/step p50", "the same calls in this thread's CPU time (not waiting)",
      [](const RunResult &r) { return micros(r.bookkeeping_cpu.p50) + " us"; });
  add("bookkeeping CPU/step p99", "99th percentile of the CPU time",
      [](const RunResult &r) { return micros(r.bookkeeping_cpu.p99) + " us"; });
  add("bookkeeping CPU/step p99.9", "99.9th percentile of the CPU time",
      [](const RunResult &r) { return micros(r.bookkeeping_cpu.p999) + " us"; });
  add("bookkeeping CPU/step max", "the most CPU time of a step",
      [](const RunResult &r) { return micros(r.bookkeeping_cpu.max) + " us"; });
  if (c.room_ahead) {
    add("room ahead/step p50", "kvc_cache_make_room while the device runs the step, wall",
        [](const RunResult &r) { return micros(r.room_ahead_wall.p50) + " us"; });
    add("room ahead/step p99", "(evictions made ahead; not in the bookkeeping above)",
        [](const RunResult &r) { return micros(r.room_ahead_wall.p99) + " us"; });
    add("room ahead CPU/step p50", "the same in this thread's CPU time",
        [](const RunResult &r) { return micros(r.room_ahead_cpu.p50) + " us"; });
  }
  add("KV written", "tokens stored through kvc_store_kv, every layer",
      [](const RunResult &r) { return count(r.stored_tokens); });
  if (c.attention) {
    add("attention calls", "kvc_decode_attention calls (one per layer per step with decode rows)",
        [](const RunResult &r) { return count(r.attention_calls); });
    add("prefill attention calls", "kvc_prefill_attention calls (one per layer per step with prefill chunks)",
        [](const RunResult &r) { return count(r.prefill_calls); });
    add("queries attended", "computed tokens read back through attention (each every layer)",
        [](const RunResult &r) { return count(r.attended_queries); });
  }
  add("kernel time", "wall time in the store (and attention) kernels",
      [](const RunResult &r) { return fmt("%.1f s", r.kv_write_s); });
  add("simulated time", "serving time on the modelled GPU",
      [](const RunResult &r) { return fmt("%.0f s", r.simulated_s); });
  add("wall time", "time this run took here",
      [](const RunResult &r) { return fmt("%.1f s", r.wall_s); });

  size_t label_w = 0;
  std::vector<size_t> col_w(runs.size(), 0);
  for (const Row &row : rows) {
    label_w = std::max(label_w, row.label.size());
    for (size_t i = 0; i < runs.size(); ++i) col_w[i] = std::max(col_w[i], row.values[i].size());
  }
  for (const Row &row : rows) {
    std::fprintf(out, "%-*s", static_cast<int>(label_w), row.label.c_str());
    for (size_t i = 0; i < runs.size(); ++i)
      std::fprintf(out, "  %*s", static_cast<int>(col_w[i]), row.values[i].c_str());
    std::fprintf(out, "  %s\n", row.meaning.c_str());
  }
  print_profiles(out, runs);
}

void print_json(std::FILE *out, const Workload &workload, const std::vector<RunResult> &runs) {
  std::fprintf(out, "{\"workload\": ");
  json_string(out, workload.name);
  std::fprintf(out, ", \"requests\": %zu, \"prompt_tokens\": %" PRIu64 ", \"runs\": [",
               workload.requests.size(), workload.prompt_tokens());
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult &r = runs[i];
    const SimConfig &c = r.config;
    std::fprintf(out, "%s\n  {\"policy\": ", i ? "," : "");
    json_string(out, r.policy);
    std::fprintf(out, ", \"model\": ");
    json_string(out, c.model.name);
    std::fprintf(out, ", \"device\": ");
    json_string(out, c.device);
    std::fprintf(out,
                 ", \"tokens_per_block\": %u, \"capacity_blocks\": %" PRIu64
                 ", \"primary_bytes\": %" PRIu64 ", \"bytes_per_token\": %" PRIu64
                 ", \"unlimited\": %s, \"partial_reuse\": %s, \"reuse\": %s"
                 ", \"prompt_priority\": %u, \"system_priority\": %u"
                 ", \"host_cache_bytes\": %" PRIu64 ", \"disk_cache_bytes\": %" PRIu64
                 ",\n   ",
                 c.tokens_per_block, r.capacity_blocks, r.primary_bytes, r.block_bytes_per_token,
                 c.unlimited ? "true" : "false", c.partial_reuse ? "true" : "false",
                 c.policy.reuse ? "true" : "false", c.policy.prompt_priority,
                 c.policy.system_priority, c.host_cache_bytes,
                 c.disk_cache_dir.empty() ? uint64_t(0) : c.disk_cache_bytes);
    if (r.counters.has_state)
      std::fprintf(out,
                   "\"publish_every\": %u, \"snapshot_slots\": %u, \"snapshot_bytes\": %" PRIu64
                   ", \"snapshots_published\": %" PRIu64 ", \"snapshot_hits\": %" PRIu64
                   ", \"snapshot_hit_tokens\": %" PRIu64 ", \"snapshots_evicted\": %" PRIu64
                   ", \"snapshots_dropped\": %" PRIu64 ",\n   ",
                   c.publish_every, r.counters.snapshot_slots, r.counters.snapshot_bytes,
                   r.counters.snapshots_published, r.counters.snapshot_hits,
                   r.counters.snapshot_hit_tokens, r.counters.snapshots_evicted,
                   r.counters.snapshots_dropped);
    std::fprintf(out,
                 "\"requests\": %" PRIu64 ", \"completed\": %" PRIu64 ", \"rejected\": %" PRIu64
                 ", \"prompt_tokens\": %" PRIu64 ", \"reused_tokens\": %" PRIu64
                 ", \"hit_rate\": %.6f, \"recomputed_tokens\": %" PRIu64
                 ", \"decoded_tokens\": %" PRIu64 ",\n   ",
                 r.requests, r.completed, r.rejected, r.prompt_tokens, r.reused_tokens,
                 r.hit_rate(), r.recomputed_tokens, r.decoded_tokens);
    std::fprintf(out,
                 "\"blocks_reused\": %" PRIu64 ", \"blocks_evicted\": %" PRIu64
                 ", \"blocks_offloaded\": %s, \"blocks_onboarded\": %s"
                 ", \"peak_blocks_in_use\": %" PRIu64 ", \"preemptions\": %" PRIu64
                 ", \"steps\": %" PRIu64 ", \"prefill_chunks\": %" PRIu64
                 ", \"disk_blocks_written\": %s"
                 ", \"disk_blocks_loaded\": %s, \"disk_blocks_dropped\": %s"
                 ", \"remote_blocks_written\": %s, \"remote_blocks_loaded\": %s"
                 ", \"remote_blocks_dropped\": %s,\n   ",
                 r.counters.reused, r.counters.evicted,
                 r.counters.has_tiers ? std::to_string(r.counters.offloaded).c_str() : "null",
                 r.counters.has_tiers ? std::to_string(r.counters.onboarded).c_str() : "null", r.peak_in_use, r.preemptions, r.steps,
                 r.prefill_chunks,
                 r.counters.has_disk ? std::to_string(r.counters.disk_offered).c_str() : "null",
                 r.counters.has_disk ? std::to_string(r.counters.disk_onboarded).c_str() : "null",
                 r.counters.has_disk ? std::to_string(r.counters.disk_dropped).c_str() : "null",
                 r.counters.has_remote ? std::to_string(r.counters.remote_offered).c_str() : "null",
                 r.counters.has_remote ? std::to_string(r.counters.remote_onboarded).c_str()
                                       : "null",
                 r.counters.has_remote ? std::to_string(r.counters.remote_dropped).c_str()
                                       : "null");
    const Spread &w = r.bookkeeping_wall, &u = r.bookkeeping_cpu;
    std::fprintf(out,
                 "\"bookkeeping_us_p50\": %.3f, \"bookkeeping_us_p99\": %.3f"
                 ", \"bookkeeping_us_p999\": %.3f, \"bookkeeping_us_max\": %.3f"
                 ", \"bookkeeping_cpu_us_p50\": %.3f, \"bookkeeping_cpu_us_p99\": %.3f"
                 ", \"bookkeeping_cpu_us_p999\": %.3f, \"bookkeeping_cpu_us_max\": %.3f,\n   ",
                 w.p50, w.p99, w.p999, w.max, u.p50, u.p99, u.p999, u.max);
    const Spread &a = r.room_ahead_wall, &ac = r.room_ahead_cpu;
    std::fprintf(out,
                 "\"room_ahead_us_p50\": %.3f, \"room_ahead_us_p99\": %.3f"
                 ", \"room_ahead_us_max\": %.3f, \"room_ahead_cpu_us_p50\": %.3f"
                 ", \"room_ahead_cpu_us_p99\": %.3f,\n   ",
                 a.p50, a.p99, a.max, ac.p50, ac.p99);
    std::fprintf(out, "\"profile\": [");
    for (size_t k = 0; k < r.profile.size(); ++k) {
      const CallProfile &p = r.profile[k];
      std::fprintf(out, "%s{\"kind\": ", k ? ", " : "");
      json_string(out, p.kind);
      std::fprintf(out,
                   ", \"calls\": %" PRIu64 ", \"total_s\": %.6f, \"us_p50\": %.3f"
                   ", \"us_p99\": %.3f, \"us_p999\": %.3f, \"us_max\": %.3f"
                   ", \"slow_step_share\": %.4f}",
                   p.calls, p.total_s, p.per_call.p50, p.per_call.p99, p.per_call.p999,
                   p.per_call.max, p.slow_share);
    }
    std::fprintf(out, "],\n   ");
    std::fprintf(out,
                 "\"stored_tokens\": %" PRIu64 ", \"attention_calls\": %" PRIu64
                 ", \"prefill_attention_calls\": %" PRIu64 ", \"attended_queries\": %" PRIu64
                 ", \"kernel_s\": %.3f, \"simulated_s\": %.3f, \"wall_s\": %.3f,\n   ",
                 r.stored_tokens, r.attention_calls,
                 r.prefill_calls, r.attended_queries,
                 r.kv_write_s, r.simulated_s, r.wall_s);
    std::fprintf(out, "\"timeline_columns\": [\"time_s\", \"hit_rate\", \"in_use\", \"cached\"],\n   ");
    std::fprintf(out, "\"timeline\": [");
    for (size_t k = 0; k < r.timeline.size(); ++k) {
      const Sample &s = r.timeline[k];
      std::fprintf(out, "%s[%.3f, ", k ? ", " : "", s.time_s);
      if (std::isnan(s.hit_rate))
        std::fprintf(out, "null");
      else
        std::fprintf(out, "%.4f", s.hit_rate);
      std::fprintf(out, ", %.4f, %.4f]", s.in_use, s.cached);
    }
    std::fprintf(out, "]}");
  }
  std::fprintf(out, "\n]}\n");
}

}  // namespace sim

#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

namespace sim {
namespace {

bool parse_u64(const std::string &s, uint64_t &out) {
  if (s.empty() || s[0] == '-') return false;
  errno = 0;
  char *end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno || *end) return false;
  out = v;
  return true;
}

bool parse_u32(const std::string &s, uint32_t &out) {
  uint64_t v = 0;
  if (!parse_u64(s, v) || v > UINT32_MAX) return false;
  out = static_cast<uint32_t>(v);
  return true;
}

bool parse_double(const std::string &s, double &out) {
  char *end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && !*end && std::isfinite(out);
}

// "8G", "512M", "64K" or plain bytes (binary units).
bool parse_bytes(const std::string &s, uint64_t &out) {
  if (s.empty()) return false;
  uint64_t mult = 1;
  std::string digits = s;
  switch (s.back()) {
    case 'K': case 'k': mult = 1ull << 10; break;
    case 'M': case 'm': mult = 1ull << 20; break;
    case 'G': case 'g': mult = 1ull << 30; break;
    case 'T': case 't': mult = 1ull << 40; break;
    default: break;
  }
  if (mult != 1) digits.pop_back();
  double v = 0;
  if (!parse_double(digits, v) || v < 0 || v * static_cast<double>(mult) > 1.8e19) return false;
  out = static_cast<uint64_t>(v * static_cast<double>(mult));
  return true;
}

bool parse_on_off(const std::string &s, bool &out) {
  if (s == "on" || s == "1" || s == "true") return out = true, true;
  if (s == "off" || s == "0" || s == "false") return out = false, true;
  return false;
}

std::string policy_name(const Policy &p) {
  if (!p.reuse) return "reuse off";
  std::string name;
  if (p.system_priority) name = "system prio " + std::to_string(p.system_priority);
  if (p.prompt_priority)
    name += (name.empty() ? "" : ", ") + std::string("prompt prio ") +
            std::to_string(p.prompt_priority);
  return name.empty() ? "LRU" : name;
}

}  // namespace

std::vector<Policy> compare_policies(uint32_t system_priority) {
  std::vector<Policy> p = {{"", false, 0, 0}, {"", true, 0, 0}, {"", true, 0, system_priority}};
  for (Policy &x : p) x.name = policy_name(x);
  return p;
}

std::string usage() {
  std::string presets;
  for (const ModelPreset &m : model_presets())
    presets += "                          " + m.name + ": " + m.description + "\n";
  return
      "usage: kvcache-sim [options]\n"
      "Replays a workload through a kvcache cache with a continuous-batching scheduler\n"
      "and prints how much prompt work the cache saved.\n"
      "\nworkload (the synthetic multi-tenant generator unless --trace is given):\n"
      "  --trace FILE            Mooncake JSONL trace (timestamp, input_length,\n"
      "                          output_length, hash_ids of 512-token blocks); a\n"
      "                          trace names no system prompt, so --system-priority\n"
      "                          (and --compare's third policy) retains nothing there\n"
      "  --speed X               arrival times divided by X (default 1)\n"
      "  --requests N            only the first N records of the trace\n"
      "  --tenants N             synthetic: tenants (default 8)\n"
      "  --salted-tenants N      synthetic: tenants with a cache salt (default 4)\n"
      "  --chats N               synthetic: chats per tenant (default 10)\n"
      "  --turns N               synthetic: turns per chat (default 4)\n"
      "  --preamble-tokens N     synthetic: system preamble shared by all tenants (1024)\n"
      "  --system-tokens N       synthetic: each tenant's own system prompt (2048)\n"
      "  --question-tokens N     synthetic: mean question length (384)\n"
      "  --answer-tokens N       synthetic: mean answer length (192)\n"
      "  --rate X                synthetic: chats started per second (2)\n"
      "  --think X               synthetic: mean seconds between turns (30)\n"
      "  --seed N                synthetic: random seed (1)\n"
      "\nmodel and cache:\n"
      "  --model NAME            model shape (default llama-3.1-8b):\n" +
      presets +
      "  --device D              cpu (default) or cuda:N\n"
      "  --memory BYTES          primary pool budget, e.g. 4G (default 4G), or\n"
      "                          'unlimited': sized so that nothing is evicted\n"
      "  --tokens-per-block N    (default 16)\n"
      "  --reuse on|off          prefix reuse across requests (default on)\n"
      "  --partial-reuse on|off  token-by-token reuse of a partly matching block (on)\n"
      "  --publish-every N       hybrid models: publish each sequence's state every N\n"
      "                          blocks of computed tokens (chunk ends of a chunked\n"
      "                          prefill, decode steps ending such a block); a prompt\n"
      "                          reuses up to the deepest snapshot; 0 = never (0)\n"
      "  --state-snapshots N     hybrid models: snapshot slots (0 = planned, state.h)\n"
      "  --prompt-priority P     eviction priority of prompt blocks, 1..100; decoded\n"
      "                          blocks stay at 35 (default: every block at 35)\n"
      "  --system-priority P     eviction priority of each request's system prompt\n"
      "                          (synthetic: preamble + tenant prompt), 1..100, as a\n"
      "                          retention range over its first tokens; blocks after\n"
      "                          it take --prompt-priority (default: no range)\n"
      "  --host-cache BYTES      host (secondary) tier for offloaded blocks (0)\n"
      "  --remote-cache URL      remote tier below them: the Redis server at URL\n"
      "                          (redis://[user:password@]host:port/db), shared by every\n"
      "                          instance and by later runs (default none)\n"
      "  --remote-cache-bytes BYTES  what each instance keeps in Redis at most (1G)\n"
      "  --instances N           N engines, each with its own cache, the requests dealt\n"
      "                          to them in turn (no prefix-aware routing), stepped on\n"
      "                          one simulated clock; with --remote-cache they share\n"
      "                          the Redis tier and reuse each other's evicted blocks (1)\n"
      "  --remote-private        each instance keeps to a namespace of its own on the\n"
      "                          server: the same tier, nothing shared (to tell how\n"
      "                          much of the reuse came from the other instances)\n"
      "  --disk-cache DIR:BYTES  disk tier below it: slab files under DIR (an existing\n"
      "                          directory), at most BYTES; a later run on DIR finds\n"
      "                          the blocks this one wrote (default none)\n"
      "  --attention             read the KV back with paged attention: decode rows\n"
      "                          through kvc_decode_attention, prefill chunks through\n"
      "                          kvc_prefill_attention (head dims 64, 128 and 256:\n"
      "                          not --model tiny)\n"
      "\nscheduler:\n"
      "  --max-batch-tokens N    tokens per step (default 8192)\n"
      "  --max-running N         sequences in flight (default 256)\n"
      "  --max-prefills N        new sequences per step, a chunk being prefilled\n"
      "                          counting as one; 0 = no limit (default 0)\n"
      "  --chunked-prefill on|off  a prompt longer than the step's budget is added\n"
      "                          with its reused prefix and a first chunk, then\n"
      "                          extended one chunk a step, as serving engines do\n"
      "                          (on); off: it runs whole in one step, alone\n"
      "  --max-output N          cap each request's output tokens, 0 = none\n"
      "  --no-room-ahead         no kvc_cache_make_room while the device runs a step:\n"
      "                          every eviction falls on the add or extend that\n"
      "                          needs the room (default: room ahead, timed apart)\n"
      "\noutput:\n"
      "  --compare               run reuse off, LRU and system-prompt retention side\n"
      "                          by side (priority from --system-priority, default\n"
      "                          90; --prompt-priority does not apply)\n"
      "  --json                  print JSON instead of the table\n"
      "  --plot FILE.svg         draw hit rate and cache occupancy over time\n"
      "  --no-progress           no progress bar (it is drawn only on a terminal)\n"
      "  --profile               time every kvcache call and print where the\n"
      "                          bookkeeping goes, per call kind (add, extend, commit,\n"
      "                          remove, tables): calls, total, p50/p99/p99.9/max\n"
      "  --help\n";
}

bool parse_options(int argc, char **argv, Options &o, std::string &error) {
  o.config.model = model_presets().front();
  o.config.memory_bytes = 4ull << 30;
  o.config.progress = true;
  bool reuse = true;
  uint32_t prompt_priority = 0;
  uint32_t system_priority = 0;
  using Handler = std::function<bool(const std::string &)>;
  const std::map<std::string, Handler> with_value = {
      {"--trace", [&](const std::string &v) { o.trace = v; return !v.empty(); }},
      {"--speed", [&](const std::string &v) {
         return parse_double(v, o.trace_options.speed) && o.trace_options.speed > 0; }},
      {"--requests", [&](const std::string &v) { return parse_u64(v, o.trace_options.max_requests); }},
      {"--tenants", [&](const std::string &v) { return parse_u32(v, o.generator.tenants) && o.generator.tenants > 0; }},
      {"--salted-tenants", [&](const std::string &v) { return parse_u32(v, o.generator.salted_tenants); }},
      {"--chats", [&](const std::string &v) { return parse_u32(v, o.generator.chats_per_tenant) && o.generator.chats_per_tenant > 0; }},
      {"--turns", [&](const std::string &v) { return parse_u32(v, o.generator.turns_per_chat) && o.generator.turns_per_chat > 0; }},
      {"--preamble-tokens", [&](const std::string &v) { return parse_u32(v, o.generator.preamble_tokens); }},
      {"--system-tokens", [&](const std::string &v) { return parse_u32(v, o.generator.system_tokens); }},
      {"--question-tokens", [&](const std::string &v) { return parse_u32(v, o.generator.question_tokens) && o.generator.question_tokens > 0; }},
      {"--answer-tokens", [&](const std::string &v) { return parse_u32(v, o.generator.answer_tokens) && o.generator.answer_tokens > 0; }},
      {"--rate", [&](const std::string &v) { return parse_double(v, o.generator.chats_per_second) && o.generator.chats_per_second > 0; }},
      {"--think", [&](const std::string &v) { return parse_double(v, o.generator.think_seconds) && o.generator.think_seconds >= 0; }},
      {"--seed", [&](const std::string &v) { return parse_u64(v, o.generator.seed); }},
      {"--model", [&](const std::string &v) {
         const ModelPreset *p = find_preset(v);
         if (p) o.config.model = *p;
         return p != nullptr; }},
      {"--device", [&](const std::string &v) {
         o.config.device = v;
         uint32_t n = 0;
         return v == "cpu" || (v.rfind("cuda:", 0) == 0 && parse_u32(v.substr(5), n)); }},
      {"--memory", [&](const std::string &v) {
         o.config.unlimited = v == "unlimited";
         return o.config.unlimited || (parse_bytes(v, o.config.memory_bytes) && o.config.memory_bytes > 0); }},
      {"--tokens-per-block", [&](const std::string &v) { return parse_u32(v, o.config.tokens_per_block); }},
      {"--reuse", [&](const std::string &v) { return parse_on_off(v, reuse); }},
      {"--partial-reuse", [&](const std::string &v) { return parse_on_off(v, o.config.partial_reuse); }},
      {"--prompt-priority", [&](const std::string &v) {
         return parse_u32(v, prompt_priority) && prompt_priority >= 1 && prompt_priority <= 100; }},
      {"--system-priority", [&](const std::string &v) {
         return parse_u32(v, system_priority) && system_priority >= 1 && system_priority <= 100; }},
      {"--host-cache", [&](const std::string &v) { return parse_bytes(v, o.config.host_cache_bytes); }},
      {"--disk-cache", [&](const std::string &v) {
         const size_t colon = v.rfind(':');
         if (colon == std::string::npos || colon == 0) return false;
         o.config.disk_cache_dir = v.substr(0, colon);
         return parse_bytes(v.substr(colon + 1), o.config.disk_cache_bytes) &&
                o.config.disk_cache_bytes > 0; }},
      {"--remote-cache", [&](const std::string &v) { o.config.remote_cache_url = v; return !v.empty(); }},
      {"--remote-cache-bytes", [&](const std::string &v) {
         return parse_bytes(v, o.config.remote_cache_bytes) && o.config.remote_cache_bytes > 0; }},
      {"--instances", [&](const std::string &v) {
         return parse_u32(v, o.instances) && o.instances >= 1 && o.instances <= 64; }},
      {"--max-batch-tokens", [&](const std::string &v) { return parse_u32(v, o.config.max_batch_tokens) && o.config.max_batch_tokens > 0; }},
      {"--max-running", [&](const std::string &v) { return parse_u32(v, o.config.max_running) && o.config.max_running > 0; }},
      {"--max-prefills", [&](const std::string &v) { return parse_u32(v, o.config.max_prefills); }},
      {"--chunked-prefill", [&](const std::string &v) { return parse_on_off(v, o.config.chunked_prefill); }},
      {"--max-output", [&](const std::string &v) { return parse_u32(v, o.config.max_output); }},
      {"--plot", [&](const std::string &v) { o.plot = v; return !v.empty(); }},
      {"--publish-every", [&](const std::string &v) { return parse_u32(v, o.config.publish_every); }},
      {"--state-snapshots", [&](const std::string &v) { return parse_u32(v, o.config.state_snapshots); }},
  };
  const std::map<std::string, std::function<void()>> flags = {
      {"--compare", [&] { o.compare = true; }},
      {"--remote-private", [&] { o.remote_private = true; }},
      {"--json", [&] { o.json = true; }},
      {"--attention", [&] { o.config.attention = true; }},
      {"--no-progress", [&] { o.config.progress = false; }},
      {"--no-room-ahead", [&] { o.config.room_ahead = false; }},
      {"--profile", [&] { o.config.profile = true; }},
      {"--help", [&] { o.help = true; }},
      {"-h", [&] { o.help = true; }},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool has_value = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (auto f = flags.find(arg); f != flags.end() && !has_value) {
      f->second();
      continue;
    }
    auto h = with_value.find(arg);
    if (h == with_value.end()) {
      error = "unknown option " + arg + " (see --help)";
      return false;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        error = arg + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (!h->second(value)) {
      error = "invalid value for " + arg + ": '" + value + "'";
      return false;
    }
  }
  if (o.compare && !o.config.disk_cache_dir.empty()) {
    error = "--disk-cache applies to a single run: --compare's runs would share the directory "
            "(and reuse off has no disk tier)";
    return false;
  }
  if (o.compare && (!o.config.remote_cache_url.empty() || o.instances > 1)) {
    error = "--remote-cache and --instances apply to a single policy: --compare's runs would "
            "share the server (and reuse off has no remote tier)";
    return false;
  }
  if (o.remote_private && (o.config.remote_cache_url.empty() || o.instances < 2)) {
    error = "--remote-private needs --remote-cache and --instances 2 or more";
    return false;
  }
  if (!reuse && !o.config.remote_cache_url.empty()) {
    error = "--remote-cache needs --reuse on: the remote tier keeps reusable blocks";
    return false;
  }
  if (o.instances > 1 && !o.config.disk_cache_dir.empty()) {
    error = "--disk-cache is one directory per cache: not with --instances";
    return false;
  }
  if (!reuse && !o.config.disk_cache_dir.empty()) {
    error = "--disk-cache needs --reuse on: the disk tier keeps reusable blocks";
    return false;
  }
  if (o.compare && prompt_priority) {
    error = "--prompt-priority applies to a single run; --compare retains system prompts "
            "(set their priority with --system-priority)";
    return false;
  }
  if ((o.config.publish_every || o.config.state_snapshots) && o.config.model.mamba_layers == 0) {
    error = "--publish-every and --state-snapshots apply to a hybrid model (--model "
            "nemotron-h-8b); " + o.config.model.name + " has no state";
    return false;
  }
  o.config.policy = {"", reuse, prompt_priority, system_priority};
  o.config.policy.name = policy_name(o.config.policy);
  if (o.compare && !system_priority) o.config.policy.system_priority = 90;
  return true;
}

}  // namespace sim

#include "generator.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace sim {
namespace {

// A portable random stream (std:: distributions differ between standard
// libraries, and the workload must be the same everywhere).
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64(state_++); }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  double exponential(double mean) { return -mean * std::log(1.0 - uniform()); }
  uint32_t around(uint32_t mean) {  // uniform in [0.5, 1.5] x mean, at least 1
    double v = static_cast<double>(mean) * (0.5 + uniform());
    return std::max<uint32_t>(1, static_cast<uint32_t>(v));
  }

 private:
  uint64_t state_;
};

}  // namespace

Workload generate_workload(const GeneratorOptions &o) {
  Workload w;
  w.name = "synthetic: " + std::to_string(o.tenants) + " tenants (" +
           std::to_string(std::min(o.salted_tenants, o.tenants)) + " salted) x " +
           std::to_string(o.chats_per_tenant) + " chats x " + std::to_string(o.turns_per_chat) +
           " turns";
  Random rng(o.seed);
  uint64_t text_id = 0;  // every question and answer gets its own text
  const uint32_t chats = o.tenants * o.chats_per_tenant;
  double start = 0;
  for (uint32_t c = 0; c < chats; ++c) {
    // Chats of all tenants interleave: chat c belongs to tenant c % tenants.
    const uint32_t tenant = c % std::max<uint32_t>(1, o.tenants);
    start += rng.exponential(1.0 / o.chats_per_second);
    std::vector<Segment> history;
    if (o.preamble_tokens) history.push_back({make_seed(kSeedSystem, 0), o.preamble_tokens});
    if (o.system_tokens) history.push_back({make_seed(kSeedSystem, 1 + tenant), o.system_tokens});
    const uint32_t system_length = o.preamble_tokens + o.system_tokens;
    double t = start;
    for (uint32_t turn = 0; turn < o.turns_per_chat; ++turn) {
      if (turn) t += rng.exponential(o.think_seconds);
      history.push_back({make_seed(kSeedText, text_id++), rng.around(o.question_tokens)});
      Request r;
      r.arrival_s = t;
      r.prompt = history;
      r.input_length = static_cast<uint32_t>(segments_length(history));
      r.output_length = rng.around(o.answer_tokens);
      r.output_seed = make_seed(kSeedText, text_id++);
      r.system_length = system_length;
      r.tenant = tenant;
      r.has_salt = tenant < o.salted_tenants;
      if (r.has_salt) r.salt = "tenant-" + std::to_string(tenant);
      // The next turn resends the answer exactly as it was decoded.
      history.push_back({r.output_seed, r.output_length});
      w.requests.push_back(std::move(r));
    }
  }
  std::stable_sort(w.requests.begin(), w.requests.end(),
                   [](const Request &a, const Request &b) { return a.arrival_s < b.arrival_s; });
  for (size_t i = 0; i < w.requests.size(); ++i) w.requests[i].id = i;
  return w;
}

}  // namespace sim

// The simulator's workload side, without a cache: the Mooncake trace
// reader (records, speed factor, errors with their line), the hash id ->
// token mapping, and the synthetic multi-tenant generator.
#include <algorithm>
#include <string>

#include "check.h"
#include "generator.h"
#include "tokens.h"
#include "trace_reader.h"

using namespace sim;

static void reads_records() {
  const std::string text =
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [5, 9]}\n"
      "\n"
      "{\"hash_ids\":[5,9,11],\"output_length\":0,\"timestamp\":2500,\"input_length\":1025,"
      "\"note\":\"x\",\"flag\":true}\n";
  TraceOptions o;
  o.speed = 2.0;
  Workload w;
  std::string error;
  SIM_CHECK(parse_trace(text, "t.jsonl", o, w, error));
  SIM_CHECK_EQ(w.requests.size(), size_t{2});
  const Request &a = w.requests[0], &b = w.requests[1];
  SIM_CHECK_EQ(a.input_length, 600u);
  SIM_CHECK_EQ(a.output_length, 7u);
  SIM_CHECK_EQ(a.prompt.size(), size_t{2});
  SIM_CHECK_EQ(a.prompt[0].length, 512u);
  SIM_CHECK_EQ(a.prompt[1].length, 88u);  // the last block is partial
  SIM_CHECK_EQ(a.system_length, 0u);       // a trace names no system prompt
  SIM_CHECK_EQ(b.arrival_s, 1.25);         // 2500 ms at speed 2
  SIM_CHECK_EQ(b.output_length, 1u);       // the prefill always yields a token
  SIM_CHECK_EQ(b.prompt[2].length, 1u);
  // Same hash id, same tokens: b's first 600 tokens are a's prompt.
  std::vector<int32_t> ta, tb;
  append_tokens(a.prompt, ta);
  append_tokens(b.prompt, tb);
  SIM_CHECK(std::equal(ta.begin(), ta.end(), tb.begin()));
  SIM_CHECK(a.output_seed != b.output_seed);

  o.max_requests = 1;
  SIM_CHECK(parse_trace(text, "t.jsonl", o, w, error));
  SIM_CHECK_EQ(w.requests.size(), size_t{1});
}

static void reports_errors() {
  struct Case {
    const char *text, *message;
  } cases[] = {
      {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1]}\n",
       "t.jsonl:1: input_length 600 needs 2 hash ids of 512 tokens, got 1"},
      {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n",
       "t.jsonl:1: a record needs timestamp, input_length, output_length and hash_ids"},
      {"{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n"
       "{\"timestamp\": 4, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n",
       "t.jsonl:2: timestamps must not decrease"},
      {"{\"timestamp\": 0, \"input_length\": 1.5, \"output_length\": 1, \"hash_ids\": [1]}\n",
       "t.jsonl:1: input_length must be a whole number >= 1"},
      {"{\"timestamp\": 0 \"input_length\": 1}\n", "t.jsonl:1: expected ',' or '}' at column 17"},
      {"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [-1]}\n",
       "t.jsonl:1: hash id must be an integer in [0, 2^56) at column 70"},
      {"", "t.jsonl: no records"},
  };
  for (const Case &c : cases) {
    Workload w;
    std::string error;
    SIM_CHECK(!parse_trace(c.text, "t.jsonl", TraceOptions{}, w, error));
    SIM_CHECK_EQ(error, std::string(c.message));
  }
}

static void tokens_are_deterministic() {
  SIM_CHECK_EQ(token_id(make_seed(kSeedTraceBlock, 3), 7), token_id(make_seed(kSeedTraceBlock, 3), 7));
  // Different namespaces never name the same stream.
  SIM_CHECK(make_seed(kSeedTraceBlock, 3) != make_seed(kSeedOutput, 3));
  int same = 0;
  for (uint32_t i = 0; i < 512; ++i)
    same += token_id(make_seed(kSeedTraceBlock, 3), i) == token_id(make_seed(kSeedTraceBlock, 4), i);
  SIM_CHECK(same < 3);
  for (uint32_t i = 0; i < 1000; ++i) {
    int32_t t = token_id(make_seed(kSeedText, i), i);
    SIM_CHECK(t >= 0 && static_cast<uint32_t>(t) < kVocab);
  }
}

static void generator_shapes_chats() {
  GeneratorOptions o;
  o.tenants = 3;
  o.salted_tenants = 1;
  o.chats_per_tenant = 4;
  o.turns_per_chat = 3;
  const Workload w = generate_workload(o);
  const Workload again = generate_workload(o);
  SIM_CHECK_EQ(w.requests.size(), size_t{36});
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const Request &r = w.requests[i], &s = again.requests[i];
    SIM_CHECK_EQ(r.id, uint64_t{i});
    SIM_CHECK_EQ(r.arrival_s, s.arrival_s);  // same seed, same workload
    SIM_CHECK_EQ(r.input_length, s.input_length);
    if (i) SIM_CHECK(w.requests[i - 1].arrival_s <= r.arrival_s);
    SIM_CHECK_EQ(r.system_length, o.preamble_tokens + o.system_tokens);
    SIM_CHECK_EQ(r.has_salt, r.tenant < 1);
    // Every prompt starts with the shared preamble, then the tenant's prompt.
    SIM_CHECK_EQ(r.prompt[0].seed, make_seed(kSeedSystem, 0));
    SIM_CHECK_EQ(r.prompt[1].seed, make_seed(kSeedSystem, 1 + r.tenant));
  }
  // A later turn resends the earlier turn's prompt and its decoded answer.
  size_t resent = 0;
  for (const Request &later : w.requests)
    for (const Request &earlier : w.requests) {
      if (later.prompt.size() != earlier.prompt.size() + 2) continue;
      if (!std::equal(earlier.prompt.begin(), earlier.prompt.end(), later.prompt.begin(),
                      [](const Segment &x, const Segment &y) {
                        return x.seed == y.seed && x.length == y.length;
                      }))
        continue;
      const Segment &answer = later.prompt[earlier.prompt.size()];
      SIM_CHECK_EQ(answer.seed, earlier.output_seed);
      SIM_CHECK_EQ(answer.length, earlier.output_length);
      SIM_CHECK(later.arrival_s > earlier.arrival_s);
      ++resent;
    }
  SIM_CHECK_EQ(resent, size_t{3 * 4 * 2});  // turns 2 and 3 of every chat
}

int main() {
  reads_records();
  reports_errors();
  tokens_are_deterministic();
  generator_shapes_chats();
  std::puts("simulator workload: all checks passed");
  return 0;
}

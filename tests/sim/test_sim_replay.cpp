// The simulator's hit rate against independent replays of the same trace,
// computed here from the trace's hash ids alone (no tokens, no kvcache):
//
//   lru FILE TOKENS_PER_BLOCK CAPACITY_BLOCKS MAX_REQUESTS MAX_OUTPUT
//     One request at a time, so the order of every add, allocation and
//     release is known. The replay keeps a prefix tree of blocks
//     with a capacity and evicts the least recently released leaf, releasing
//     a finished request's blocks deepest first. The simulator's reused
//     tokens, reused blocks and evictions must equal the replay's.
//   unlimited FILE TOKENS_PER_BLOCK MAX_REQUESTS
// (0: no limit; MAX_OUTPUT caps each request's decoded tokens).
//     A pool sized never to evict: each request reuses the longest chain of
//     full blocks that an earlier request's prompt computed (up to the
//     second-to-last prompt token, which kvcache always recomputes).
//
// Block b of T tokens (T divides 512) lies inside the trace's 512-token
// block b * T / 512, so its content is named by (that block's hash id,
// b % (512 / T)), and two blocks are equal exactly when their chains of
// names from the start are equal.
#include <cinttypes>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "check.h"
#include "scheduler.h"
#include "trace_reader.h"

using namespace sim;

namespace {

// Tokens per block (a divisor of 512), from the command line.
uint32_t kT = 16;
uint32_t kPerTraceBlock = kTraceBlockTokens / kT;
constexpr uint64_t kDecoded = uint64_t{1} << 63; // names of blocks holding decoded tokens

struct Record {
  uint32_t input = 0, output = 0;
  std::vector<uint64_t> hash_ids;
};

// Reads the records without the simulator's reader (only what the replay
// needs: three numbers and one array per line).
std::vector<Record> read_records(const std::string &path, uint64_t limit) {
  std::FILE *f = std::fopen(path.c_str(), "r");
  if (!f) {
    std::printf("SKIP: trace %s not found: it is not in the repository; traces/README.md says "
                "where Mooncake's traces come from and where to put them\n",
                path.c_str());
    std::exit(77);
  }
  std::vector<Record> out;
  std::string line;
  for (int c; (c = std::fgetc(f)) != EOF;) {
    if (c != '\n') {
      line.push_back(static_cast<char>(c));
      continue;
    }
    if (limit && out.size() >= limit) break;
    Record r;
    auto number_after = [&](const char *key) {
      size_t p = line.find(key);
      SIM_CHECK(p != std::string::npos);
      return std::strtoull(line.c_str() + p + std::string(key).size(), nullptr, 10);
    };
    r.input = static_cast<uint32_t>(number_after("\"input_length\":"));
    r.output = static_cast<uint32_t>(number_after("\"output_length\":"));
    if (r.output == 0) r.output = 1;  // the prefill always produces one token
    size_t p = line.find('[', line.find("\"hash_ids\""));
    for (const char *s = line.c_str() + p + 1; *s && *s != ']';) {
      char *end = nullptr;
      r.hash_ids.push_back(std::strtoull(s, &end, 10));
      s = end;
      while (*s == ',' || *s == ' ') ++s;
    }
    out.push_back(std::move(r));
    line.clear();
  }
  std::fclose(f);
  return out;
}

// Name of block b of request i: (trace hash id, position inside it) for a
// full prompt block; a name of its own for a block holding decoded tokens.
std::pair<uint64_t, uint64_t> block_name(const Record &r, uint64_t i, uint64_t b) {
  if ((b + 1) * kT <= r.input) return {r.hash_ids[b / kPerTraceBlock], b % kPerTraceBlock};
  return {kDecoded | i, b};
}

// A prefix tree of blocks with a capacity and least-recently-released-leaf
// eviction, driven one request at a time.
class LruReplay {
 public:
  explicit LruReplay(uint64_t capacity) : capacity_(capacity) {}
  uint64_t reused_tokens = 0, reused_blocks = 0, evicted = 0;

  void run(const Record &r, uint64_t i) {
    const uint64_t L = r.input, final_len = L + r.output - 1;  // the last token is never fed
    std::vector<int64_t> chain;  // tree node per published block position
    // Add: reuse the cached chain up to the second-to-last prompt token,
    // then allocate the rest of the prompt (evicting if needed).
    for (uint64_t b = 0; (b + 1) * kT <= L - 1; ++b) {
      auto it = index_.find(key(chain.empty() ? -1 : chain.back(), r, i, b));
      if (it == index_.end()) break;
      hold(it->second);
      chain.push_back(it->second);
    }
    reused_blocks += chain.size();
    reused_tokens += chain.size() * kT;
    allocate((L + kT - 1) / kT - chain.size());
    // Commit the prompt's full blocks, then decode one token per step
    // (a new block when the length reaches a block boundary).
    for (uint64_t b = chain.size(); (b + 1) * kT <= L; ++b) publish(chain, r, i, b);
    for (uint64_t len = L; len < final_len; ++len) {
      if (len % kT == 0) allocate(1);
      if ((len + 1) % kT == 0) publish(chain, r, i, len / kT);
    }
    // Remove: tree blocks become cached, deepest first; the rest is freed.
    for (uint64_t b = chain.size(); b > 0; --b) release(chain[b - 1]);
    outside_ = 0;
  }

 private:
  using Key = std::tuple<int64_t, uint64_t, uint64_t>;  // (parent node, name)
  struct Node {
    Key key;
    uint32_t children = 0;
    bool held = true;
    uint64_t age = 0;
  };
  Key key(int64_t parent, const Record &r, uint64_t i, uint64_t b) const {
    auto n = block_name(r, i, b);
    return {parent, n.first, n.second};
  }
  void publish(std::vector<int64_t> &chain, const Record &r, uint64_t i, uint64_t b) {
    const int64_t parent = chain.empty() ? -1 : chain.back();
    const Key k = key(parent, r, i, b);
    auto it = index_.find(k);
    if (it != index_.end()) {  // already cached: keep our copy, hold theirs
      hold(it->second);
      chain.push_back(it->second);
      return;
    }
    const int64_t n = static_cast<int64_t>(nodes_.size());
    nodes_.push_back({k, 0, true, 0});
    if (parent >= 0) ++nodes_[parent].children;
    index_[k] = n;
    chain.push_back(n);
    --outside_;  // our block is now the tree's
    ++live_;
  }
  void hold(int64_t n) {
    if (!nodes_[n].held) evictable_.erase({nodes_[n].age, n});
    nodes_[n].held = true;
  }
  void release(int64_t n) {
    nodes_[n].held = false;
    nodes_[n].age = ++clock_;
    if (nodes_[n].children == 0) evictable_.insert({nodes_[n].age, n});
  }
  void allocate(uint64_t count) {
    outside_ += count;
    while (live_ + outside_ > capacity_) {
      SIM_CHECK(!evictable_.empty());
      const int64_t victim = evictable_.begin()->second;
      evictable_.erase(evictable_.begin());
      index_.erase(nodes_[victim].key);
      nodes_[victim].held = true;  // gone: never found or evicted again
      --live_;
      ++evicted;
      const int64_t up = std::get<0>(nodes_[victim].key);
      if (up >= 0 && --nodes_[up].children == 0 && !nodes_[up].held)
        evictable_.insert({nodes_[up].age, up});
    }
  }

  uint64_t capacity_;
  uint64_t clock_ = 0, live_ = 0, outside_ = 0;  // tree blocks, blocks held outside it
  std::vector<Node> nodes_;
  std::map<Key, int64_t> index_;
  std::set<std::pair<uint64_t, int64_t>> evictable_;  // cached leaves by age
};

// With unlimited memory: the longest chain of earlier full prompt blocks.
uint64_t unlimited_reused_tokens(const std::vector<Record> &records) {
  std::map<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>, uint64_t> ids;  // (parent, name)
  uint64_t next_id = 1, total = 0;
  for (uint64_t i = 0; i < records.size(); ++i) {
    const Record &r = records[i];
    uint64_t parent = 0, b = 0;
    for (; (b + 1) * kT <= r.input - 1; ++b) {
      auto it = ids.find({parent, block_name(r, i, b)});
      if (it == ids.end()) break;
      parent = it->second;
    }
    total += b * kT;
    for (; (b + 1) * kT <= r.input; ++b) {
      auto k = std::make_pair(parent, block_name(r, i, b));
      auto it = ids.find(k);
      parent = it != ids.end() ? it->second : (ids[k] = next_id++);
    }
  }
  return total;
}

}  // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool lru = mode == "lru";
  if (!(lru && argc == 7) && !(mode == "unlimited" && argc == 5)) {
    std::fprintf(stderr,
                 "usage: %s lru TRACE TOKENS_PER_BLOCK CAPACITY_BLOCKS MAX_REQUESTS MAX_OUTPUT\n"
                 "       %s unlimited TRACE TOKENS_PER_BLOCK MAX_REQUESTS\n",
                 argv[0], argv[0]);
    return 2;
  }
  const std::string path = argv[2];
  kT = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
  SIM_CHECK(kT >= 2 && kTraceBlockTokens % kT == 0);
  kPerTraceBlock = kTraceBlockTokens / kT;
  const uint64_t capacity = lru ? std::strtoull(argv[4], nullptr, 10) : 0;
  const uint64_t max_requests = std::strtoull(argv[lru ? 5 : 4], nullptr, 10);
  const uint32_t max_output = lru ? static_cast<uint32_t>(std::strtoul(argv[6], nullptr, 10)) : 1;
  if (!lru) {
    kT = 64;
    kPerTraceBlock = kTraceBlockTokens / kT;
  }
  std::vector<Record> records = read_records(path, max_requests);
  for (Record &r : records)
    if (max_output) r.output = std::min(r.output, max_output);

  TraceOptions to;
  to.max_requests = max_requests;
  Workload w;
  std::string error;
  if (!read_trace(path, to, w, error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  SIM_CHECK_EQ(w.requests.size(), records.size());

  SimConfig c;
  c.model = *find_preset("tiny");
  c.tokens_per_block = kT;
  c.partial_reuse = false;
  c.policy = {"LRU", true, 0};
  c.max_output = max_output;      // unlimited: outputs do not change prompt reuse
  if (lru) {
    c.memory_bytes = capacity * kT * 4;  // tiny: 4 bytes per token
    c.max_running = 1;                   // one request at a time: the replay's order
    c.room_ahead = false;  // the replay evicts when an allocation needs the room
  } else {
    c.unlimited = true;
    c.max_prefills = 1;  // a prompt is committed before the next one is added
  }
  // Both scheduler modes: a prompt longer than a step added with its first
  // chunk and extended chunk by chunk (the default), or run whole. Chunks
  // allocate, and so evict, in pieces; the replay allocates whole prompts:
  // the evicted leaves are the same, so the figures must be too.
  for (const bool chunked : {true, false}) {
    if (!lru && !chunked) break;
    c.chunked_prefill = chunked;
    const RunResult r = simulate(w, c);
    std::printf("chunked prefill %s: %" PRIu64 " later chunks\n", chunked ? "on" : "off",
                r.prefill_chunks);
    if (!chunked) SIM_CHECK_EQ(r.prefill_chunks, uint64_t{0});
    const bool long_prompt = std::any_of(records.begin(), records.end(), [&](const Record &x) {
      return x.input > c.max_batch_tokens;
    });
    if (chunked && long_prompt) SIM_CHECK(r.prefill_chunks > 0);
    std::printf("%s: %zu requests, %" PRIu64 " prompt tokens, capacity %" PRIu64 " blocks\n",
                path.c_str(), records.size(), r.prompt_tokens, r.capacity_blocks);
    SIM_CHECK_EQ(r.completed, uint64_t{records.size()});
    SIM_CHECK_EQ(r.preemptions, uint64_t{0});

    if (lru) {
      SIM_CHECK_EQ(r.capacity_blocks, capacity);
      LruReplay replay(capacity);
      for (uint64_t i = 0; i < records.size(); ++i) replay.run(records[i], i);
      std::printf("reused tokens: simulator %" PRIu64 ", replay %" PRIu64 " (hit rate %.4f)\n",
                  r.reused_tokens, replay.reused_tokens, r.hit_rate());
      std::printf("reused blocks: simulator %" PRIu64 ", replay %" PRIu64 "\n", r.counters.reused,
                  replay.reused_blocks);
      std::printf("evicted blocks: simulator %" PRIu64 ", replay %" PRIu64 "\n",
                  r.counters.evicted, replay.evicted);
      const uint64_t unlimited = unlimited_reused_tokens(records);
      std::printf("reused tokens with unlimited memory: %" PRIu64 "\n", unlimited);
      SIM_CHECK(replay.evicted > 0);  // the capacity is small enough to matter
      SIM_CHECK(replay.reused_tokens <= unlimited);
      SIM_CHECK_EQ(r.reused_tokens, replay.reused_tokens);
      SIM_CHECK_EQ(r.counters.reused, replay.reused_blocks);
      SIM_CHECK_EQ(r.counters.evicted, replay.evicted);
    } else {
      const uint64_t expected = unlimited_reused_tokens(records);
      std::printf("reused tokens: simulator %" PRIu64 " (%.4f), exact prefix replay %" PRIu64
                  " (%.4f)\n",
                  r.reused_tokens, r.hit_rate(), expected,
                  static_cast<double>(expected) / static_cast<double>(r.prompt_tokens));
      SIM_CHECK_EQ(r.counters.evicted, uint64_t{0});
      SIM_CHECK_EQ(r.reused_tokens, expected);
    }
  }
  std::puts("OK");
  return 0;
}

#include "scheduler.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <stdexcept>

#include "step_clock.h"
#include "timeline.h"

namespace sim {
namespace {

using Clock = std::chrono::steady_clock;

struct Waiting {
  const Request *request;
  uint32_t generated;    // tokens decoded before a preemption (0: none)
  uint64_t ran_to = 0;   // its length when preempted (0: never ran): counted once
};

struct Running {
  const Request *request;
  uint32_t generated = 0;   // tokens decoded so far (the prefill makes the first)
  uint64_t length = 0;      // tokens in the cache's sequence
  uint64_t computed = 0;    // tokens computed in this step
  uint64_t committed = 0;   // tokens passed to the last commit
  uint64_t published = 0;   // hybrid: state published up to here (or reused)
  uint64_t prompt_end = 0;  // tokens its prefill computes (prompt + outputs to recompute);
                            // length < prompt_end: a chunked prefill is under way
  uint64_t recompute_end = 0;  // tokens below it were computed before a preemption
  uint32_t output_length = 0;
  bool prefilling() const { return length < prompt_end; }
};

int32_t output_token(const Request &r, uint32_t i) { return token_id(r.output_seed, i); }

// Of the tokens [begin, end) computed now, those computed before a
// preemption: below `end_before`.
uint64_t recomputed(uint64_t begin, uint64_t end, uint64_t end_before) {
  const uint64_t e = std::min(end, end_before);
  return e > begin ? e - begin : 0;
}

// What the prefill of `r` computes: its prompt, then the `generated` output
// tokens a preemption dropped.
void prefill_tokens(const Request &r, uint32_t generated, std::vector<int32_t> &out) {
  out.clear();
  append_tokens(r.prompt, out);
  for (uint32_t i = 0; i < generated; ++i) out.push_back(output_token(r, i));
}

}  // namespace

// What one run keeps between its steps.
struct Scheduler::State {
  Clock::time_point wall0 = Clock::now();
  RunResult r;
  Timeline timeline;
  std::deque<Waiting> waiting;
  std::vector<Running> running;  // admission order: the newest is last
  std::vector<uint64_t> ids;
  std::vector<SlotRow> slots;
  std::vector<TableRows> tables;
  std::vector<int32_t> seq_lens, q_lens;
  std::vector<int32_t> tokens;
  std::vector<int32_t> first_chunk;  // the tokens a chunked prefill is added with
  StepClock clock;
  StepClock room_clock{false};  // kvc_cache_make_room, while the device runs
  size_t next = 0;
  double now = 0;
  uint64_t finished = 0;

  State(double horizon_s, uint32_t samples, bool profile)
      : timeline(horizon_s, samples), clock(profile) {}
};

Scheduler::Scheduler(const Workload &workload, const SimConfig &config, CacheAdapter &cache,
                     KvWriter &writer, Progress &progress)
    : workload_(workload), config_(config), cache_(cache), writer_(writer),
      progress_(progress) {
  const std::vector<Request> &requests = workload_.requests;
  const double last_arrival = requests.empty() ? 0 : requests.back().arrival_s;
  s_ = std::make_unique<State>(last_arrival * 1.1 + 1.0, config_.samples, config_.profile);
  RunResult &r = s_->r;
  r.policy = config_.policy.name;
  r.config = config_;
  r.workload = workload_.name;
  r.requests = requests.size();
  r.block_bytes_per_token = cache_.bytes_per_token();
  r.primary_bytes = cache_.primary_bytes();
}

Scheduler::~Scheduler() = default;

bool Scheduler::done() const { return s_->finished >= workload_.requests.size(); }

double Scheduler::now() const {
  // Idle until the next arrival: that is when its next step happens.
  if (s_->running.empty() && s_->waiting.empty() && s_->next < workload_.requests.size())
    return std::max(s_->now, workload_.requests[s_->next].arrival_s);
  return s_->now;
}

RunResult Scheduler::run() {
  while (!done()) step();
  return finish();
}

void Scheduler::step() {
  State &st = *s_;
  const std::vector<Request> &requests = workload_.requests;
  RunResult &r = st.r;
  std::deque<Waiting> &waiting = st.waiting;
  std::vector<Running> &running = st.running;
  std::vector<uint64_t> &ids = st.ids;
  std::vector<int32_t> &tokens = st.tokens;
  StepClock &clock = st.clock;
  Timeline &timeline = st.timeline;
  size_t &next = st.next;
  double &now = st.now;
  uint64_t &finished = st.finished;

  auto options_for = [&](const Request &q) {
    SequenceOptions o;
    o.salt = q.has_salt ? &q.salt : nullptr;
    o.prompt_priority = config_.policy.prompt_priority;
    o.system_priority = config_.policy.system_priority;
    o.system_length = q.system_length;
    return o;
  };
  auto output_length = [&](const Request &q) {
    return config_.max_output ? std::min(q.output_length, config_.max_output) : q.output_length;
  };
  // Removes running[i]: its computed blocks stay cached; it waits again at
  // the head of the queue and will be recomputed.
  auto preempt = [&](size_t i) {
    Running &s = running[i];
    clock.start();
    if (s.committed < s.length)  // commits are lazy (step 5)
      clock.call(CallKind::kCommit, [&] { cache_.commit(s.request->id, s.length); });
    clock.call(CallKind::kRemove, [&] { cache_.remove(running[i].request->id); });
    clock.stop();
    waiting.push_front({running[i].request, running[i].generated, running[i].length});
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    ++r.preemptions;
  };

  while (next < requests.size() && requests[next].arrival_s <= now)
    waiting.push_back({&requests[next++], 0});
  if (running.empty() && waiting.empty()) {
    now = requests[next].arrival_s;
    return;
  }
  // Segments of the step clock hold only cache calls: the scheduler's own
  // work (tokens, queues) happens between them.

  // 1. Decode: every running sequence whose prefill is done feeds back its
  // last token, in one all-or-nothing call; out of blocks, the newest
  // sequence is preempted. A chunked prefill under way is the newest
  // sequence (admissions after it wait for its last chunk), so the decode
  // rows are running[0, decoding).
  for (;;) {
    ids.clear();
    tokens.clear();
    for (const Running &s : running) {
      if (s.prefilling()) continue;
      ids.push_back(s.request->id);
      tokens.push_back(output_token(*s.request, s.generated - 1));
    }
    if (ids.empty()) break;
    clock.start();
    const bool extended = clock.call(CallKind::kExtend, [&] { return cache_.extend(ids, tokens); });
    clock.stop();
    if (extended) break;
    preempt(running.size() - 1);
  }
  size_t decoding = 0;
  for (Running &s : running) {
    s.computed = 0;
    if (s.prefilling()) continue;
    if (decoding++ != static_cast<size_t>(&s - running.data()))
      throw std::logic_error("simulator: a decode row after a chunked prefill");
    s.length += 1;
    s.computed = 1;
  }

  // 2. The next chunk of a chunked prefill under way (it counts as one of
  // the step's prefills), then new requests, first come first served.
  uint64_t budget = config_.max_batch_tokens > decoding ? config_.max_batch_tokens - decoding : 0;
  uint32_t prefills = 0;
  if (!running.empty() && running.back().prefilling()) {
    Running &s = running.back();
    // At least one token, so that the prefill moves on under any load.
    const uint64_t chunk = std::max<uint64_t>(1, std::min(budget, s.prompt_end - s.length));
    prefill_tokens(*s.request, s.generated, tokens);
    clock.start();
    const bool extended = clock.call(CallKind::kExtend, [&] {
      return cache_.extend_chunk(s.request->id, tokens.data() + s.length, chunk);
    });
    clock.stop();
    if (extended) {
      s.length += chunk;
      s.computed = chunk;
      r.recomputed_tokens += recomputed(s.length - chunk, s.length, s.recompute_end);
      ++r.prefill_chunks;
      budget -= std::min(budget, chunk);
      ++prefills;
    } else {
      preempt(running.size() - 1);  // the newest: out of blocks, as a decode step is
    }
  }
  while (!waiting.empty() && running.size() < config_.max_running &&
         (config_.max_prefills == 0 || prefills < config_.max_prefills)) {
    const Waiting w = waiting.front();
    const Request &q = *w.request;
    prefill_tokens(q, w.generated, tokens);
    const SequenceOptions options = options_for(q);
    // A prompt whose uncached part exceeds the budget waits for the next
    // step unless it is the step's first prefill: then, chunked, it is added
    // with its reused prefix and one budget of tokens; not chunked, it runs
    // whole, alone.
    size_t add_tokens = tokens.size();
    if (tokens.size() > budget && (prefills > 0 || config_.chunked_prefill)) {
      if (budget == 0) break;
      clock.start();
      const uint64_t hit =
          clock.call(CallKind::kProbe, [&] { return cache_.probe(q.id, tokens, options); });
      clock.stop();
      if (tokens.size() - hit > budget) {
        if (prefills > 0) break;
        add_tokens = static_cast<size_t>(hit + budget);
      }
    }
    if (add_tokens < tokens.size())
      st.first_chunk.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(add_tokens));
    const std::vector<int32_t> &to_add = add_tokens < tokens.size() ? st.first_chunk : tokens;
    uint64_t cached = 0;
    clock.start();
    const bool added =
        clock.call(CallKind::kAdd, [&] { return cache_.add(q.id, to_add, options, cached); });
    clock.stop();
    if (!added) {
      if (running.empty()) {
        // Larger than the whole cache: it can never run.
        waiting.pop_front();
        ++r.rejected;
        ++finished;
        continue;
      }
      break;  // wait until running sequences free their blocks
    }
    waiting.pop_front();
    Running s;
    s.request = &q;
    s.generated = w.generated;
    s.length = add_tokens;
    s.prompt_end = tokens.size();
    s.recompute_end = w.ran_to;
    s.computed = add_tokens - cached;
    s.published = cached;
    s.output_length = output_length(q);
    // A preempted request was counted when it first came (also one
    // preempted during its chunked prefill, which decoded nothing yet).
    if (w.ran_to == 0) {
      r.prompt_tokens += tokens.size();
      r.reused_tokens += cached;
      timeline.admitted(now, tokens.size(), cached);
    }
    r.recomputed_tokens += recomputed(cached, add_tokens, w.ran_to);
    budget -= std::min(budget, s.computed);
    running.push_back(s);
    ++prefills;
    // A chunked prefill stays the newest sequence until its last chunk
    // (step 1). The budget does not always say so: its add may find more
    // than the probe did (kvc_cache_probe looks at the tree only; the add
    // also loads blocks from a disk or remote tier), leaving budget over.
    if (s.prefilling()) break;
  }
  if (running.empty()) {  // everything waiting was rejected
    clock.end_step();
    return;
  }

  // 3. Slot mappings (and block tables for attention) of this step.
  ids.clear();
  for (const Running &s : running) ids.push_back(s.request->id);
  const bool attend = config_.attention;
  uint32_t stride = 0;
  clock.start();
  clock.call(CallKind::kTables, [&] {
    cache_.batch(ids, st.slots, attend ? &st.tables : nullptr, &stride,
                 attend ? &st.seq_lens : nullptr);
  });
  clock.stop();

  // 4. The forward pass writes the KV of the computed tokens.
  // While it runs, the room the next step may take is made (room_ahead):
  // its budget in blocks and a block per running sequence.
  if (config_.room_ahead) {
    st.room_clock.start();
    cache_.make_room(config_.max_batch_tokens / config_.tokens_per_block + running.size());
    st.room_clock.stop();
    st.room_clock.end_step();
  }
  const auto k0 = Clock::now();
  writer_.store(st.slots);
  if (attend) {
    // Decode rows first, then each admitted prompt's computed tokens.
    st.q_lens.clear();
    for (size_t i = decoding; i < running.size(); ++i)
      st.q_lens.push_back(static_cast<int32_t>(running[i].computed));
    writer_.attend(st.tables, stride, st.seq_lens, static_cast<uint32_t>(decoding), st.q_lens);
  }
  r.kv_write_s += std::chrono::duration<double>(Clock::now() - k0).count();

  // 5. Publish the computed blocks; every sequence emits one token, and
  // those that emitted their last one leave.
  // A sequence commits when this step filled a block (a prompt, or the
  // decode step that completes a block) and before it leaves, as a serving
  // engine does: the decode steps between publish nothing, so they make no
  // call (the same blocks are published in the same steps as committing
  // every step would).
  const uint64_t T = config_.tokens_per_block;
  clock.start();
  for (Running &s : running) {
    const bool last = !s.prefilling() && s.generated + 1 >= s.output_length;
    if (last || s.length / T > s.committed / T) {
      clock.call(CallKind::kCommit, [&] { cache_.commit(s.request->id, s.length); });
      s.committed = s.length;
      // Hybrid: the state at every publish_every-th block boundary this
      // step computed (the chunk ends of a chunked prefill, the decode step
      // that ends such a block).
      const uint64_t every = uint64_t(config_.publish_every) * T;
      if (every > 0)
        for (uint64_t p = (s.published / every + 1) * every; p <= s.length; p += every) {
          clock.call(CallKind::kPublish, [&] { return cache_.publish(s.request->id, p); });
          s.published = p;
        }
    }
    if (last) clock.call(CallKind::kRemove, [&] { cache_.remove(s.request->id); });
  }
  clock.stop();
  clock.end_step();
  uint64_t computed = 0, attended = 0;
  for (size_t i = 0; i < running.size();) {
    Running &s = running[i];
    computed += s.computed;
    attended += s.length;
    s.computed = 0;
    if (s.prefilling()) {  // no output token until its last chunk
      ++i;
      continue;
    }
    ++s.generated;
    if (s.generated >= s.output_length) {
      r.decoded_tokens += s.generated;
      ++r.completed;
      ++finished;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }

  const CacheCounters c = cache_.counters();
  r.peak_in_use = std::max(r.peak_in_use, c.in_use);
  const double cap = c.capacity ? static_cast<double>(c.capacity) : 1.0;
  timeline.occupancy(now, static_cast<double>(c.in_use) / cap, static_cast<double>(c.cached) / cap);
  now += step_seconds(config_.model, computed, attended, cache_.bytes_per_token());
  ++r.steps;
  // A Redis write takes about 0.1 ms, a simulated step tens of ms: the
  // writes of a step land before the next one (also another instance's),
  // whatever the speed of the machine running the simulation.
  if (!config_.remote_cache_url.empty()) cache_.flush_tiers();
  progress_.update(finished, requests.size(), now, r.hit_rate());
}

RunResult Scheduler::finish() {
  State &st = *s_;
  RunResult &r = st.r;
  writer_.finish();
  progress_.finish();
  // The stores write on their own thread: the report counts what they wrote,
  // not what they happened to finish by now.
  if (!config_.disk_cache_dir.empty() || !config_.remote_cache_url.empty()) cache_.flush_tiers();
  r.counters = cache_.counters();
  r.capacity_blocks = r.counters.capacity;
  r.stored_tokens = writer_.stored_tokens();
  r.attention_calls = writer_.attention_calls();
  r.prefill_calls = writer_.prefill_calls();
  r.attended_queries = writer_.attended_queries();
  r.room_ahead_wall = st.room_clock.wall();
  r.room_ahead_cpu = st.room_clock.cpu();
  r.bookkeeping_wall = st.clock.wall();
  r.bookkeeping_cpu = st.clock.cpu();
  r.cpu_reading_us = st.clock.cpu_reading_cost_us();
  r.profile = st.clock.profile();
  r.simulated_s = st.now;
  r.timeline = st.timeline.samples();
  r.wall_s = std::chrono::duration<double>(Clock::now() - st.wall0).count();
  return r;
}

std::vector<RunResult> simulate_instances(const Workload &workload, const SimConfig &config,
                                          uint32_t instances, bool private_namespaces) {
  struct Engine {
    Workload workload;
    SimConfig config;
    std::unique_ptr<CacheAdapter> cache;
    std::unique_ptr<KvWriter> writer;
    std::unique_ptr<Progress> progress;
    std::unique_ptr<Scheduler> scheduler;
  };
  std::vector<Engine> engines(instances);
  for (uint32_t k = 0; k < instances; ++k) {
    engines[k].workload.name = workload.name + " (instance " + std::to_string(k) + ")";
    engines[k].config = config;
    engines[k].config.policy.name = "instance " + std::to_string(k);
    engines[k].config.progress = false;
    if (private_namespaces)
      engines[k].config.remote_namespace = config.remote_namespace + "-" + std::to_string(k);
  }
  for (size_t i = 0; i < workload.requests.size(); ++i)
    engines[i % instances].workload.requests.push_back(workload.requests[i]);
  for (Engine &e : engines) {
    uint64_t all_tokens = 0;
    for (const Request &q : e.workload.requests) {
      const uint32_t out = config.max_output ? std::min(q.output_length, config.max_output)
                                             : q.output_length;
      all_tokens += q.input_length + out + config.tokens_per_block;
    }
    e.cache = std::make_unique<CacheAdapter>(e.config, all_tokens);
    e.writer = std::make_unique<KvWriter>(e.cache->handle(), e.config);
    e.progress = std::make_unique<Progress>(false, e.config.policy.name);
    e.scheduler = std::make_unique<Scheduler>(e.workload, e.config, *e.cache, *e.writer,
                                              *e.progress);
  }
  for (;;) {
    Engine *earliest = nullptr;
    for (Engine &e : engines) {
      if (!e.scheduler->done() &&
          (earliest == nullptr || e.scheduler->now() < earliest->scheduler->now()))
        earliest = &e;
    }
    if (earliest == nullptr) break;
    earliest->scheduler->step();
  }
  std::vector<RunResult> results;
  for (Engine &e : engines) results.push_back(e.scheduler->finish());
  return results;
}

RunResult simulate(const Workload &workload, const SimConfig &config) {
  uint64_t all_tokens = 0;  // what "unlimited" must hold: every token, never evicted
  for (const Request &q : workload.requests) {
    const uint32_t out = config.max_output ? std::min(q.output_length, config.max_output)
                                           : q.output_length;
    all_tokens += q.input_length + out + config.tokens_per_block;
  }
  CacheAdapter cache(config, all_tokens);
  KvWriter writer(cache.handle(), config);
  Progress progress(config.progress, config.policy.name);
  Scheduler scheduler(workload, config, cache, writer, progress);
  return scheduler.run();
}

}  // namespace sim

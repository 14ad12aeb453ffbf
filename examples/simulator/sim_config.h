// Everything one simulation run is configured with.
#pragma once

#include <cstdint>
#include <string>

#include "presets.h"

namespace sim {

// What --compare varies: whether blocks are reused, and whether the blocks
// of each request's system prompt (a retention range over its first
// system_length tokens) are retained at a higher eviction priority than the
// rest of the prompt and the decoded tokens.
struct Policy {
  std::string name;
  bool reuse = true;
  uint32_t prompt_priority = 0;  // of prompt blocks; 0: the default priority (35)
  uint32_t system_priority = 0;  // of system-prompt blocks; 0: no retention range
};

struct SimConfig {
  ModelPreset model;
  uint32_t tokens_per_block = 16;
  uint64_t memory_bytes = 0;       // primary pool budget; ignored when unlimited
  bool unlimited = false;          // size the pool so that nothing is ever evicted
  bool partial_reuse = true;       // the library's default
  uint64_t host_cache_bytes = 0;   // secondary (host) tier
  std::string disk_cache_dir;      // disk tier (--disk-cache DIR:BYTES); empty: none
  uint64_t disk_cache_bytes = 0;
  std::string remote_cache_url;    // remote tier (--remote-cache URL); empty: none
  uint64_t remote_cache_bytes = uint64_t(1) << 30;  // --remote-cache-bytes
  std::string remote_namespace = "kvcache-sim";     // the Redis key namespace
  std::string device = "cpu";      // "cpu" or "cuda:N"
  bool attention = false;          // read the KV back with decode and prefill attention
  uint32_t max_batch_tokens = 8192;// tokens per step (prefill + decode)
  uint32_t max_running = 256;      // sequences in flight
  uint32_t max_prefills = 0;       // new sequences per step, 0 = no limit
  // A prompt longer than a step's token budget is added with its reused
  // prefix and the first chunk, and extended by one chunk a step (as vLLM
  // and SGLang do by default); off: it runs whole in one step, alone.
  bool chunked_prefill = true;
  // While the device runs a step, the scheduler asks the cache for the
  // room the next step may take (kvc_cache_make_room: the step's token
  // budget in blocks plus one per running sequence), so that the step's
  // adds and extends find their blocks free. That call is timed apart
  // (room ahead/step): it overlaps the forward pass. Off: every eviction
  // falls on the call that needs the room.
  bool room_ahead = true;
  uint32_t max_output = 0;         // cap on decoded tokens per request, 0 = none
  uint32_t samples = 60;           // points of the timeline (plot), at least
  bool progress = false;           // draw a progress bar on stderr
  bool profile = false;            // time every cache call by kind (--profile)
  // Hybrid models (a preset with Mamba layers): publish each sequence's
  // state every `publish_every` blocks of computed tokens (as a chunked
  // prefill whose chunks end there would, and the decode step that ends
  // such a block); 0: never, so no prefix is reused. state_snapshots: the
  // snapshot pool (kvc_config_set_max_state_snapshots; 0 = planned).
  uint32_t publish_every = 0;
  uint32_t state_snapshots = 0;
  Policy policy;
};

}  // namespace sim

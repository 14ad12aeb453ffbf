// KV events in the harness: a router's index fed only by a cache's drained
// events (resynchronized from kvc_cache_snapshot after a LOST), compared
// with the snapshot after every successful change; a failed or read-only
// call must emit nothing.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <kvcache/kvcache.h>

namespace kvc_fuzz {

class EventMirror {
 public:
  // Id of the newest event the cache emitted (a drain of capacity 0).
  static uint64_t last_emitted(kvc_cache_t* cache);
  // Drains everything, in chunks of `chunk` events, applies it and
  // compares the index with the snapshot: a mismatch is a finding.
  void sync(kvc_cache_t* cache, int index, size_t chunk);

 private:
  struct Entry {
    uint64_t parent = 0, groups = 0, lora = 0;
    uint32_t has_lora = 0, tier = 0, priority = 0, num_tokens = 0;
    bool operator!=(const Entry& o) const {
      return parent != o.parent || groups != o.groups || lora != o.lora ||
             has_lora != o.has_lora || tier != o.tier || priority != o.priority ||
             num_tokens != o.num_tokens;
    }
  };
  // (hash, place): place 0 the tree (PRIMARY, HOST), else a store's tier.
  using Key = std::pair<uint64_t, uint32_t>;
  static Key key_of(uint64_t hash, uint32_t tier) {
    return Key{hash, tier >= KVC_TIER_DISK ? tier : 0};
  }
  static Entry entry_of(const kvc_snapshot_entry_t& e);
  void snapshot(kvc_cache_t* cache, std::map<Key, Entry>& out, uint64_t* at);
  void apply(kvc_cache_t* cache, int index, const kvc_event_t& e, const int32_t* tokens);

  std::map<Key, Entry> index_;
  uint64_t last_id_ = 0, skip_until_ = 0;
  std::vector<kvc_event_t> events_;
  std::vector<int32_t> tokens_;
  std::vector<kvc_snapshot_entry_t> snap_;
};

}  // namespace kvc_fuzz

// A router's index fed only by a cache's events (events.h): applies every
// drained event in id order, resynchronizes from a snapshot on LOST, and
// compares itself with kvc's snapshot. Used by the randomized tests: after
// every operation the shadow must equal the snapshot exactly.
// Keyed by (hash, place): place 0 is the tree (tiers PRIMARY and HOST,
// moved by TIER_CHANGED), else the block store's tier (DISK, REMOTE), whose
// entries a block has beside its tree entry (events.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <iterator>
#include <vector>

#include "core/block_manager.h"

namespace kvc {
namespace test {

class EventShadow {
 public:
  struct Entry {
    uint64_t parent = 0, groups = 0, lora = 0;
    uint32_t has_lora = 0, tier = 0, priority = 0, num_tokens = 0;
    bool operator==(const Entry& o) const {
      return std::tie(parent, groups, lora, has_lora, tier, priority, num_tokens) ==
             std::tie(o.parent, o.groups, o.lora, o.has_lora, o.tier, o.priority, o.num_tokens);
    }
  };

  // Drains everything pending (in chunks of `chunk` events) and applies it;
  // returns "" or what went wrong (a gap in ids, an event about a block the
  // index does not hold).
  std::string drain(BlockManager& m, size_t chunk = 7) {
    std::vector<kvc_event_t> ev(chunk);
    std::vector<int32_t> tokens(chunk * m.tokens_per_block());
    for (;;) {
      kvc_event_drain_t r{};
      r.struct_size = sizeof r;
      m.drain_events(ev.data(), ev.size(), tokens.data(), tokens.size(), r);
      for (uint64_t i = 0; i < r.events; ++i) {
        const std::string err = apply(m, ev[i], tokens.data());
        if (!err.empty()) return err;
      }
      if (r.events_pending == 0) return "";
      if (r.events == 0) return "drain made no progress with room for " + std::to_string(chunk);
    }
  }

  // "" when the index equals the snapshot as of the last applied event.
  std::string compare(const BlockManager& m) const {
    std::vector<kvc_snapshot_entry_t> snap;
    uint64_t at = 0;
    m.snapshot(snap, &at);
    if (at != last_id_)
      return "snapshot at event " + std::to_string(at) + ", shadow at " + std::to_string(last_id_);
    std::map<Key, Entry> want;
    for (const kvc_snapshot_entry_t& e : snap) want[key_of(e.hash, e.tier)] = entry_of(e);
    if (want.size() != snap.size()) return "the snapshot lists a hash twice in one place";
    if (want == index_) return "";
    std::ostringstream out;
    out << "shadow holds " << index_.size() << " blocks, the snapshot " << want.size() << ":";
    for (const auto& [k, e] : want) {
      const uint64_t h = k.first;
      auto it = index_.find(k);
      if (it == index_.end())
        out << " missing " << h << " (groups " << e.groups << ", tier " << e.tier << ")";
      else if (!(it->second == e))
        out << " differs " << h << " (groups " << it->second.groups << "/" << e.groups << ", tier "
            << it->second.tier << "/" << e.tier << ", priority " << it->second.priority << "/"
            << e.priority << ")";
    }
    for (const auto& [k, e] : index_)
      if (!want.count(k)) out << " extra " << k.first << " (groups " << e.groups << ", tier " << e.tier << ")";
    return out.str();
  }

  uint64_t pending(const BlockManager& m) const { return m.events()->pending(); }
  // The hashes of `place`'s entries (0: the tree's).
  std::set<uint64_t> hashes(uint32_t place) const {
    std::set<uint64_t> out;
    for (const auto& kv : index_)
      if (kv.first.second == place) out.insert(kv.first.first);
    return out;
  }
  // Entries of `place` (0: the tree's).
  size_t count(uint32_t place) const {
    size_t n = 0;
    for (const auto& kv : index_) n += kv.first.second == place;
    return n;
  }
  uint64_t applied = 0, lost = 0, resyncs = 0;
  uint64_t kinds[8] = {};

 private:
  using Key = std::pair<uint64_t, uint32_t>;  // hash, place
  static Key key_of(uint64_t hash, uint32_t tier) {
    return Key{hash, tier >= KVC_TIER_DISK ? tier : 0};
  }
  static Entry entry_of(const kvc_snapshot_entry_t& e) {
    return Entry{e.parent_hash, e.groups, e.lora_id, e.has_lora, e.tier, e.priority, e.num_tokens};
  }

  std::string apply(BlockManager& m, const kvc_event_t& e, const int32_t* tokens) {
    if (e.id != last_id_ + 1)
      return "event " + std::to_string(e.id) + " after " + std::to_string(last_id_);
    ++applied;
    if (e.kind < 8) ++kinds[e.kind];
    if (e.kind == KVC_EVENT_LOST) {
      // Resync: the snapshot as of the newest event; the ones before it
      // still in the ring are skipped.
      lost += e.lost_count;
      ++resyncs;
      std::vector<kvc_snapshot_entry_t> snap;
      m.snapshot(snap, &skip_until_);
      index_.clear();
      for (const kvc_snapshot_entry_t& s : snap) index_[key_of(s.hash, s.tier)] = entry_of(s);
      last_id_ = e.id + e.lost_count - 1;
      if (skip_until_ < last_id_) return "a snapshot older than the lost events";
      return "";
    }
    last_id_ = e.id;
    if (e.id <= skip_until_) return "";
    switch (e.kind) {
      case KVC_EVENT_STORED: {
        const bool store = e.tier >= KVC_TIER_DISK;
        if (store != (e.token_offset == KVC_EVENT_NO_TOKENS) || e.num_tokens == 0)
          return "STORED " + std::to_string(e.id) + (store ? " of a store with" : " without") +
                 " token ids";
        if (store && (e.parent_hash != 0 || e.has_lora != 0))
          return "STORED " + std::to_string(e.id) + " of a store names a parent or LoRA id";
        (void)tokens;
        Entry& x = index_[key_of(e.hash, e.tier)];
        if (x.groups != 0 && (x.parent != e.parent_hash || x.tier != e.tier))
          return "STORED " + std::to_string(e.id) + " disagrees with the block held";
        x.parent = e.parent_hash;
        x.groups |= e.groups;
        x.lora = e.lora_id;
        x.has_lora = e.has_lora;
        x.tier = e.tier;
        x.priority = e.priority;
        x.num_tokens = e.num_tokens;
        return "";
      }
      case KVC_EVENT_REMOVED: {
        auto it = index_.find(key_of(e.hash, e.tier));
        if (it == index_.end() || (it->second.groups & e.groups) != e.groups)
          return "REMOVED " + std::to_string(e.id) + " of groups not held";
        if (it->second.tier != e.tier) return "REMOVED " + std::to_string(e.id) + " from another tier";
        it->second.groups &= ~e.groups;
        if (it->second.groups == 0) index_.erase(it);
        return "";
      }
      case KVC_EVENT_TIER_CHANGED: {
        if (e.tier >= KVC_TIER_DISK) return "TIER_CHANGED " + std::to_string(e.id) + " to a store";
        auto it = index_.find(key_of(e.hash, 0));
        if (it == index_.end()) return "TIER_CHANGED " + std::to_string(e.id) + " of a block not held";
        it->second.tier = e.tier;
        it->second.groups = e.groups;
        it->second.priority = e.priority;
        if (e.groups == 0) index_.erase(it);
        return "";
      }
      case KVC_EVENT_PRIORITY_CHANGED: {
        auto it = index_.find(key_of(e.hash, 0));
        if (it == index_.end()) return "PRIORITY_CHANGED " + std::to_string(e.id) + " of a block not held";
        it->second.priority = e.priority;
        return "";
      }
      case KVC_EVENT_CLEARED:  // the tree's entries; the stores keep theirs
        for (auto it = index_.begin(); it != index_.end();)
          it = it->first.second == 0 ? index_.erase(it) : std::next(it);
        return "";
      default:
        return "unknown event kind " + std::to_string(e.kind);
    }
  }

  std::map<Key, Entry> index_;
  uint64_t last_id_ = 0;
  uint64_t skip_until_ = 0;
};

}  // namespace test
}  // namespace kvc

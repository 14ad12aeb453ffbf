#include "fuzz_events.h"

#include <iterator>

#include "fuzz_model.h"

namespace kvc_fuzz {

uint64_t EventMirror::last_emitted(kvc_cache_t* cache) {
  kvc_event_drain_t r = KVC_EVENT_DRAIN_INIT;
  ++g_count.check_calls;
  if (kvc_cache_drain_events(cache, nullptr, 0, nullptr, 0, &r) != KVC_OK)
    finding("kvc_cache_drain_events of capacity 0: %s", kvc_last_error_message());
  return r.last_id;
}

EventMirror::Entry EventMirror::entry_of(const kvc_snapshot_entry_t& e) {
  return Entry{e.parent_hash, e.groups, e.lora_id, e.has_lora, e.tier, e.priority, e.num_tokens};
}

void EventMirror::snapshot(kvc_cache_t* cache, std::map<Key, Entry>& out, uint64_t* at) {
  size_t count = 0;
  ++g_count.check_calls;
  kvc_status_t st = kvc_cache_snapshot(cache, snap_.data(), snap_.size(), &count, at);
  if (st == KVC_ERR_BUFFER_TOO_SMALL) {
    snap_.resize(count);
    ++g_count.check_calls;
    st = kvc_cache_snapshot(cache, snap_.data(), snap_.size(), &count, at);
  }
  if (st != KVC_OK) finding("kvc_cache_snapshot: %s", kvc_last_error_message());
  out.clear();
  for (size_t i = 0; i < count; ++i) {
    if (!out.emplace(key_of(snap_[i].hash, snap_[i].tier), entry_of(snap_[i])).second)
      finding("kvc_cache_snapshot lists hash %llx twice", (unsigned long long)snap_[i].hash);
  }
}

void EventMirror::apply(kvc_cache_t* cache, int index, const kvc_event_t& e, const int32_t*) {
  if (e.id != last_id_ + 1)
    finding("event %llu of cache %d follows %llu", (unsigned long long)e.id, index,
            (unsigned long long)last_id_);
  if (e.kind == KVC_EVENT_LOST) {
    last_id_ = e.id + e.lost_count - 1;
    snapshot(cache, index_, &skip_until_);
    if (skip_until_ < last_id_) finding("a snapshot of cache %d older than its lost events", index);
    return;
  }
  last_id_ = e.id;
  if (e.id <= skip_until_) return;
  auto held = [&](const char* kind) {
    // TIER_CHANGED and PRIORITY_CHANGED name the tree's entry (events.h).
    auto it = index_.find(key_of(e.hash, e.kind == KVC_EVENT_STORED || e.kind == KVC_EVENT_REMOVED
                                             ? e.tier : 0));
    if (it == index_.end())
      finding("%s event %llu of cache %d names a block the index lacks", kind,
              (unsigned long long)e.id, index);
    return it;
  };
  switch (e.kind) {
    case KVC_EVENT_STORED: {
      Entry& x = index_[key_of(e.hash, e.tier)];
      x.parent = e.parent_hash, x.groups |= e.groups, x.lora = e.lora_id, x.has_lora = e.has_lora;
      x.tier = e.tier, x.priority = e.priority, x.num_tokens = e.num_tokens;
      break;
    }
    case KVC_EVENT_REMOVED: {
      auto it = held("REMOVED");
      if ((it->second.groups & e.groups) != e.groups || it->second.tier != e.tier)
        finding("REMOVED event %llu of cache %d: groups or tier not held", (unsigned long long)e.id,
                index);
      it->second.groups &= ~e.groups;
      if (it->second.groups == 0) index_.erase(it);
      break;
    }
    case KVC_EVENT_TIER_CHANGED: {
      auto it = held("TIER_CHANGED");
      it->second.tier = e.tier, it->second.groups = e.groups, it->second.priority = e.priority;
      if (e.groups == 0) index_.erase(it);
      break;
    }
    case KVC_EVENT_PRIORITY_CHANGED:
      held("PRIORITY_CHANGED")->second.priority = e.priority;
      break;
    case KVC_EVENT_CLEARED:  // the tree's entries; the stores keep theirs
      for (auto it = index_.begin(); it != index_.end();)
        it = it->first.second == 0 ? index_.erase(it) : std::next(it);
      break;
    default:
      finding("event %llu of cache %d has kind %u", (unsigned long long)e.id, index, e.kind);
  }
}

void EventMirror::sync(kvc_cache_t* cache, int index, size_t chunk) {
  events_.resize(chunk);
  tokens_.resize(chunk * 1024);
  for (;;) {
    kvc_event_drain_t r = KVC_EVENT_DRAIN_INIT;
    ++g_count.check_calls;
    if (kvc_cache_drain_events(cache, events_.data(), chunk, tokens_.data(), tokens_.size(), &r) !=
        KVC_OK)
      finding("kvc_cache_drain_events of cache %d: %s", index, kvc_last_error_message());
    for (uint64_t i = 0; i < r.events; ++i) apply(cache, index, events_[i], tokens_.data());
    if (r.events_pending == 0) break;
    if (r.events == 0) finding("a drain of cache %d made no progress", index);
  }
  std::map<Key, Entry> want;
  uint64_t at = 0;
  snapshot(cache, want, &at);
  if (at != last_id_)
    finding("the snapshot of cache %d is at event %llu, the events at %llu", index,
            (unsigned long long)at, (unsigned long long)last_id_);
  if (want.size() != index_.size())
    finding("the event index of cache %d holds %zu blocks, the snapshot %zu", index, index_.size(),
            want.size());
  for (const auto& [k, e] : want) {
    auto it = index_.find(k);
    if (it == index_.end() || it->second != e)
      finding("the event index of cache %d disagrees with the snapshot on block %llx (tier %u)",
              index, (unsigned long long)k.first, e.tier);
  }
}

}  // namespace kvc_fuzz

#include "core/event_log.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "core/radix_tree.h"

namespace kvc {

EventLog::EventLog(uint32_t capacity, uint32_t tokens_per_block, uint64_t seed, uint32_t id_bound)
    : hasher_(seed),
      tokens_per_block_(tokens_per_block),
      hashes_(id_bound, 0),
      ring_(capacity),
      tokens_(size_t(capacity) * tokens_per_block) {}

size_t EventLog::push(const Record& r) {
  if (size_ == ring_.size()) {  // full: the oldest goes, reported as lost
    const Record& old = ring_[head_];
    if (lost_count_ == 0) lost_first_ = id_at(0);
    ++lost_count_;
    if (carries_tokens(old)) token_count_ -= old.num_tokens;
    if (++head_ == ring_.size()) head_ = 0;
    --size_;
  }
  // The ring's capacity is any number: wrap by comparison, not division.
  size_t slot = head_ + size_;
  if (slot >= ring_.size()) slot -= ring_.size();
  ring_[slot] = r;
  ++size_;
  ++next_id_;
  return slot;
}

void EventLog::learn_scope(const std::string& scope_bytes) {
  scope_bytes_ = scope_bytes;
  scope_digest_ = hasher_.scope_digest(scope_bytes);
  scope_has_lora_ = scope_lora(scope_bytes, &scope_lora_);
  if (!scope_has_lora_) scope_lora_ = 0;
  scope_known_ = true;
}

void EventLog::stored(uint32_t node, uint32_t parent, const std::string& scope_bytes,
                      const std::string& extra_bytes, const int32_t* tokens, uint32_t num_tokens,
                      uint64_t groups, uint32_t priority) {
  use_scope(scope_bytes);
  hashes_[node] = hasher_.block(hashes_[parent], scope_digest_, hasher_.extra_digest(extra_bytes),
                                tokens, num_tokens);
  emit_stored(node, parent, tokens, num_tokens, groups, priority);
}

void EventLog::stored_groups(uint32_t node, uint32_t parent, const std::string& scope_bytes,
                             const int32_t* tokens, uint32_t num_tokens, uint64_t groups,
                             uint32_t priority) {
  use_scope(scope_bytes);
  emit_stored(node, parent, tokens, num_tokens, groups, priority);
}

void EventLog::emit_stored(uint32_t node, uint32_t parent, const int32_t* tokens,
                           uint32_t num_tokens, uint64_t groups, uint32_t priority) {
  if (muted_ || groups == 0) return;
  const size_t slot =
      push(Record{hashes_[node], hashes_[parent], groups, scope_lora_, num_tokens,
                  uint8_t(KVC_EVENT_STORED), uint8_t(KVC_TIER_PRIMARY), uint8_t(priority),
                  uint8_t(scope_has_lora_ ? 1 : 0)});
  std::memcpy(slot_tokens(slot), tokens, sizeof(int32_t) * num_tokens);
  token_count_ += num_tokens;
}

void EventLog::removed(uint32_t node, uint64_t groups, uint32_t tier) {
  if (muted_ || groups == 0) return;
  push(Record{hashes_[node], 0, groups, 0, 0, uint8_t(KVC_EVENT_REMOVED), uint8_t(tier), 0, 0});
}

void EventLog::tier_changed(uint32_t node, uint32_t tier, uint64_t groups, uint32_t priority) {
  if (muted_) return;
  push(Record{hashes_[node], 0, groups, 0, 0, uint8_t(KVC_EVENT_TIER_CHANGED), uint8_t(tier),
              uint8_t(priority), 0});
}

void EventLog::store_stored(uint64_t hash, uint32_t tier, uint64_t groups, uint32_t num_tokens,
                            uint32_t priority) {
  if (muted_) return;
  push(Record{hash, 0, groups, 0, num_tokens, uint8_t(KVC_EVENT_STORED), uint8_t(tier),
              uint8_t(priority), 0});
}

void EventLog::store_removed(uint64_t hash, uint32_t tier, uint64_t groups) {
  if (muted_) return;
  push(Record{hash, 0, groups, 0, 0, uint8_t(KVC_EVENT_REMOVED), uint8_t(tier), 0, 0});
}

void EventLog::priority_changed(uint32_t node, uint32_t priority) {
  if (muted_) return;
  push(Record{hashes_[node], 0, 0, 0, 0, uint8_t(KVC_EVENT_PRIORITY_CHANGED), 0,
              uint8_t(priority), 0});
}

void EventLog::cleared() {
  if (muted_) return;
  push(Record{0, 0, 0, 0, 0, uint8_t(KVC_EVENT_CLEARED), 0, 0, 0});
}

void EventLog::drain(kvc_event_t* out, size_t capacity, int32_t* tokens, size_t token_capacity,
                     kvc_event_drain_t& r) {
  uint64_t written = 0, tokens_written = 0;
  if (lost_count_ != 0 && written < capacity) {
    kvc_event_t& e = out[written++];
    e = kvc_event_t{};
    e.id = lost_first_;
    e.kind = KVC_EVENT_LOST;
    e.token_offset = KVC_EVENT_NO_TOKENS;
    e.lost_count = lost_count_;
    lost_count_ = 0;
  }
  // Events wait behind a pending LOST: ids stay in order.
  while (lost_count_ == 0 && size_ != 0 && written < capacity) {
    const Record& e = ring_[head_];
    const bool carries = carries_tokens(e);
    if (carries && tokens != nullptr && tokens_written + e.num_tokens > token_capacity) break;
    kvc_event_t& o = out[written++];
    o = kvc_event_t{};
    o.id = id_at(0);
    o.kind = e.kind;
    o.tier = e.tier;
    o.hash = e.hash;
    o.parent_hash = e.parent_hash;
    o.groups = e.groups;
    o.lora_id = e.lora_id;
    o.has_lora = e.has_lora;
    o.priority = e.priority;
    o.num_tokens = e.num_tokens;
    o.token_offset = KVC_EVENT_NO_TOKENS;
    if (carries) {
      token_count_ -= e.num_tokens;
      if (tokens != nullptr) {
        o.token_offset = tokens_written;
        std::memcpy(tokens + tokens_written, slot_tokens(head_), sizeof(int32_t) * e.num_tokens);
        tokens_written += e.num_tokens;
      }
    }
    if (++head_ == ring_.size()) head_ = 0;
    --size_;
  }
  r.events = written;
  r.tokens = tokens_written;
  r.events_pending = pending();
  r.tokens_pending = token_count_;
  r.last_id = last_id();
}

}  // namespace kvc

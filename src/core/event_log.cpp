#include "core/event_log.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "core/radix_tree.h"

namespace kvc {

EventLog::EventLog(uint32_t capacity, uint32_t tokens_per_block, uint64_t seed, uint32_t max_nodes)
    : hasher_(seed),
      tokens_per_block_(tokens_per_block),
      nodes_(size_t(max_nodes) + 1),
      ring_(capacity),
      tokens_(size_t(capacity) * tokens_per_block) {}

kvc_event_t& EventLog::push(uint32_t kind, uint32_t node) {
  if (size_ == ring_.size()) {  // full: the oldest goes, reported as lost
    const kvc_event_t& old = ring_[head_];
    if (lost_count_ == 0) lost_first_ = old.id;
    ++lost_count_;
    if (old.token_offset != KVC_EVENT_NO_TOKENS) token_count_ -= old.num_tokens;
    if (++head_ == ring_.size()) head_ = 0;
    --size_;
  }
  // The ring's capacity is any number: wrap by comparison, not division.
  size_t slot = head_ + size_;
  if (slot >= ring_.size()) slot -= ring_.size();
  kvc_event_t& e = ring_[slot];
  ++size_;
  e = kvc_event_t{};
  e.id = next_id_++;
  e.kind = kind;
  e.hash = node == RadixTree::kRoot ? 0 : nodes_[node].hash;
  e.token_offset = KVC_EVENT_NO_TOKENS;
  return e;
}

void EventLog::stored(uint32_t node, uint32_t parent, const std::string& scope_bytes,
                      const std::string& extra_bytes, const int32_t* tokens, uint32_t num_tokens,
                      uint64_t groups, uint32_t priority) {
  if (!scope_known_ || scope_bytes != scope_bytes_) {
    scope_bytes_ = scope_bytes;
    scope_digest_ = hasher_.scope_digest(scope_bytes);
    scope_has_lora_ = scope_lora(scope_bytes, &scope_lora_);
    if (!scope_has_lora_) scope_lora_ = 0;
    scope_known_ = true;
  }
  NodeLabel& label = nodes_[node];
  label.hash = hasher_.block(nodes_[parent].hash, scope_digest_, hasher_.extra_digest(extra_bytes),
                             tokens, num_tokens);
  label.has_lora = scope_has_lora_;
  label.lora = scope_lora_;
  stored_groups(node, parent, tokens, num_tokens, groups, priority);
}

void EventLog::stored_groups(uint32_t node, uint32_t parent, const int32_t* tokens,
                             uint32_t num_tokens, uint64_t groups, uint32_t priority) {
  if (muted_ || groups == 0) return;
  kvc_event_t& e = push(KVC_EVENT_STORED, node);
  const size_t slot = size_t(&e - ring_.data());
  e.tier = KVC_TIER_PRIMARY;
  e.parent_hash = nodes_[parent].hash;
  e.groups = groups;
  e.has_lora = nodes_[node].has_lora ? 1 : 0;
  e.lora_id = nodes_[node].lora;
  e.priority = priority;
  e.num_tokens = num_tokens;
  e.token_offset = 0;  // tokens stored with the slot; the drain places them
  std::memcpy(slot_tokens(slot), tokens, sizeof(int32_t) * num_tokens);
  token_count_ += num_tokens;
}

void EventLog::removed(uint32_t node, uint64_t groups, uint32_t tier) {
  if (muted_ || groups == 0) return;
  kvc_event_t& e = push(KVC_EVENT_REMOVED, node);
  e.groups = groups;
  e.tier = tier;
}

void EventLog::tier_changed(uint32_t node, uint32_t tier, uint64_t groups, uint32_t priority) {
  if (muted_) return;
  kvc_event_t& e = push(KVC_EVENT_TIER_CHANGED, node);
  e.tier = tier;
  e.groups = groups;
  e.priority = priority;
}

void EventLog::priority_changed(uint32_t node, uint32_t priority) {
  if (muted_) return;
  kvc_event_t& e = push(KVC_EVENT_PRIORITY_CHANGED, node);
  e.priority = priority;
}

void EventLog::cleared() {
  if (muted_) return;
  push(KVC_EVENT_CLEARED, RadixTree::kRoot);
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
    const kvc_event_t& e = ring_[head_];
    const bool carries = e.token_offset != KVC_EVENT_NO_TOKENS;
    if (carries && tokens != nullptr && tokens_written + e.num_tokens > token_capacity) break;
    kvc_event_t& o = out[written++];
    o = e;
    if (carries) {
      token_count_ -= e.num_tokens;
      if (tokens != nullptr) {
        o.token_offset = tokens_written;
        std::memcpy(tokens + tokens_written, slot_tokens(head_), sizeof(int32_t) * e.num_tokens);
        tokens_written += e.num_tokens;
      } else {
        o.token_offset = KVC_EVENT_NO_TOKENS;
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

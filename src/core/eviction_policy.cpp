#include "core/eviction_policy.h"

namespace kvc {

EvictionPolicy::EvictionPolicy(uint32_t id_bound)
    : links_(id_bound), priority_(id_bound, kNotQueued) {
  for (uint32_t p = 0; p <= kMaxPriority; ++p) head_[p] = tail_[p] = kNoNode;
}

void EvictionPolicy::link_after(uint32_t node, uint32_t after, uint32_t priority) {
  Link& l = links_[node];
  l.prev = after;
  l.next = after == kNoNode ? head_[priority] : links_[after].next;
  if (l.prev != kNoNode) links_[l.prev].next = node;
  else head_[priority] = node;
  if (l.next != kNoNode) links_[l.next].prev = node;
  else tail_[priority] = node;
  priority_[node] = uint8_t(priority);
  nonempty_[priority >> 6] |= uint64_t(1) << (priority & 63);
  ++size_;
}

void EvictionPolicy::push_newest(uint32_t node, uint32_t priority, uint64_t age) {
  links_[node].age = age;
  link_after(node, tail_[priority], priority);
}

void EvictionPolicy::insert_by_age(uint32_t node, uint32_t priority, uint64_t age) {
  links_[node].age = age;
  // Walk from both ends; stop at the first node on the right side of `age`.
  // The oldest end is looked at first: a parent evictable once its last
  // child is evicted is most often older than every queued node.
  uint32_t from_old = head_[priority];
  uint32_t from_new = tail_[priority];
  while (true) {
    if (from_old == kNoNode) {  // empty list
      link_after(node, kNoNode, priority);
      return;
    }
    if (links_[from_old].age > age) {
      link_after(node, links_[from_old].prev, priority);
      return;
    }
    if (links_[from_new].age <= age) {
      link_after(node, from_new, priority);
      return;
    }
    from_old = links_[from_old].next;
    from_new = links_[from_new].prev;
  }
}

void EvictionPolicy::remove(uint32_t node) {
  Link& l = links_[node];
  const uint32_t p = priority_[node];
  if (l.prev != kNoNode) links_[l.prev].next = l.next;
  else head_[p] = l.next;
  if (l.next != kNoNode) links_[l.next].prev = l.prev;
  else tail_[p] = l.prev;
  if (head_[p] == kNoNode) nonempty_[p >> 6] &= ~(uint64_t(1) << (p & 63));
  l.prev = l.next = kNoNode;
  priority_[node] = kNotQueued;
  --size_;
}

uint32_t EvictionPolicy::victim() const {
  for (int w = 0; w < 2; ++w) {
    if (nonempty_[w] != 0) return head_[w * 64 + __builtin_ctzll(nonempty_[w])];
  }
  return kNoNode;
}

}  // namespace kvc

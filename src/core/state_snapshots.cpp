#include "core/state_snapshots.h"

#include <string>

#include "base/error.h"

namespace kvc {

namespace {

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "state snapshot invariant broken: " + what);
}

}  // namespace

StateSnapshots::StateSnapshots(Device& device, const StateSlots& slots, const RadixTree& tree,
                               uint32_t num_snapshots)
    : device_(device), slots_(slots), tree_(tree), num_slots_(num_snapshots) {
  for (uint32_t r = 0; r < slots_.num_resources(); ++r) {
    copy_bytes_ += slots_.layout(r).slot_bytes;
    stride_bytes_ += slots_.layout(r).slot_stride;
  }
  for (uint32_t s = num_slots_; s > 0; --s) free_.push_back(s - 1);
  node_of_.assign(num_slots_, kNone);
  used_at_.assign(num_slots_, 0);
  slot_of_.assign(tree_.id_bound(), kNone);
  ranges_.resize(slots_.num_resources());
  if (num_slots_ == 0) return;
  try {
    for (uint32_t r = 0; r < slots_.num_resources(); ++r) {
      const ResourceLayout& l = slots_.layout(r);
      const uint64_t extra = l.alignment > kStateAlignment ? l.alignment : 0;
      void* raw = device_.allocate(l.slot_stride * num_slots_ + extra);
      bases_.push_back(raw);
    }
  } catch (...) {
    for (void* p : bases_) device_.deallocate(p);
    throw;
  }
}

StateSnapshots::~StateSnapshots() {
  for (void* p : bases_) device_.deallocate(p);
}

void StateSnapshots::copy(uint32_t k, uint64_t seq, bool to_snapshot, void* stream) {
  // Every resource's range in one batched copy (one launch on CUDA).
  for (uint32_t r = 0; r < slots_.num_resources(); ++r) {
    const ResourceLayout& l = slots_.layout(r);
    unsigned char* live =
        static_cast<unsigned char*>(slots_.base(r)) + uint64_t(slots_.slot(seq, r)) * l.slot_stride;
    const uintptr_t base = round_up(reinterpret_cast<uintptr_t>(bases_[r]), l.alignment);
    unsigned char* snap = reinterpret_cast<unsigned char*>(base) + uint64_t(k) * l.slot_stride;
    ranges_[r] = CopyRange{to_snapshot ? snap : live, to_snapshot ? live : snap, l.slot_bytes};
  }
  device_.copy_ranges(ranges_.data(), ranges_.size(), stream);
}

uint32_t StateSnapshots::victim() const {
  uint32_t best = kNone;
  for (uint32_t k = 0; k < num_slots_; ++k) {
    if (node_of_[k] == kNone) continue;
    if (best == kNone) {
      best = k;
      continue;
    }
    const uint8_t p = tree_.node(node_of_[k]).priority;
    const uint8_t bp = tree_.node(node_of_[best]).priority;
    if (p < bp || (p == bp && used_at_[k] < used_at_[best])) best = k;
  }
  return best;
}

void StateSnapshots::release(uint32_t k) {
  slot_of_[node_of_[k]] = kNone;
  node_of_[k] = kNone;
  free_.push_back(k);
}

void StateSnapshots::dropped(uint32_t node) {
  if (!has(node)) return;
  release(slot_of_[node]);
  ++counters_.dropped;
}

void StateSnapshots::clear() {
  for (uint32_t k = 0; k < num_slots_; ++k)
    if (node_of_[k] != kNone) {
      release(k);
      ++counters_.dropped;
    }
}

void StateSnapshots::publish(uint32_t node, uint64_t seq, void* stream) {
  uint32_t k = has(node) ? slot_of_[node] : kNone;
  if (k == kNone) {
    if (free_.empty()) {
      release(victim());
      ++counters_.evicted;
    }
    k = free_.back();
    free_.pop_back();
    node_of_[k] = node;
    slot_of_[node] = k;
  }
  try {
    copy(k, seq, true, stream);
  } catch (...) {
    release(k);  // partly written: no snapshot rather than a wrong one
    throw;
  }
  used_at_[k] = ++tick_;
  ++counters_.published;
}

void StateSnapshots::restore(uint32_t node, uint64_t seq, void* stream) {
  const uint32_t k = slot_of_.at(node);
  copy(k, seq, false, stream);
  used_at_[k] = ++tick_;
}

void StateSnapshots::check() const {
  std::vector<uint32_t> owners(num_slots_, 0);
  for (uint32_t k : free_) {
    if (k >= num_slots_) broken("free snapshot slot " + std::to_string(k) + " out of range");
    if (node_of_[k] != kNone)
      broken("free snapshot slot " + std::to_string(k) + " names node " +
             std::to_string(node_of_[k]));
    ++owners[k];
  }
  uint64_t held = 0;
  for (uint32_t k = 0; k < num_slots_; ++k) {
    const uint32_t n = node_of_[k];
    if (n == kNone) continue;
    ++owners[k];
    ++held;
    if (n >= slot_of_.size() || slot_of_[n] != k)
      broken("snapshot slot " + std::to_string(k) + " names node " + std::to_string(n) +
             ", which does not name it back");
    if (!tree_.node(n).live)
      broken("snapshot slot " + std::to_string(k) + " hangs on node " + std::to_string(n) +
             ", which is not live");
  }
  for (uint32_t k = 0; k < num_slots_; ++k)
    if (owners[k] != 1)
      broken("snapshot slot " + std::to_string(k) + " is " +
             (owners[k] == 0 ? "neither free nor held" : "held or free more than once"));
  uint64_t named = 0;
  for (uint32_t k : slot_of_)
    if (k != kNone) ++named;
  if (named != held)
    broken(std::to_string(named) + " nodes name a snapshot slot, " + std::to_string(held) +
           " slots are held");
}

}  // namespace kvc

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
                               uint32_t num_snapshots, uint32_t num_host_snapshots,
                               uint32_t min_priority)
    : device_(device),
      slots_(slots),
      tree_(tree),
      num_slots_(num_snapshots),
      num_host_slots_(num_snapshots == 0 ? 0 : num_host_snapshots),
      min_priority_(min_priority) {
  for (uint32_t r = 0; r < slots_.num_resources(); ++r) {
    copy_bytes_ += slots_.layout(r).slot_bytes;
    stride_bytes_ += slots_.layout(r).slot_stride;
  }
  for (uint32_t s = num_slots_; s > 0; --s) free_.push_back(s - 1);
  node_of_.assign(num_slots_, kNone);
  used_at_.assign(num_slots_, 0);
  slot_of_.assign(tree_.id_bound(), kNone);
  for (uint32_t s = num_host_slots_; s > 0; --s) host_free_.push_back(s - 1);
  host_node_of_.assign(num_host_slots_, kNone);
  host_used_at_.assign(num_host_slots_, 0);
  host_of_.assign(num_host_slots_ == 0 ? 0 : tree_.id_bound(), kNone);
  ranges_.resize(slots_.num_resources());
  if (num_slots_ == 0) return;
  try {
    for (uint32_t r = 0; r < slots_.num_resources(); ++r) {
      const ResourceLayout& l = slots_.layout(r);
      const uint64_t extra = l.alignment > kStateAlignment ? l.alignment : 0;
      void* raw = device_.allocate(l.slot_stride * num_slots_ + extra);
      bases_.push_back(raw);
    }
    if (num_host_slots_ > 0)
      for (uint32_t r = 0; r < slots_.num_resources(); ++r) {
        // Host memory need not come 256-aligned: room to align every slot.
        const ResourceLayout& l = slots_.layout(r);
        host_bases_.push_back(device_.allocate_host(l.slot_stride * num_host_slots_ + l.alignment));
      }
  } catch (...) {
    for (void* p : bases_) device_.deallocate(p);
    for (void* p : host_bases_) device_.deallocate_host(p);
    throw;
  }
}

StateSnapshots::~StateSnapshots() {
  for (void* p : bases_) device_.deallocate(p);
  for (void* p : host_bases_) device_.deallocate_host(p);
}

namespace {

// Snapshot slot k of resource r in a pool allocated at `raw`.
unsigned char* snapshot_at(void* raw, const ResourceLayout& l, uint32_t k) {
  const uintptr_t base = round_up(reinterpret_cast<uintptr_t>(raw), l.alignment);
  return reinterpret_cast<unsigned char*>(base) + uint64_t(k) * l.slot_stride;
}

}  // namespace

void StateSnapshots::copy(uint32_t k, uint64_t seq, bool to_snapshot, void* stream, bool host) {
  // Device snapshots: every resource's range in one batched copy (one
  // launch on CUDA). Host snapshots: one copy_2d per resource, host to
  // device (copy_ranges copies within the device's memory).
  const CopyKind kind = to_snapshot ? CopyKind::kDeviceToHost : CopyKind::kHostToDevice;
  for (uint32_t r = 0; r < slots_.num_resources(); ++r) {
    const ResourceLayout& l = slots_.layout(r);
    unsigned char* live =
        static_cast<unsigned char*>(slots_.base(r)) + uint64_t(slots_.slot(seq, r)) * l.slot_stride;
    unsigned char* snap = snapshot_at(host ? host_bases_[r] : bases_[r], l, k);
    unsigned char* dst = to_snapshot ? snap : live;
    const unsigned char* src = to_snapshot ? live : snap;
    if (host)
      device_.copy_2d(dst, l.slot_stride, src, l.slot_stride, l.slot_bytes, 1, kind, stream);
    else
      ranges_[r] = CopyRange{dst, src, l.slot_bytes};
  }
  if (!host) device_.copy_ranges(ranges_.data(), ranges_.size(), stream);
}

void StateSnapshots::offload_copy(uint32_t k, uint32_t h, void* stream) {
  for (uint32_t r = 0; r < slots_.num_resources(); ++r) {
    const ResourceLayout& l = slots_.layout(r);
    device_.copy_2d(snapshot_at(host_bases_[r], l, h), l.slot_stride, snapshot_at(bases_[r], l, k),
                    l.slot_stride, l.slot_bytes, 1, CopyKind::kDeviceToHost, stream);
  }
  device_.synchronize(stream);
}

uint32_t StateSnapshots::victim(const std::vector<uint32_t>& node_of,
                                const std::vector<uint64_t>& used_at) const {
  uint32_t best = kNone;
  for (uint32_t k = 0; k < node_of.size(); ++k) {
    if (node_of[k] == kNone) continue;
    if (best == kNone) {
      best = k;
      continue;
    }
    const uint8_t p = tree_.node(node_of[k]).priority;
    const uint8_t bp = tree_.node(node_of[best]).priority;
    if (p < bp || (p == bp && used_at[k] < used_at[best])) best = k;
  }
  return best;
}

void StateSnapshots::release(uint32_t k) {
  slot_of_[node_of_[k]] = kNone;
  node_of_[k] = kNone;
  free_.push_back(k);
}

void StateSnapshots::release_host(uint32_t h) {
  host_of_[host_node_of_[h]] = kNone;
  host_node_of_[h] = kNone;
  host_free_.push_back(h);
}

void StateSnapshots::evict(uint32_t k, void* stream) {
  const uint32_t node = node_of_[k];
  const uint64_t age = used_at_[k];
  if (num_host_slots_ == 0 || tree_.node(node).priority < min_priority_) {
    release(k);
    ++counters_.evicted;
    return;
  }
  if (host_free_.empty()) {
    release_host(victim(host_node_of_, host_used_at_));
    ++counters_.host_evicted;
  }
  const uint32_t h = host_free_.back();
  try {
    offload_copy(k, h, stream);
  } catch (...) {
    release(k);  // the snapshot is lost with the failed copy
    ++counters_.evicted;
    throw;
  }
  host_free_.pop_back();
  release(k);
  host_node_of_[h] = node;
  host_of_[node] = h;
  host_used_at_[h] = age;  // keeps its place in the LRU order
  ++counters_.offloaded;
}

void StateSnapshots::dropped(uint32_t node) {
  if (!has(node)) return;
  if (in_host(node))
    release_host(host_of_[node]);
  else
    release(slot_of_[node]);
  ++counters_.dropped;
}

void StateSnapshots::clear() {
  for (uint32_t k = 0; k < num_slots_; ++k)
    if (node_of_[k] != kNone) {
      release(k);
      ++counters_.dropped;
    }
  for (uint32_t h = 0; h < num_host_slots_; ++h)
    if (host_node_of_[h] != kNone) {
      release_host(h);
      ++counters_.dropped;
    }
}

void StateSnapshots::publish(uint32_t node, uint64_t seq, void* stream) {
  if (in_host(node)) release_host(host_of_[node]);  // the new bytes go to the device pool
  uint32_t k = has(node) ? slot_of_[node] : kNone;
  if (k == kNone) {
    if (free_.empty()) evict(victim(node_of_, used_at_), stream);
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
  if (in_host(node)) {
    const uint32_t h = host_of_[node];
    copy(h, seq, false, stream, true);
    device_.synchronize(stream);  // the host slot may be rewritten next
    host_used_at_[h] = ++tick_;
    ++counters_.onboarded;
    return;
  }
  const uint32_t k = slot_of_.at(node);
  copy(k, seq, false, stream);
  used_at_[k] = ++tick_;
}

void StateSnapshots::check_pool(const char* pool, const std::vector<uint32_t>& free,
                                const std::vector<uint32_t>& node_of,
                                const std::vector<uint32_t>& slot_of) const {
  const uint32_t num = uint32_t(node_of.size());
  const std::string what = std::string(pool) + " snapshot slot ";
  std::vector<uint32_t> owners(num, 0);
  for (uint32_t k : free) {
    if (k >= num) broken("free " + what + std::to_string(k) + " out of range");
    if (node_of[k] != kNone)
      broken("free " + what + std::to_string(k) + " names node " + std::to_string(node_of[k]));
    ++owners[k];
  }
  uint64_t held = 0;
  for (uint32_t k = 0; k < num; ++k) {
    const uint32_t n = node_of[k];
    if (n == kNone) continue;
    ++owners[k];
    ++held;
    if (n >= slot_of.size() || slot_of[n] != k)
      broken(what + std::to_string(k) + " names node " + std::to_string(n) +
             ", which does not name it back");
    if (!tree_.node(n).live)
      broken(what + std::to_string(k) + " hangs on node " + std::to_string(n) +
             ", which is not live");
  }
  for (uint32_t k = 0; k < num; ++k)
    if (owners[k] != 1)
      broken(what + std::to_string(k) + " is " +
             (owners[k] == 0 ? "neither free nor held" : "held or free more than once"));
  uint64_t named = 0;
  for (uint32_t k : slot_of)
    if (k != kNone) ++named;
  if (named != held)
    broken(std::to_string(named) + " nodes name a " + pool + " snapshot slot, " +
           std::to_string(held) + " slots are held");
}

void StateSnapshots::check() const {
  check_pool("device", free_, node_of_, slot_of_);
  check_pool("host", host_free_, host_node_of_, host_of_);
  // One snapshot per node: in one pool or the other.
  for (uint32_t n = 0; n < host_of_.size(); ++n)
    if (host_of_[n] != kNone && n < slot_of_.size() && slot_of_[n] != kNone)
      broken("node " + std::to_string(n) + " has a snapshot in both the device and the host pool");
  if (num_host_slots_ > 0 && num_slots_ == 0)
    broken("host snapshot slots without a device snapshot pool");
}

}  // namespace kvc

// State slots (kvcache/state.h): the layout of every state resource
// (managed or local, and why; slot bytes and strides) and the owner of
// their slots: the memory, allocated through the Device like the pools, a
// free list for the managed resources together and one per local resource,
// and which sequence holds which slot.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/device.h"
#include "core/cache_config.h"

namespace kvc {

struct ResourceLayout {
  StateResource spec;
  bool managed = true;
  kvc_resource_reason_t reason = KVC_RESOURCE_REASON_MANAGED;
  std::string reason_text;
  uint32_t n_groups = 0;  // conv meeting the constraint
  uint64_t alignment = 0;
  uint64_t slot_bytes = 0;
  uint64_t slot_stride = 0;
  uint64_t stride0 = 0, stride1 = 0, stride2 = 0;
};

// Slots start at multiples of this (generic state: of max(this, alignment)).
constexpr uint64_t kStateAlignment = 256;

// The managed/local rule and every resource's sizes (state.h). Never fails:
// the config's setters checked each resource.
std::vector<ResourceLayout> lay_out_resources(const std::vector<StateResource>& resources);
// The bytes of one slot of every resource (the sum of slot strides).
uint64_t state_bytes_per_slot(const std::vector<ResourceLayout>& layouts);

class StateSlots {
 public:
  // Allocates num_slots slots of every resource (Error(KVC_ERR_OUT_OF_MEMORY)).
  StateSlots(Device& device, std::vector<ResourceLayout> layouts, uint32_t num_slots);
  ~StateSlots();
  StateSlots(const StateSlots&) = delete;
  StateSlots& operator=(const StateSlots&) = delete;

  size_t num_resources() const { return layouts_.size(); }
  uint32_t num_slots() const { return num_slots_; }
  const ResourceLayout& layout(uint32_t r) const { return layouts_.at(r); }
  void* base(uint32_t r) const { return bases_.at(r); }
  uint32_t used(uint32_t r) const;
  uint64_t num_owners() const { return owned_.size(); }

  // Why a new sequence cannot get a slot of every resource ("" when it can):
  // names the first resource without a free slot and its count.
  std::string refusal() const;
  // Takes a slot of every resource for `id` (refusal() was "").
  void take(uint64_t id);
  // take(child), then every resource's slot bytes of parent copied into
  // the child's slot on `stream` (one Device::copy_ranges, device to
  // device).
  void take_copy(uint64_t parent, uint64_t child, void* stream);
  // Frees id's slots; nothing when it holds none.
  void release(uint64_t id);
  // id's slot of resource r; Error(KVC_ERR_NOT_FOUND) when it holds none.
  uint32_t slot(uint64_t id, uint32_t r) const;
  // Every used slot held by exactly one owner, every owner one slot per
  // free list, every owner live (is_live), num_live owners;
  // Error(KVC_ERR_INTERNAL) naming the first break.
  template <class IsLive>
  void check(IsLive&& is_live, uint64_t num_live) const {
    for (const auto& [id, slots] : owned_)
      if (!is_live(id)) broken("slots held by sequence " + std::to_string(id) + ", not live");
    check_counts(num_live);
  }

 private:
  [[noreturn]] static void broken(const std::string& what);
  void check_counts(uint64_t num_live) const;

  Device& device_;
  std::vector<ResourceLayout> layouts_;
  uint32_t num_slots_ = 0;
  std::vector<void*> raw_;                   // per resource: the allocation
  std::vector<void*> bases_;                 // per resource: slot 0, aligned
  std::vector<uint32_t> list_of_;            // per resource: its free list
  std::vector<std::vector<uint32_t>> free_;  // per list: free slots, lowest last
  std::unordered_map<uint64_t, std::vector<uint32_t>> owned_;  // id -> slot per list
  std::vector<CopyRange> ranges_;  // per resource: take_copy's ranges (sized here)
};

}  // namespace kvc

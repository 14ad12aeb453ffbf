#include "core/state_slots.h"

#include <algorithm>

#include "base/dtype.h"
#include "base/error.h"

namespace kvc {

namespace {

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

const char* kind_name(kvc_resource_kind_t k) {
  switch (k) {
    case KVC_RESOURCE_SSM: return "ssm";
    case KVC_RESOURCE_CONV: return "conv";
    case KVC_RESOURCE_GENERIC: return "generic";
    case KVC_RESOURCE_UNPAGED: return "unpaged";
    default: return "unknown";
  }
}

std::string ssm_shape(const StateResource& s) {
  return "(num_heads " + std::to_string(s.num_heads) + ", head_dim " +
         std::to_string(s.head_dim) + ", d_state " + std::to_string(s.d_state) + ", " +
         dtype_name(s.dtype) + ")";
}

std::string conv_shape(const StateResource& s) {
  return "(conv_dim " + std::to_string(s.conv_dim) + ", d_conv " + std::to_string(s.d_conv) +
         ", " + dtype_name(s.dtype) + ")";
}

}  // namespace

std::vector<ResourceLayout> lay_out_resources(const std::vector<StateResource>& resources) {
  std::vector<ResourceLayout> out;
  const StateResource* ssm = nullptr;   // the first SSM resource
  const StateResource* conv = nullptr;  // the first managed conv resource
  size_t ssm_index = 0, conv_index = 0;
  for (size_t i = 0; i < resources.size(); ++i) {
    const StateResource& s = resources[i];
    ResourceLayout l;
    l.spec = s;
    l.alignment = kStateAlignment;
    l.reason_text = "managed";
    const uint64_t e = s.dtype != 0 ? dtype_size(s.dtype) : 0;
    switch (s.kind) {
      case KVC_RESOURCE_SSM:
        l.slot_bytes = uint64_t(s.num_heads) * s.head_dim * s.d_state * e;
        l.stride0 = uint64_t(s.head_dim) * s.d_state * e;
        l.stride1 = uint64_t(s.d_state) * e;
        l.stride2 = e;
        if (ssm == nullptr) {
          ssm = &s;
          ssm_index = i;
          l.reason_text = "managed: the first SSM resource " + ssm_shape(s);
        } else if (s.num_heads != ssm->num_heads || s.head_dim != ssm->head_dim ||
                   s.d_state != ssm->d_state || s.dtype != ssm->dtype) {
          l.managed = false;
          l.reason = KVC_RESOURCE_REASON_SSM_SHAPE_DIFFERS;
          l.reason_text = "local: SSM shape " + ssm_shape(s) + " differs from resource " +
                          std::to_string(ssm_index) + "'s " + ssm_shape(*ssm);
        } else {
          l.reason_text = "managed: SSM shape equals resource " + std::to_string(ssm_index) + "'s";
        }
        break;
      case KVC_RESOURCE_CONV: {
        l.slot_bytes = uint64_t(s.conv_dim) * s.d_conv * e;
        l.stride0 = uint64_t(s.d_conv) * e;
        l.stride1 = e;
        if (ssm == nullptr) {
          l.managed = false;
          l.reason = KVC_RESOURCE_REASON_NO_SSM;
          l.reason_text = "local: no SSM resource was added before this conv resource to pair with";
          break;
        }
        const uint64_t inner = uint64_t(ssm->head_dim) * ssm->num_heads;
        const uint64_t two_ds = 2 * uint64_t(ssm->d_state);
        const std::string formula = "conv_dim " + std::to_string(s.conv_dim) +
                                    " = head_dim * num_heads (" + std::to_string(inner) +
                                    ") + 2 * n_groups * d_state (" +
                                    std::to_string(ssm->d_state) + ") of SSM resource " +
                                    std::to_string(ssm_index);
        if (s.conv_dim < inner || (s.conv_dim - inner) % two_ds != 0) {
          l.managed = false;
          l.reason = KVC_RESOURCE_REASON_N_GROUPS;
          l.reason_text = "local: " + formula + " has no integer n_groups >= 0";
          break;
        }
        l.n_groups = uint32_t((s.conv_dim - inner) / two_ds);
        if (conv == nullptr) {
          conv = &s;
          conv_index = i;
          l.reason_text = "managed: " + formula + " holds with n_groups " +
                          std::to_string(l.n_groups);
        } else if (s.conv_dim != conv->conv_dim || s.d_conv != conv->d_conv ||
                   s.dtype != conv->dtype) {
          l.managed = false;
          l.reason = KVC_RESOURCE_REASON_CONV_SHAPE_DIFFERS;
          l.reason_text = "local: conv shape " + conv_shape(s) + " differs from resource " +
                          std::to_string(conv_index) + "'s " + conv_shape(*conv);
        } else {
          l.reason_text = "managed: conv shape equals resource " + std::to_string(conv_index) +
                          "'s, n_groups " + std::to_string(l.n_groups);
        }
        break;
      }
      case KVC_RESOURCE_GENERIC:
        l.slot_bytes = s.bytes;
        l.alignment = std::max<uint64_t>(kStateAlignment, s.alignment);
        l.reason_text = "managed: generic state is always managed";
        break;
      default:  // KVC_RESOURCE_UNPAGED
        l.slot_bytes = s.bytes_per_token * s.max_tokens;
        l.stride0 = s.bytes_per_token;
        l.reason_text = "managed: unpaged resources are always managed";
        break;
    }
    l.slot_stride = round_up(l.slot_bytes, l.alignment);
    out.push_back(std::move(l));
  }
  return out;
}

uint64_t state_bytes_per_slot(const std::vector<ResourceLayout>& layouts) {
  uint64_t bytes = 0;
  for (const ResourceLayout& l : layouts) bytes += l.slot_stride;
  return bytes;
}

StateSlots::StateSlots(Device& device, std::vector<ResourceLayout> layouts, uint32_t num_slots)
    : device_(device), layouts_(std::move(layouts)), num_slots_(num_slots) {
  // Free lists: 0 for the managed resources, then one per local resource.
  size_t lists = 1;
  for (const ResourceLayout& l : layouts_) list_of_.push_back(l.managed ? 0 : uint32_t(lists++));
  free_.resize(lists);
  ranges_.resize(layouts_.size());
  for (auto& f : free_)
    for (uint32_t s = num_slots_; s > 0; --s) f.push_back(s - 1);  // slot 0 handed out first
  try {
    for (const ResourceLayout& l : layouts_) {
      const uint64_t extra = l.alignment > kStateAlignment ? l.alignment : 0;
      void* raw = device_.allocate(l.slot_stride * num_slots_ + extra);
      raw_.push_back(raw);
      const uintptr_t p = reinterpret_cast<uintptr_t>(raw);
      bases_.push_back(reinterpret_cast<void*>(round_up(p, l.alignment)));
    }
  } catch (...) {
    for (void* p : raw_) device_.deallocate(p);
    throw;
  }
}

StateSlots::~StateSlots() {
  for (void* p : raw_) device_.deallocate(p);
}

uint32_t StateSlots::used(uint32_t r) const {
  return num_slots_ - uint32_t(free_.at(list_of_.at(r)).size());
}

std::string StateSlots::refusal() const {
  for (size_t r = 0; r < layouts_.size(); ++r)
    if (free_[list_of_[r]].empty())
      return "no free state slot: resource " + std::to_string(r) + " (" +
             kind_name(layouts_[r].spec.kind) + ", " +
             (layouts_[r].managed ? "managed" : "local") + ") has all " +
             std::to_string(num_slots_) + " of its slots in use (kvc_config_set_max_state_slots)";
  return "";
}

void StateSlots::take(uint64_t id) {
  std::vector<uint32_t> slots;
  slots.reserve(free_.size());
  for (auto& f : free_) slots.push_back(f.back());
  owned_.emplace(id, std::move(slots));  // may throw: nothing taken yet
  for (auto& f : free_) f.pop_back();
}

void StateSlots::take_copy(uint64_t parent, uint64_t child, void* stream) {
  take(child);
  // References into the map stay valid when it rehashes.
  const std::vector<uint32_t>& from = owned_.at(parent);
  const std::vector<uint32_t>& to = owned_.at(child);
  try {
    for (size_t r = 0; r < layouts_.size(); ++r) {
      const ResourceLayout& l = layouts_[r];
      unsigned char* base = static_cast<unsigned char*>(bases_[r]);
      ranges_[r] = CopyRange{base + to[list_of_[r]] * l.slot_stride,
                             base + from[list_of_[r]] * l.slot_stride, l.slot_bytes};
    }
    device_.copy_ranges(ranges_.data(), ranges_.size(), stream);
  } catch (...) {
    release(child);
    throw;
  }
}

void StateSlots::release(uint64_t id) {
  auto it = owned_.find(id);
  if (it == owned_.end()) return;
  for (size_t i = 0; i < free_.size(); ++i) free_[i].push_back(it->second[i]);
  owned_.erase(it);
}

uint32_t StateSlots::slot(uint64_t id, uint32_t r) const {
  auto it = owned_.find(id);
  if (it == owned_.end())
    fail(KVC_ERR_NOT_FOUND, "sequence " + std::to_string(id) + " holds no state slot");
  return it->second.at(list_of_.at(r));
}

void StateSlots::broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "state slot invariant broken: " + what);
}

void StateSlots::check_counts(uint64_t num_live) const {
  if (owned_.size() != num_live)
    broken(std::to_string(owned_.size()) + " sequences hold slots, " + std::to_string(num_live) +
           " are live");
  for (size_t list = 0; list < free_.size(); ++list) {
    std::vector<uint32_t> owners(num_slots_, 0);
    for (uint32_t s : free_[list]) {
      if (s >= num_slots_) broken("free slot " + std::to_string(s) + " out of range");
      ++owners[s];
    }
    for (const auto& [id, slots] : owned_) {
      if (slots.size() != free_.size() || slots[list] >= num_slots_)
        broken("sequence " + std::to_string(id) + " holds a bad slot list");
      ++owners[slots[list]];
    }
    for (uint32_t s = 0; s < num_slots_; ++s)
      if (owners[s] != 1)
        broken("slot " + std::to_string(s) + " of free list " + std::to_string(list) + " is " +
               (owners[s] == 0 ? "neither free nor held" : "held or free more than once"));
  }
}

}  // namespace kvc

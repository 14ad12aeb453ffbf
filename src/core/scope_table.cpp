#include "core/scope_table.h"

#include "core/block_hash.h"

namespace kvc {

uint32_t ScopeTable::find(const std::string& bytes) const {
  const auto it = index_.find(bytes);
  return it == index_.end() ? kNone : it->second;
}

uint32_t ScopeTable::intern(const std::string& bytes) {
  const auto it = index_.find(bytes);
  if (it != index_.end()) {
    ++entries_[it->second].refs;
    return it->second;
  }
  // Everything that can throw happens before anything changes, and
  // free_ids_ keeps room for every id so unref() never allocates.
  Entry fresh{bytes, hash_bytes(bytes.data(), bytes.size()), 1};
  entries_.reserve(entries_.size() + 1);
  free_ids_.reserve(entries_.size() + 1);
  const bool reuse_id = !free_ids_.empty();
  const uint32_t id = reuse_id ? free_ids_.back() : uint32_t(entries_.size());
  index_.emplace(bytes, id);
  if (reuse_id) {
    free_ids_.pop_back();
    entries_[id] = std::move(fresh);
  } else {
    entries_.push_back(std::move(fresh));
  }
  return id;
}

void ScopeTable::unref(uint32_t id, uint32_t n) {
  Entry& e = entries_[id];
  e.refs -= n;
  if (e.refs > 0) return;
  index_.erase(e.bytes);
  e.bytes.clear();
  free_ids_.push_back(id);
}

}  // namespace kvc

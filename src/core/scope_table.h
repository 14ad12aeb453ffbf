// Interned sequence scopes. Two sequences share a scope id exactly when
// their encoded scopes are byte-for-byte equal, so comparing ids compares
// full scopes. Ids are reference counted by sequences and tree nodes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvc {

class ScopeTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // The id of `bytes`, or kNone; changes nothing.
  uint32_t find(const std::string& bytes) const;
  // The id of `bytes` with one more reference, created if needed.
  uint32_t intern(const std::string& bytes);
  void ref(uint32_t id) { ++entries_[id].refs; }
  // `n` references more (tree nodes linked together).
  void ref(uint32_t id, uint32_t n) { entries_[id].refs += n; }
  // `n` references fewer (tree nodes leaving together).
  void unref(uint32_t id, uint32_t n = 1);

  uint64_t digest(uint32_t id) const { return entries_[id].digest; }
  const std::string& bytes(uint32_t id) const { return entries_[id].bytes; }
  uint32_t refs(uint32_t id) const { return entries_[id].refs; }
  bool live(uint32_t id) const { return id < entries_.size() && entries_[id].refs > 0; }
  size_t size() const { return index_.size(); }
  size_t id_bound() const { return entries_.size(); }

 private:
  struct Entry {
    std::string bytes;
    uint64_t digest = 0;
    uint32_t refs = 0;
  };
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_ids_;
};

}  // namespace kvc

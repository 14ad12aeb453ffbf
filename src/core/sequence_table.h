// Sequences by caller-chosen 64-bit id: an open-addressing table (linear
// probing, backward-shift deletion), so the per-step lookups of a decode
// batch touch one cache line each and never allocate.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/sequence.h"

namespace kvc {

class SequenceTable {
 public:
  SequenceTable() { slots_.resize(64); }

  Sequence* find(uint64_t id) const {
    for (uint64_t i = home(id);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (!s.seq) return nullptr;
      if (s.id == id) return s.seq.get();
    }
  }

  // Warms the slot where find(id) starts.
  void prefetch(uint64_t id) const { __builtin_prefetch(&slots_[home(id)]); }

  // Makes room for one more entry (may allocate); call before insert().
  void reserve_one() {
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
  }
  // Inserts an id that is not present; reserve_one() must have been called.
  Sequence* insert(std::unique_ptr<Sequence> seq) {
    const uint64_t id = seq->id;
    uint64_t i = home(id);
    while (slots_[i].seq) i = (i + 1) & mask();
    slots_[i].id = id;
    slots_[i].seq = std::move(seq);
    ++size_;
    return slots_[i].seq.get();
  }
  // Removes id (present) and hands its sequence back, for reuse.
  std::unique_ptr<Sequence> erase(uint64_t id) {
    uint64_t i = home(id);
    while (slots_[i].id != id || !slots_[i].seq) i = (i + 1) & mask();
    std::unique_ptr<Sequence> gone = std::move(slots_[i].seq);
    // Shift back every entry of the run that no longer sits at its home.
    for (uint64_t j = (i + 1) & mask(); slots_[j].seq; j = (j + 1) & mask()) {
      const uint64_t h = home(slots_[j].id);
      const bool movable = i <= j ? (h <= i || h > j) : (h <= i && h > j);
      if (movable) {
        slots_[i] = std::move(slots_[j]);
        i = j;
      }
    }
    --size_;
    return gone;
  }

  uint64_t size() const { return size_; }

  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.seq) f(*s.seq);
  }

 private:
  struct Slot {
    uint64_t id = 0;
    std::unique_ptr<Sequence> seq;
  };
  uint64_t mask() const { return slots_.size() - 1; }
  uint64_t home(uint64_t id) const {
    uint64_t x = id + 0x9e3779b97f4a7c15ull;  // splitmix64 finalizer
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return (x ^ (x >> 31)) & mask();
  }
  void rehash(uint64_t n) {
    std::vector<Slot> old(n);
    old.swap(slots_);
    size_ = 0;
    for (Slot& s : old)
      if (s.seq) insert(std::move(s.seq));
  }

  std::vector<Slot> slots_;
  uint64_t size_ = 0;
};

}  // namespace kvc

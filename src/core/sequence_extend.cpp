// Growing sequences: extend one by any number of tokens, or a decode batch
// by one token each. Plan (checks, the block sets the new tokens and any
// copy on write of a shared tail need, whether the pools give them), then
// apply (the tier's preparation, page moves, copies, new blocks).
#include <algorithm>
#include <string>

#include "core/sequences.h"

namespace kvc {

namespace {

uint64_t blocks_for(uint64_t tokens, uint32_t T) { return (tokens + T - 1) / T; }

// The two lines of a sequence a decode step touches (sequence.h).
inline void prefetch_sequence(const Sequence* s) {
  __builtin_prefetch(s, 1);
  __builtin_prefetch(reinterpret_cast<const char*>(s) + 64, 1);
}

}  // namespace

bool Sequences::reserve_sets(Reservation& r, uint64_t sets) {
  r.need_sets(sets, layout_.pool_groups);
  if (residency_.have_blocks(r)) return true;
  // Blocks held by write-through jobs come back once the writer is done
  // (sequence_add.cpp): wait for it rather than refuse.
  if (stores_ == nullptr || !stores_->writes_pending()) return false;
  stores_->settle();
  return residency_.have_blocks(r);
}

bool Sequences::try_extend(uint64_t id, const int32_t* tokens, uint64_t n, void* stream) {
  if (stores_ != nullptr) stores_->prefetch_for_call();
  // Plan.
  Sequence& s = sequence(id);
  if (n == 0) return true;
  check_growth(s.length(), n, "num_tokens");
  const bool cow = needs_copy_on_write(s);
  const uint64_t new_blocks = blocks_for(s.length() + n, T_) - s.num_blocks();
  Reservation& r = reservation_;
  r.begin("extending", id, residency_.num_pools());
  if (!reserve_sets(r, new_blocks + (cow ? 1 : 0))) return false;
  grow(s.tokens, s.tokens.size() + n);
  reserve_blocks(s, s.num_blocks() + new_blocks);
  // Apply.
  tier_.prepare(r, stream);
  residency_.move_pages(r);
  if (cow) copy_on_write(s, stream);
  s.tokens.insert(s.tokens.end(), tokens, tokens + n);
  append_new_sets(s, new_blocks);
  return true;
}

Sequence* const* Sequences::claim_batch(const uint64_t* ids, size_t count) {
  const uint64_t epoch = next_batch_epoch();
  constexpr size_t kSlotAhead = 16, kSeqAhead = 8;  // as try_extend_batch
  batch_seqs_.resize(count);
  Sequence** seqs = batch_seqs_.data();
  for (size_t j = 0; j < std::min(count, kSlotAhead); ++j) seqs_.prefetch(ids[j]);
  for (size_t j = 0; j < std::min(count, kSeqAhead); ++j) {
    seqs[j] = seqs_.find(ids[j]);
    if (seqs[j] != nullptr) prefetch_sequence(seqs[j]);
  }
  for (size_t i = 0; i < count; ++i) {
    if (i + kSlotAhead < count) seqs_.prefetch(ids[i + kSlotAhead]);
    if (i + kSeqAhead < count) {
      Sequence* ahead = seqs_.find(ids[i + kSeqAhead]);
      seqs[i + kSeqAhead] = ahead;
      if (ahead != nullptr) prefetch_sequence(ahead);
    }
    claim_for_batch(seqs[i], ids, i, epoch);
  }
  return seqs;
}

bool Sequences::try_extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count,
                                 void* stream) {
  if (stores_ != nullptr) stores_->prefetch_for_call();
  // Plan. The lookups run ahead of the checks: table slots kSlotAhead ids
  // ahead, sequences (found, not yet claimed) kSeqAhead ahead, so that the
  // chain slot -> sequence -> token array costs no wait per sequence.
  // Errors are still raised in index order by claim_for_batch.
  const uint64_t epoch = next_batch_epoch();
  constexpr size_t kSlotAhead = 16, kSeqAhead = 8;
  batch_seqs_.resize(count);
  Sequence** seqs = batch_seqs_.data();
  batch_cow_.resize(std::max(batch_cow_.size(), count));
  for (size_t j = 0; j < std::min(count, kSlotAhead); ++j) seqs_.prefetch(ids[j]);
  for (size_t j = 0; j < std::min(count, kSeqAhead); ++j) {
    seqs[j] = seqs_.find(ids[j]);
    if (seqs[j] != nullptr) prefetch_sequence(seqs[j]);
  }
  uint64_t needed = 0;
  for (size_t i = 0; i < count; ++i) {
    if (i + kSlotAhead < count) seqs_.prefetch(ids[i + kSlotAhead]);
    if (i + kSeqAhead < count) {
      Sequence* ahead = seqs_.find(ids[i + kSeqAhead]);
      seqs[i + kSeqAhead] = ahead;
      if (ahead != nullptr) prefetch_sequence(ahead);
    }
    Sequence* s = &claim_for_batch(seqs[i], ids, i, epoch);
    if (s->length() >= kMaxSequenceTokens)  // the message is only built on failure
      check_length(s->length() + 1, ("ids[" + std::to_string(i) + "]").c_str());
    const bool cow = needs_copy_on_write(*s);
    batch_cow_[i] = cow;
    needed += (s->length() % T_ == 0 ? 1 : 0) + (cow ? 1 : 0);
    // Capacity only (no visible change), so it may happen before the checks end.
    grow(s->tokens, s->tokens.size() + 1);
    reserve_blocks(*s, s->num_blocks() + 1);
    // The line the token goes to, for the loop below.
    __builtin_prefetch(s->tokens.data() + s->tokens.size(), 1);
  }
  Reservation& r = reservation_;
  r.begin("this decode step", Reservation::kNoId, residency_.num_pools());
  if (!reserve_sets(r, needed)) return false;
  // Apply.
  tier_.prepare(r, stream);
  residency_.move_pages(r);
  for (size_t i = 0; i < count; ++i) {
    if (i + kSeqAhead < count) {
      const Sequence* ahead = seqs[i + kSeqAhead];
      __builtin_prefetch(ahead->tokens.data() + ahead->tokens.size(), 1);
    }
    Sequence& s = *seqs[i];
    if (batch_cow_[i] && needs_copy_on_write(s)) copy_on_write(s, stream);  // a sibling may have copied first
    const bool new_block = s.length() % T_ == 0;
    s.tokens.push_back(tokens[i]);
    if (new_block) append_new_set(s);
  }
  return true;
}

uint64_t Sequences::blocks_needed(uint64_t id, uint64_t n) const {
  const Sequence& s = sequence(id);
  if (n == 0) return 0;
  check_growth(s.length(), n, "num_tokens");
  return blocks_for(s.length() + n, T_) - s.num_blocks() + (needs_copy_on_write(s) ? 1 : 0);
}

bool Sequences::needs_copy_on_write(const Sequence& s) const {
  if (s.tail_private || s.length() % T_ == 0 || s.num_blocks() == 0) return false;
  // The tail is inside every window, so every group holds it; a windowed
  // block may sit in a node whose other blocks are not the sequence's.
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    const BlockInfo& tail = residency_.info(g, s.blocks[g].back());
    if (tail.ref > 1 || tail.node != kNoNode) return true;
  }
  return false;
}

void Sequences::copy_on_write(Sequence& s, void* stream) {
  const uint64_t b = s.num_blocks() - 1;
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) old_set_[g] = s.blocks[g][b];
  residency_.alloc_set(new_set_.data());  // the old tail is held, so never evicted here
  // The new block may be one an offer just left (StoreChain::offer).
  if (stores_ != nullptr) stores_->flush_offers();
  residency_.copy_set(old_set_.data(), new_set_.data(), uint32_t(s.length() % T_), stream);
  release_position(s, b);
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) s.blocks[g][b] = new_set_[g];
  s.tail_private = true;
}

void Sequences::append_new_set(Sequence& s) {
  residency_.alloc_set(new_set_.data());
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) s.blocks[g].push_back(new_set_[g]);
  s.nodes.push_back(kNoNode);
  s.tail_private = true;
}

void Sequences::append_new_sets(Sequence& s, uint64_t count) {
  if (!eviction_.can_evict_ahead()) {
    for (uint64_t i = 0; i < count; ++i) append_new_set(s);
    return;
  }
  // Within the capacity reserved by the caller: no allocation.
  const uint64_t first = s.num_blocks();
  for (auto& v : s.blocks) v.resize(first + count);
  s.nodes.resize(first + count, kNoNode);
  eviction_.alloc_sets_ahead(s.blocks, first, count);
  if (count != 0) s.tail_private = true;
}

}  // namespace kvc

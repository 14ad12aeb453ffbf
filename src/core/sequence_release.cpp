// What gives blocks back: rewind (speculative decoding), remove, windowed
// groups releasing blocks that left the window, and the pins; fork, which
// shares every block of a sequence with a new one.
#include <algorithm>
#include <string>

#include "core/sequences.h"

namespace kvc {

namespace {

uint64_t blocks_for(uint64_t tokens, uint32_t T) { return (tokens + T - 1) / T; }

}  // namespace

void Sequences::release_position(Sequence& s, uint64_t b) {
  const BlockRetention retention = s.retention_of_block(b, T_);
  const bool anchor = holds_anchor(s, b);
  eviction_.release_set(position(s, b), 1, retention);
  if (anchor) eviction_.release_anchor(s.nodes[b], retention);
}

void Sequences::release_out_of_window(Sequence& s) {
  for (uint32_t g : layout_.windowed) {
    const uint64_t end = std::min<uint64_t>(layout_.first_needed(g, s.committed), s.num_blocks());
    for (uint64_t b = s.window_begin[g]; b < end; ++b) {
      const uint32_t blk = s.blocks[g][b];
      s.blocks[g][b] = kNoBlock;
      if (blk == kNoBlock) continue;
      ++counters_.groups[g].released_blocks;
      eviction_.release_window_block(g, blk, s.retention_of_block(b, T_));
    }
    if (end > s.window_begin[g]) s.window_begin[g] = end;
  }
}

void Sequences::rewind(uint64_t id, uint64_t n) {
  // Plan: checks; the tokens a rebase takes back are reserved first.
  Sequence& s = sequence(id);
  if (n > s.length())
    invalid_argument("cannot rewind " + std::to_string(n) + " tokens: " + name(id) +
                     " has only " + std::to_string(s.length()));
  if (n == 0) return;
  const uint64_t new_len = s.length() - n;
  for (uint32_t g : layout_.windowed) {
    // The blocks a windowed group released are gone: the new last token
    // must still see its whole window.
    const uint64_t begin = s.window_begin[g];
    if (begin == 0) continue;
    const uint64_t shortest = begin * T_ + layout_.window[g] - 1;
    if (new_len < shortest)
      invalid_argument("cannot rewind " + std::to_string(n) + " tokens: " + name(id) +
                       " would be " + std::to_string(new_len) + " tokens long, but layer group " +
                       std::to_string(g) + " (window " + std::to_string(layout_.window[g]) +
                       ") has released the blocks before token " + std::to_string(begin * T_) +
                       ", so it can rewind at most " + std::to_string(s.length() - shortest) +
                       " tokens (rewind before committing rejected tokens)");
  }
  const uint64_t keep = blocks_for(new_len, T_);
  // Rewinding into the published blocks whose tokens only the tree keeps:
  // take the kept rows of the new tail back from its node.
  const bool rebase = new_len < s.token_base;
  const uint64_t base = new_len / T_ * T_;
  if (rebase) s.tokens.reserve(new_len - base);
  // Apply.
  if (rebase) {
    const int32_t* kept = new_len > base ? tree_.tokens(s.nodes[new_len / T_]) : nullptr;
    s.tokens.assign(kept, kept + (new_len - base));
    s.token_base = base;
  }
  while (s.num_blocks() > keep) {
    const uint64_t b = s.num_blocks() - 1;
    release_position(s, b);
    for (auto& v : s.blocks) v.pop_back();
    s.nodes.pop_back();
  }
  if (new_len % T_ != 0) {
    // The tail is no longer full: it is no longer the published block. A
    // tree block kept as the tail is copied before the next write.
    const uint64_t b = keep - 1;
    const uint32_t node = s.nodes[b];
    if (node != kNoNode) {
      if (holds_anchor(s, b)) {
        // Windowed blocks this sequence gave the node go back to it: it no
        // longer holds the node's anchor blocks. A pin or fork sharing such
        // a block keeps it as a block of no node (holds_alone() then keeps
        // it out of any new node until one holder is left).
        for (uint32_t g : layout_.windowed) {
          const uint32_t own = s.blocks[g][b];
          if (own == kNoBlock || tree_.block(node, g) != own) continue;
          index_.set_block(node, g, kNoBlock);
          residency_.set_node(g, own, kNoNode);
          if (EventLog* ev = index_.events())
            ev->removed(node, uint64_t(1) << g, tree_.node(node).tier);
        }
        eviction_.release_anchor(node, s.retention_of_block(b, T_));
      }
      s.nodes[b] = kNoNode;
    }
  }
  s.published = std::min<uint64_t>(s.published, new_len / T_);
  if (!rebase) s.tokens.resize(new_len - s.token_base);
  s.tail_private = false;  // the new tail may be a shared or published block
  s.committed = std::min(s.committed, new_len);
  s.cached = std::min(s.cached, new_len);
  for (uint64_t& c : s.slot_cursor) c = std::min(c, new_len);
}

void Sequences::fork(uint64_t parent, uint64_t child) {
  // Plan: checks, the copy and the table's room (every allocation).
  Sequence& p = sequence(parent);
  if (seqs_.find(child) != nullptr) fail(KVC_ERR_ALREADY_EXISTS, name(child) + " already exists");
  std::unique_ptr<Sequence> c = new_sequence(p.tokens.size());
  *c = p;  // copy-assigned: a recycled sequence's vectors keep their capacity
  c->id = child;
  c->batch_mark = 0;
  c->tail_private = false;
  seqs_.reserve_one();
  // Apply: the child holds every block and anchor the parent holds.
  p.tail_private = false;
  index_.ref_scope(c->scope);
  for (uint64_t b = 0; b < c->num_blocks(); ++b) {
    for (uint32_t g = 0; g < layout_.num_groups(); ++g)
      if (c->blocks[g][b] != kNoBlock) residency_.add_ref(g, c->blocks[g][b]);
    if (holds_anchor(*c, b)) eviction_.hold_anchor(c->nodes[b]);
  }
  seqs_.insert(std::move(c));
}

void Sequences::remove(uint64_t id) {
  Sequence& s = sequence(id);
  if (cfg_.block_reuse && cfg_.partial_reuse) publish_tail(s);
  // Deepest first, so a parent is always released after its children.
  // Releasing a position reads and writes its node (age, priority), its
  // record's block ids, the pool lines of its own blocks and of the node's
  // anchor block: fetched ahead, in two steps (the node's anchor block id
  // is read from its record, fetched kFar positions ahead, kNear ahead).
  constexpr uint64_t kNear = 8, kFar = 16;
  const uint32_t G = layout_.num_groups();
  const uint32_t ref = layout_.ref_group;
  const bool anchors = !layout_.anchors.empty();
  for (uint64_t b = s.num_blocks(); b > 0; --b) {
    if (b > kFar) {
      const uint32_t n = s.nodes[b - 1 - kFar];
      if (n != kNoNode) {
        tree_.prefetch_node(n);
        tree_.prefetch_blocks(n);
      }
    }
    if (b > kNear) {
      const uint64_t at = b - 1 - kNear;
      for (uint32_t g = 0; g < G; ++g) {
        const uint32_t blk = s.blocks[g][at];
        if (blk != kNoBlock) __builtin_prefetch(&residency_.info(g, blk), 1);
      }
      const uint32_t n = s.nodes[at];
      if (anchors && n != kNoNode) {
        const uint32_t blk = tree_.block(n, ref);
        if (blk != kNoBlock && blk != s.blocks[ref][at])
          __builtin_prefetch(&residency_.info(ref, blk), 1);
      }
    }
    release_position(s, b - 1);
  }
  index_.unref_scope(s.scope);
  recycle(seqs_.erase(id));
  // Victims deferred for their write-through jobs are not requeued here: a
  // remove evicts nothing, and reading the record writer's count would cost
  // it a line of the worker's; the next add that may evict, an extend's
  // eviction and make_room requeue them.
}

size_t Sequences::spare_for(uint64_t tokens) const {
  // The smallest that holds `tokens`, else the largest: big prompts keep
  // finding the big buffers earlier big prompts touched.
  size_t best = 0;
  for (size_t i = 1; i < spares_.size(); ++i) {
    const uint64_t cap = spares_[i]->tokens.capacity(), b = spares_[best]->tokens.capacity();
    const bool fits = cap >= tokens, best_fits = b >= tokens;
    if (fits ? !best_fits || cap < b : !best_fits && cap > b) best = i;
  }
  return best;
}

std::unique_ptr<Sequence> Sequences::new_sequence(uint64_t tokens) {
  if (spares_.empty()) return std::make_unique<Sequence>();
  const size_t best = spare_for(tokens);
  std::unique_ptr<Sequence> s = std::move(spares_[best]);
  spares_[best] = std::move(spares_.back());
  spares_.pop_back();
  return s;
}

void Sequences::grow_slow(std::vector<int32_t>& v, uint64_t n) {
  const size_t best = spares_.empty() ? 0 : spare_for(n);
  if (spares_.empty() || spares_[best]->tokens.capacity() < n) {
    v.reserve(std::max<uint64_t>(n, 2 * v.capacity()));
    return;
  }
  std::vector<int32_t>& spare = spares_[best]->tokens;  // empty (reset)
  spare.assign(v.begin(), v.end());                     // fits: no allocation
  v.swap(spare);
  spare.clear();
}

void Sequences::recycle(std::unique_ptr<Sequence> s) {
  if (spares_.size() >= kSpares) return;  // freed
  s->reset();
  spares_.push_back(std::move(s));
}

void Sequences::pin(uint64_t id) {
  // Plan: the published blocks, the ones that outlive the sequence in the
  // tree, a chain from the root, so a pin never holds a node without its
  // parent; the record is built (allocated) first.
  Sequence& s = sequence(id);
  if (pins_.count(id) != 0) fail(KVC_ERR_ALREADY_EXISTS, name(id) + " is already pinned");
  Pin pin;
  const uint32_t G = layout_.num_groups();
  pin.blocks.reserve(s.published * G);
  pin.retention.reserve(s.published);
  for (uint64_t b = 0; b < s.published; ++b) {
    for (uint32_t g = 0; g < G; ++g) pin.blocks.push_back(tree_.block(s.nodes[b], g));
    pin.retention.push_back(s.retention_of_block(b, T_));
  }
  pins_.emplace(id, std::move(pin));
  // Apply.
  for (uint64_t b = 0; b < s.published; ++b) eviction_.hold_node(s.nodes[b]);
}

void Sequences::unpin(uint64_t id) {
  auto it = pins_.find(id);
  if (it == pins_.end()) fail(KVC_ERR_NOT_FOUND, name(id) + " is not pinned");
  const Pin& p = it->second;
  const uint32_t G = layout_.num_groups();
  for (size_t e = p.retention.size(); e > 0; --e)
    eviction_.release_set(&p.blocks[(e - 1) * G], 1, p.retention[e - 1]);
  pins_.erase(it);
}

}  // namespace kvc

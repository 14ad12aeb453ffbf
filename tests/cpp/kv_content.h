// Test helpers for the host tier: a content oracle (the KV bytes of a token
// row are a function of (token, position, layer), written where the test
// "computes" them and compared bit for bit wherever they are reused, copied,
// offloaded or onboarded) and a Device double whose tier copies fail on
// demand after scribbling over their destinations.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu_device.h"
#include "core/cache.h"
#include "base/error.h"

namespace kvc {
namespace test {

inline uint8_t kv_byte(int32_t token, uint64_t pos, uint32_t layer, uint32_t kv, uint32_t head,
                       uint64_t i) {
  uint64_t x = (uint64_t(uint32_t(token)) * 0x9E3779B97F4A7C15ull) ^ (pos * 0xBF58476D1CE4E5B9ull) ^
               (uint64_t(layer) << 40) ^ (uint64_t(kv) << 36) ^ (uint64_t(head) << 24) ^ i;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return uint8_t(x);
}

// Calls f(ptr, bytes, layer, kv, head) for every contiguous head row of
// token row `row` of `block` in group `g` (primary or host pool memory).
template <class F>
void for_each_row_piece(const Cache& c, uint32_t g, unsigned char* block_base, uint32_t row, F&& f) {
  const LayerGroup& grp = c.grouping().groups[g];
  const uint64_t bytes = grp.geometry.row_bytes / (c.config().layout == KVC_LAYOUT_NHD ? grp.kv_heads : 1);
  for (uint32_t li = 0; li < grp.layers.size(); ++li)
    for (uint32_t k = 0; k < c.config().kv_factor; ++k)
      for (uint32_t h = 0; h < grp.kv_heads; ++h)
        f(block_base + li * grp.layer_stride + k * grp.kv_stride + row * grp.token_stride +
              h * grp.head_stride,
          bytes, grp.layers[li], k, h);
}

inline unsigned char* block_ptr(const Cache& c, uint32_t g, uint32_t block, bool host) {
  const uint32_t pool = c.grouping().groups[g].pool;
  return host ? c.host_pool(pool).block(block) : c.pool(pool).block(block);
}

// Writes the oracle's bytes for (token, pos) into row `row` of the block.
inline void write_row(const Cache& c, uint32_t g, uint32_t block, uint32_t row, int32_t token,
                      uint64_t pos) {
  for_each_row_piece(c, g, block_ptr(c, g, block, false), row,
                     [&](unsigned char* p, uint64_t n, uint32_t layer, uint32_t kv, uint32_t head) {
                       for (uint64_t i = 0; i < n; ++i) p[i] = kv_byte(token, pos, layer, kv, head, i);
                     });
}

// Empty when the row holds the oracle's bytes, else what differs.
inline std::string check_row(const Cache& c, uint32_t g, uint32_t block, bool host, uint32_t row,
                             int32_t token, uint64_t pos) {
  std::string bad;
  for_each_row_piece(c, g, block_ptr(c, g, block, host), row,
                     [&](unsigned char* p, uint64_t n, uint32_t layer, uint32_t kv, uint32_t head) {
                       for (uint64_t i = 0; i < n && bad.empty(); ++i)
                         if (p[i] != kv_byte(token, pos, layer, kv, head, i))
                           bad = std::string(host ? "host" : "primary") + " block " +
                                 std::to_string(block) + " of group " + std::to_string(g) +
                                 " row " + std::to_string(row) + " (token " +
                                 std::to_string(token) + " at " + std::to_string(pos) +
                                 ") differs at layer " + std::to_string(layer) + " byte " +
                                 std::to_string(i);
                     });
  return bad;
}

// Writes rows [from, to) of a sequence (every group).
inline void write_sequence(const Cache& c, const Sequence& s, uint64_t from, uint64_t to) {
  const uint32_t T = c.config().tokens_per_block;
  for (uint64_t pos = from; pos < to; ++pos)
    for (uint32_t g = 0; g < s.blocks.size(); ++g)
      if (s.blocks[g][pos / T] != kNoBlock)  // else released by a windowed group
        write_row(c, g, s.blocks[g][pos / T], uint32_t(pos % T), *s.token_at(pos), pos);
}

// Checks rows [from, to) of a sequence whose tokens before token_base are
// read from its tree nodes.
inline std::string check_sequence(const Cache& c, const Sequence& s, uint64_t from, uint64_t to) {
  const uint32_t T = c.config().tokens_per_block;
  const RadixTree& tree = c.manager().tree();
  for (uint64_t pos = from; pos < to; ++pos) {
    const int32_t tok = pos >= s.token_base ? *s.token_at(pos) : tree.tokens(s.nodes[pos / T])[pos % T];
    for (uint32_t g = 0; g < s.blocks.size(); ++g) {
      if (s.blocks[g][pos / T] == kNoBlock) continue;  // released by a windowed group
      std::string bad = check_row(c, g, s.blocks[g][pos / T], false, uint32_t(pos % T), tok, pos);
      if (!bad.empty()) return "sequence " + std::to_string(s.id) + ": " + bad;
    }
  }
  return {};
}

// Checks every live tree node's rows in its tier (primary or host).
inline std::string check_tree(const Cache& c) {
  const RadixTree& tree = c.manager().tree();
  const uint32_t T = c.config().tokens_per_block;
  for (uint32_t n = 1; n < tree.id_bound(); ++n) {
    const TreeNode& t = tree.node(n);
    if (!t.live) continue;
    uint64_t depth = 0;
    for (uint32_t p = t.parent; p != RadixTree::kRoot; p = tree.node(p).parent) ++depth;
    const bool host = c.manager().in_host_tier(n);
    for (uint32_t r = 0; r < t.num_tokens; ++r)
      for (uint32_t g = 0; g < tree.num_groups(); ++g) {
        if (tree.block(n, g) == kNoBlock) continue;  // a windowed slot evicted
        std::string bad = check_row(c, g, tree.block(n, g), host, r, tree.tokens(n)[r], depth * T + r);
        if (!bad.empty()) return "tree node " + std::to_string(n) + ": " + bad;
      }
  }
  return {};
}

// Faults for the real CPU backend through its fault hook (fault_hook.h):
// chosen tier copies or allocations fail, and allocations are counted.
class FaultPlan final : public FaultHook {
 public:
  // The n-th tier copy call from now fails (1: the next); 0 disarms.
  void fail_copy(uint32_t n) { copy_in_ = n; }
  // The n-th allocation (either kind) from now fails; 0 disarms.
  void fail_allocation(uint32_t n) { alloc_in_ = n; }
  uint64_t copies = 0;     // tier copy calls that went through
  int64_t live = 0;        // allocations not yet released
  uint64_t allocations = 0;

  bool fail(FaultSite site) override {
    if (site == FaultSite::kCopyTier) {
      if (copy_in_ != 0 && --copy_in_ == 0) return true;
      ++copies;
      return false;
    }
    return alloc_in_ != 0 && --alloc_in_ == 0;
  }
  void allocated(FaultSite, const void*) override { ++live, ++allocations; }
  void released(FaultSite, const void*) override { --live; }

 private:
  uint32_t copy_in_ = 0;
  uint32_t alloc_in_ = 0;
};

// A cache on the CPU backend with `faults` as its device's hook (`faults`
// must outlive it).
inline std::unique_ptr<Cache> faulty_cache(const CacheConfig& c, FaultPlan& faults) {
  auto dev = std::make_unique<CpuDevice>();
  dev->set_fault_hook(&faults);
  return std::make_unique<Cache>(c, std::move(dev));
}

}  // namespace test
}  // namespace kvc

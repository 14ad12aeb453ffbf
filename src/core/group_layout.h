// How a cache's layer groups map onto pools and windows, read by every
// owner of the core and fixed at creation: the pool each group draws from,
// the full-attention ("anchor") groups, which move together and keep a tree
// node alive, and the windowed groups, whose slots are evicted on their own
// (block_manager.h says why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/layer_groups.h"

namespace kvc {

struct GroupLayout {
  GroupLayout(const LayerGrouping& grouping, uint32_t tokens_per_block) : T(tokens_per_block) {
    pool_has_anchor.assign(grouping.pools.size(), 0);
    pool_windowed.resize(grouping.pools.size());
    for (const PoolShape& p : grouping.pools) pool_groups.push_back(uint32_t(p.groups.size()));
    for (uint32_t g = 0; g < grouping.groups.size(); ++g) {
      const LayerGroup& lg = grouping.groups[g];
      group_pool.push_back(lg.pool);
      window.push_back(lg.window);
      if (lg.window == 0) {
        if (anchors.empty()) ref_group = g;
        anchors.push_back(g);
        window_slot.push_back(-1);
        pool_has_anchor[lg.pool] = 1;
      } else {
        window_slot.push_back(int32_t(windowed.size()));
        windowed.push_back(g);
        pool_windowed[lg.pool].push_back(g);
      }
    }
  }

  uint32_t num_groups() const { return uint32_t(group_pool.size()); }
  size_t num_pools() const { return pool_groups.size(); }
  bool is_windowed(uint32_t g) const { return window_slot[g] >= 0; }
  // The first block position a windowed group needs when the first token
  // still to be computed is at `frontier` (it attends to the W tokens
  // ending at itself); 0 in a full group.
  uint64_t first_needed(uint32_t g, uint64_t frontier) const {
    const uint64_t w = window[g];
    return w == 0 || frontier + 1 <= w ? 0 : (frontier + 1 - w) / T;
  }

  uint32_t T;                          // tokens per block
  std::vector<uint32_t> group_pool;    // pool of each group
  std::vector<uint32_t> pool_groups;   // how many groups draw from each pool
  std::vector<uint32_t> window;        // per group, 0: full attention
  std::vector<int32_t> window_slot;    // per group: its index among the windowed groups, -1 if full
  std::vector<uint32_t> windowed;      // the windowed groups
  std::vector<uint32_t> anchors;       // the full groups
  std::vector<uint8_t> pool_has_anchor;
  std::vector<std::vector<uint32_t>> pool_windowed;  // windowed groups per pool
  uint32_t ref_group = 0;              // first full group (0 if none)
};

}  // namespace kvc

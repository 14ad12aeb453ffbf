// What the prefix index asks of the state snapshots (state_snapshots.h) of
// a cache with state resources: whether a tree node has one (a prompt's
// reuse ends at the deepest node that does), and that a node is leaving
// the tree (its snapshot goes with it).
#pragma once

#include <cstdint>

namespace kvc {

class SnapshotGate {
 public:
  virtual bool has(uint32_t node) const = 0;
  virtual void dropped(uint32_t node) = 0;

 protected:
  ~SnapshotGate() = default;
};

}  // namespace kvc

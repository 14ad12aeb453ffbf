#include "core/tier.h"

#include <string>

#include "base/error.h"
#include "core/radix_tree.h"

namespace kvc {

void NoTier::check() const {
  for (uint32_t n = 0; n < tree_.id_bound(); ++n)
    if (tree_.node(n).live && tree_.node(n).tier != kPrimaryTier)
      fail(KVC_ERR_INTERNAL, "cache invariant broken (host tier): tree node " + std::to_string(n) +
                                 " is in a host tier this cache does not have");
}

}  // namespace kvc

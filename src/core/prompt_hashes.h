// kvc_block_hashes(): the portable hashes (portable_hash.h) a cache built
// from `config` would give the full blocks of a prompt, computed from the
// config alone, so a router in another process names blocks as engines do.
#pragma once

#include <cstdint>

#include "core/cache_config.h"
#include "core/sequences.h"

namespace kvc {

// n / tokens_per_block hashes into out. Throws Error(KVC_ERR_INVALID_ARGUMENT)
// for options an add would refuse (a bad extra key, a priority > 100, ...).
void prompt_block_hashes(const CacheConfig& config, const int32_t* tokens, uint64_t n,
                         const SequenceOptions& options, uint64_t* out);

}  // namespace kvc

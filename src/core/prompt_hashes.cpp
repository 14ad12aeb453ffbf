#include "core/prompt_hashes.h"

#include <vector>

#include "core/block_key.h"
#include "core/portable_hash.h"

namespace kvc {

void prompt_block_hashes(const CacheConfig& config, const int32_t* tokens, uint64_t n,
                         const SequenceOptions& options, uint64_t* out) {
  Sequences::check_options(options);
  std::vector<ExtraKey> extras = options.extra_keys;
  sort_extra_keys(extras);
  const std::string scope =
      encode_scope(options.has_salt, options.salt, options.has_lora, options.lora_id);
  PortableHasher(config.event_hash_seed).prompt(tokens, n, config.tokens_per_block, scope, extras, out);
}

}  // namespace kvc

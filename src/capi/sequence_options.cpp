#include "capi/sequence_options.h"

#include <string>

#include "capi/cache_access.h"

namespace kvc {
namespace capi {

SequenceOptions options_of(const kvc_sequence_options_t* in) {
  kvc::SequenceOptions o;
  if (in == nullptr) return o;
  kvc_sequence_options_t defaults = KVC_SEQUENCE_OPTIONS_INIT;
  const kvc_sequence_options_t v = kvc::capi::read_sized(in, defaults, "options");
  o.prompt_priority = v.prompt_priority;
  o.decode_priority = v.decode_priority;
  o.has_lora = v.has_lora;
  o.lora_id = v.lora_id;
  o.has_salt = v.salt != nullptr;
  if (v.salt == nullptr && v.salt_size > 0)
    kvc::invalid_argument("options->salt must not be NULL when options->salt_size is " +
                          std::to_string(v.salt_size));
  if (o.has_salt) o.salt.assign(static_cast<const char*>(v.salt), v.salt_size);
  require_array(v.extra_keys, v.num_extra_keys, "options->extra_keys", "options->num_extra_keys");
  for (size_t i = 0; i < v.num_extra_keys; ++i) {
    const kvc_extra_key_t& k = v.extra_keys[i];
    if (k.data == nullptr && k.size > 0)
      kvc::invalid_argument("options->extra_keys[" + std::to_string(i) +
                            "].data must not be NULL when its size is " + std::to_string(k.size));
    kvc::ExtraKey e;
    e.offset = k.offset;
    e.length = k.length;
    if (k.size > 0) e.data.assign(static_cast<const char*>(k.data), k.size);
    o.extra_keys.push_back(std::move(e));
  }
  require_array(v.retention_ranges, v.num_retention_ranges, "options->retention_ranges",
                "options->num_retention_ranges");
  for (size_t i = 0; i < v.num_retention_ranges; ++i) {
    const kvc_retention_range_t& r = v.retention_ranges[i];
    if (r.reserved != 0)  // kept zero so a later version can give it a meaning
      kvc::invalid_argument("options->retention_ranges[" + std::to_string(i) +
                            "].reserved must be 0, got " + std::to_string(r.reserved));
    kvc::RetentionRange e;
    e.start = r.start;
    e.end = r.end;
    e.priority = r.priority;
    e.duration_ms = r.duration_ms;
    o.retention_ranges.push_back(e);
  }
  o.decode_duration_ms = v.decode_duration_ms;
  return o;
}

}  // namespace capi
}  // namespace kvc

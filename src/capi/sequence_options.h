// kvc_sequence_options_t read into the core's SequenceOptions (shared by
// the sequence and event shims).
#pragma once

#include "core/sequences.h"
#include "kvcache/sequence.h"

namespace kvc {
namespace capi {

// NULL: the defaults. Throws Error(KVC_ERR_INVALID_ARGUMENT) naming the
// field at fault.
SequenceOptions options_of(const kvc_sequence_options_t* in);

}  // namespace capi
}  // namespace kvc

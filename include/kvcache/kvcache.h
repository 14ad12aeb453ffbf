/**
 * @file kvcache.h
 * @brief Umbrella header: include this one. It pulls in every module.
 *
 * kvcache is the KV-cache system of an LLM inference engine behind a C ABI.
 * Conventions (see each module for details):
 *  - every fallible call returns kvc_status_t (KVC_OK == 0, errors < 0) and
 *    on failure changes nothing; kvc_last_error_message() says why;
 *  - `kvc_x_create(&out, ...)` / `kvc_x_destroy(x)` pairs, destroy accepts
 *    NULL; memory the library allocates, the library frees;
 *  - transparent structs begin with `uint32_t struct_size`; initialise them
 *    with their `kvc_x_init()` or `KVC_X_INIT`;
 *  - threading: see common.h. Streams are opaque `void *` (a cudaStream_t
 *    cast); device memory is `void *`.
 * Modules: config.h (the config object), cache.h (create, destroy,
 * describe, layer views), sequence.h (sequences, and the probe and the
 * retention clock that go with them), batch.h (per-step tables for a
 * batch), stats.h (statistics, reset, invariant check), kernels.h (store,
 * decode attention, block copies).
 */
#ifndef KVCACHE_KVCACHE_H
#define KVCACHE_KVCACHE_H

#include "kvcache/common.h"
#include "kvcache/version.h"
#include "kvcache/config.h"
#include "kvcache/cache.h"
#include "kvcache/sequence.h"
#include "kvcache/batch.h"
#include "kvcache/stats.h"
#include "kvcache/kernels.h"
#include "kvcache/stateful.h"
#include "kvcache/events.h"
#include "kvcache/tiers.h"
#include "kvcache/remote_tier.h"
#include "kvcache/transfer.h"
#include "kvcache/state.h"
#include "kvcache/kv_resource.h"

#endif /* KVCACHE_KVCACHE_H */

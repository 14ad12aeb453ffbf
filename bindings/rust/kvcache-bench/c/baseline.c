/* The C side of the Rust overhead benchmark: the same calls as the Rust
 * loops, timed in C the way a C caller makes them (initializer macros, the
 * status checked, the message pointer read on failure). Each function
 * returns nanoseconds per call, or -1 if a call did not behave as expected. */
#define _POSIX_C_SOURCE 199309L
#include <kvcache/kvcache.h>

#include <time.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Keeps the results observable. */
volatile uint64_t kvcb_sink;

double kvcb_c_describe(const kvc_cache_t *cache, uint64_t iters) {
  uint64_t acc = 0;
  const double t0 = now_ns();
  for (uint64_t i = 0; i < iters; ++i) {
    kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
    if (kvc_cache_describe(cache, &d) != KVC_OK) return -1;
    acc += d.num_blocks;
  }
  const double t1 = now_ns();
  kvcb_sink = acc;
  return (t1 - t0) / (double)iters;
}

double kvcb_c_sequence_describe(const kvc_cache_t *cache, uint64_t id, uint64_t iters) {
  uint64_t acc = 0;
  const double t0 = now_ns();
  for (uint64_t i = 0; i < iters; ++i) {
    kvc_sequence_desc_t d = KVC_SEQUENCE_DESC_INIT;
    if (kvc_sequence_describe(cache, id, &d) != KVC_OK) return -1;
    acc += d.num_tokens;
  }
  const double t1 = now_ns();
  kvcb_sink = acc;
  return (t1 - t0) / (double)iters;
}

double kvcb_c_not_found(const kvc_cache_t *cache, uint64_t id, uint64_t iters) {
  uint64_t acc = 0;
  const double t0 = now_ns();
  for (uint64_t i = 0; i < iters; ++i) {
    kvc_sequence_desc_t d = KVC_SEQUENCE_DESC_INIT;
    if (kvc_sequence_describe(cache, id, &d) != KVC_ERR_NOT_FOUND) return -1;
    acc += (uint64_t)(unsigned char)kvc_last_error_message()[0];
  }
  const double t1 = now_ns();
  kvcb_sink = acc;
  return (t1 - t0) / (double)iters;
}

double kvcb_c_probe(const kvc_cache_t *cache, const int32_t *tokens, size_t n, uint64_t iters) {
  uint64_t acc = 0;
  const double t0 = now_ns();
  for (uint64_t i = 0; i < iters; ++i) {
    uint64_t cached = 0;
    const kvc_sequence_options_t options = KVC_SEQUENCE_OPTIONS_INIT;
    if (kvc_cache_probe(cache, tokens, n, &options, &cached) != KVC_OK) return -1;
    acc += cached;
  }
  const double t1 = now_ns();
  kvcb_sink = acc;
  return (t1 - t0) / (double)iters;
}

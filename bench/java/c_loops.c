/* The C side of the Java overhead benchmark (bench/java/JavaOverhead.java):
 * each function runs one kvcache call `iters` times in a loop in C, inside
 * one JNI call, and returns the nanoseconds it took. Java calls these and
 * its own loops over the same calls in the same process, so the difference
 * per call is the binding's overhead. Not part of the library. */
#include <jni.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "kvcache/kvcache.h"

static volatile uint64_t sink;

static jlong now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (jlong)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

JNIEXPORT jlong JNICALL Java_org_kvcache_JavaOverhead_cVersion(JNIEnv *env, jclass cls,
                                                               jlong iters) {
  (void)env;
  (void)cls;
  uint64_t acc = 0;
  jlong t0 = now_ns();
  for (jlong i = 0; i < iters; i++) acc += kvc_version();
  jlong t1 = now_ns();
  sink = acc;
  return t1 - t0;
}

JNIEXPORT jlong JNICALL Java_org_kvcache_JavaOverhead_cGetNumLayers(JNIEnv *env, jclass cls,
                                                                    jlong config, jlong iters) {
  (void)env;
  (void)cls;
  const kvc_config_t *c = (const kvc_config_t *)(intptr_t)config;
  uint64_t acc = 0;
  jlong t0 = now_ns();
  for (jlong i = 0; i < iters; i++) {
    uint32_t n = 0;
    if (kvc_config_get_num_layers(c, &n) != KVC_OK) return -1;
    acc += n;
  }
  jlong t1 = now_ns();
  sink = acc;
  return t1 - t0;
}

JNIEXPORT jlong JNICALL Java_org_kvcache_JavaOverhead_cBlocksNeeded(JNIEnv *env, jclass cls,
                                                                    jlong cache, jlong id,
                                                                    jlong iters) {
  (void)env;
  (void)cls;
  const kvc_cache_t *c = (const kvc_cache_t *)(intptr_t)cache;
  uint64_t acc = 0;
  jlong t0 = now_ns();
  for (jlong i = 0; i < iters; i++) {
    uint64_t n = 0;
    if (kvc_sequence_blocks_needed(c, (uint64_t)id, 100, &n) != KVC_OK) return -1;
    acc += n;
  }
  jlong t1 = now_ns();
  sink = acc;
  return t1 - t0;
}

JNIEXPORT jlong JNICALL Java_org_kvcache_JavaOverhead_cGetStats(JNIEnv *env, jclass cls,
                                                                jlong cache, jlong iters) {
  (void)env;
  (void)cls;
  const kvc_cache_t *c = (const kvc_cache_t *)(intptr_t)cache;
  uint64_t acc = 0;
  jlong t0 = now_ns();
  for (jlong i = 0; i < iters; i++) {
    kvc_cache_stats_t s;
    kvc_cache_stats_init(&s);
    if (kvc_cache_get_stats(c, &s) != KVC_OK) return -1;
    acc += s.free_blocks;
  }
  jlong t1 = now_ns();
  sink = acc;
  return t1 - t0;
}

JNIEXPORT jlong JNICALL Java_org_kvcache_JavaOverhead_cSequenceLengths(
    JNIEnv *env, jclass cls, jlong cache, jlong ids, jlong count, jlong lengths, jlong iters) {
  (void)env;
  (void)cls;
  const kvc_cache_t *c = (const kvc_cache_t *)(intptr_t)cache;
  const uint64_t *id = (const uint64_t *)(intptr_t)ids;
  int32_t *out = (int32_t *)(intptr_t)lengths;
  uint64_t acc = 0;
  jlong t0 = now_ns();
  for (jlong i = 0; i < iters; i++) {
    if (kvc_batch_sequence_lengths(c, id, (size_t)count, out) != KVC_OK) return -1;
    acc += (uint64_t)out[0];
  }
  jlong t1 = now_ns();
  sink = acc;
  return t1 - t0;
}

/* The error path: a call on an unknown id, with the message read as the
 * binding reads it. */
JNIEXPORT jlong JNICALL Java_org_kvcache_JavaOverhead_cErrorPath(JNIEnv *env, jclass cls,
                                                                 jlong cache, jlong iters) {
  (void)env;
  (void)cls;
  kvc_cache_t *c = (kvc_cache_t *)(intptr_t)cache;
  uint64_t acc = 0;
  jlong t0 = now_ns();
  for (jlong i = 0; i < iters; i++) {
    if (kvc_sequence_remove(c, UINT64_C(0xdead)) != KVC_ERR_NOT_FOUND) return -1;
    acc += strlen(kvc_last_error_message());
  }
  jlong t1 = now_ns();
  sink = acc;
  return t1 - t0;
}

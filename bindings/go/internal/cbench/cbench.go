// Package cbench times kvcache calls in C loops, for the Go binding's
// overhead benchmark (overhead_test.go): the same call the benchmark makes
// through Go, with no Go in the loop. Each function runs n calls in one cgo
// call and returns the CPU time of the calling thread they took
// (CLOCK_THREAD_CPUTIME_ID, so that time the thread spends descheduled on a
// shared machine is not counted). ThreadCPUNanos reads the same clock for
// the Go loops.
package cbench

/*
#cgo pkg-config: kvcache
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <kvcache/kvcache.h>

static uint64_t cbench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t cbench_sink;

static uint64_t cbench_version(uint64_t n) {
  uint64_t t0 = cbench_now();
  for (uint64_t i = 0; i < n; i++) cbench_sink += kvc_version();
  return cbench_now() - t0;
}

static uint64_t cbench_config_get_num_layers(uintptr_t config, uint64_t n) {
  const kvc_config_t *c = (const kvc_config_t *)config;
  uint64_t t0 = cbench_now();
  for (uint64_t i = 0; i < n; i++) {
    uint32_t v = 0;
    if (kvc_config_get_num_layers(c, &v) != KVC_OK) return 0;
    cbench_sink += v;
  }
  return cbench_now() - t0;
}

static uint64_t cbench_blocks_needed(uintptr_t cache, uint64_t id, uint64_t n) {
  const kvc_cache_t *c = (const kvc_cache_t *)cache;
  uint64_t t0 = cbench_now();
  for (uint64_t i = 0; i < n; i++) {
    uint64_t v = 0;
    if (kvc_sequence_blocks_needed(c, id, 1, &v) != KVC_OK) return 0;
    cbench_sink += v;
  }
  return cbench_now() - t0;
}

// A failing call and what a C caller does to report it: read the message.
static uint64_t cbench_blocks_needed_error(uintptr_t cache, uint64_t id, uint64_t n) {
  const kvc_cache_t *c = (const kvc_cache_t *)cache;
  uint64_t t0 = cbench_now();
  for (uint64_t i = 0; i < n; i++) {
    uint64_t v = 0;
    kvc_status_t s = kvc_sequence_blocks_needed(c, id, 1, &v);
    if (s == KVC_OK) return 0;
    cbench_sink += strlen(kvc_last_error_message()) + (uint64_t)(-s);
  }
  return cbench_now() - t0;
}

// Calls that fill a struct, as a C caller makes them: init, then the call.
static uint64_t cbench_get_stats(uintptr_t cache, uint64_t n) {
  const kvc_cache_t *c = (const kvc_cache_t *)cache;
  uint64_t t0 = cbench_now();
  for (uint64_t i = 0; i < n; i++) {
    kvc_cache_stats_t s;
    kvc_cache_stats_init(&s);
    if (kvc_cache_get_stats(c, &s) != KVC_OK) return 0;
    cbench_sink += s.num_blocks;
  }
  return cbench_now() - t0;
}

static uint64_t cbench_describe(uintptr_t cache, uint64_t n) {
  const kvc_cache_t *c = (const kvc_cache_t *)cache;
  uint64_t t0 = cbench_now();
  for (uint64_t i = 0; i < n; i++) {
    kvc_cache_desc_t d;
    kvc_cache_desc_init(&d);
    if (kvc_cache_describe(c, &d) != KVC_OK) return 0;
    cbench_sink += d.num_blocks;
  }
  return cbench_now() - t0;
}

static uint64_t cbench_layer_view(uintptr_t cache, uint64_t n) {
  const kvc_cache_t *c = (const kvc_cache_t *)cache;
  uint64_t t0 = cbench_now();
  for (uint64_t i = 0; i < n; i++) {
    kvc_layer_view_t v;
    kvc_layer_view_init(&v);
    if (kvc_cache_layer_view(c, 1, &v) != KVC_OK) return 0;
    cbench_sink += v.block_stride;
  }
  return cbench_now() - t0;
}

static uint64_t cbench_sequence_describe(uintptr_t cache, uint64_t id, uint64_t n) {
  const kvc_cache_t *c = (const kvc_cache_t *)cache;
  uint64_t t0 = cbench_now();
  for (uint64_t i = 0; i < n; i++) {
    kvc_sequence_desc_t d;
    kvc_sequence_desc_init(&d);
    if (kvc_sequence_describe(c, id, &d) != KVC_OK) return 0;
    cbench_sink += d.num_tokens;
  }
  return cbench_now() - t0;
}

// A padded block table of num_ids sequences into a caller buffer.
static uint64_t cbench_block_table(uintptr_t cache, const uint64_t *ids, uint64_t num_ids,
                                   int32_t *table, uint64_t stride, uint64_t n) {
  const kvc_cache_t *c = (const kvc_cache_t *)cache;
  uint64_t t0 = cbench_now();
  for (uint64_t i = 0; i < n; i++) {
    size_t needed = 0;
    if (kvc_batch_block_table(c, 0, ids, num_ids, table, stride, -1, &needed) != KVC_OK) return 0;
    cbench_sink += needed;
  }
  return cbench_now() - t0;
}
*/
import "C"

import "unsafe"

// ThreadCPUNanos is the CPU time of the calling OS thread, in nanoseconds.
// Call it from a goroutine locked to its thread (runtime.LockOSThread).
func ThreadCPUNanos() uint64 { return uint64(C.cbench_now()) }

// Version times n calls of kvc_version().
func Version(n uint64) uint64 { return uint64(C.cbench_version(C.uint64_t(n))) }

// ConfigGetNumLayers times n calls of kvc_config_get_num_layers(config).
func ConfigGetNumLayers(config uintptr, n uint64) uint64 {
	return uint64(C.cbench_config_get_num_layers(C.uintptr_t(config), C.uint64_t(n)))
}

// BlocksNeeded times n calls of kvc_sequence_blocks_needed(cache, id, 1).
func BlocksNeeded(cache uintptr, id, n uint64) uint64 {
	return uint64(C.cbench_blocks_needed(C.uintptr_t(cache), C.uint64_t(id), C.uint64_t(n)))
}

// BlocksNeededError times n failing calls of kvc_sequence_blocks_needed for
// an unknown id, each followed by reading kvc_last_error_message().
func BlocksNeededError(cache uintptr, unknownID, n uint64) uint64 {
	return uint64(C.cbench_blocks_needed_error(C.uintptr_t(cache), C.uint64_t(unknownID), C.uint64_t(n)))
}

// GetStats times n calls of kvc_cache_get_stats (with kvc_cache_stats_init).
func GetStats(cache uintptr, n uint64) uint64 {
	return uint64(C.cbench_get_stats(C.uintptr_t(cache), C.uint64_t(n)))
}

// Describe times n calls of kvc_cache_describe (with kvc_cache_desc_init).
func Describe(cache uintptr, n uint64) uint64 {
	return uint64(C.cbench_describe(C.uintptr_t(cache), C.uint64_t(n)))
}

// LayerView times n calls of kvc_cache_layer_view(cache, 1).
func LayerView(cache uintptr, n uint64) uint64 {
	return uint64(C.cbench_layer_view(C.uintptr_t(cache), C.uint64_t(n)))
}

// SequenceDescribe times n calls of kvc_sequence_describe(cache, id).
func SequenceDescribe(cache uintptr, id, n uint64) uint64 {
	return uint64(C.cbench_sequence_describe(C.uintptr_t(cache), C.uint64_t(id), C.uint64_t(n)))
}

// BlockTable times n calls of kvc_batch_block_table for group 0 of the
// sequences ids into a C buffer of len(ids) rows of stride entries.
func BlockTable(cache uintptr, ids []uint64, stride, n uint64) uint64 {
	cids := (*C.uint64_t)(C.malloc(C.size_t(8 * len(ids))))
	defer C.free(unsafe.Pointer(cids))
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(cids)), len(ids)), ids)
	table := (*C.int32_t)(C.malloc(C.size_t(4 * uint64(len(ids)) * stride)))
	defer C.free(unsafe.Pointer(table))
	return uint64(C.cbench_block_table(C.uintptr_t(cache), cids, C.uint64_t(len(ids)), table,
		C.uint64_t(stride), C.uint64_t(n)))
}

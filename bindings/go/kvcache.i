/* SWIG interface of the low-level Go layer (package kvc).
 *
 * regenerate.sh runs SWIG 4.1 on this file:
 *   swig -go -cgo -intgosize 64 -package kvc -module kvc ...
 * and writes kvc/kvc.go and kvc/kvc_wrap.c, which are committed: Go users
 * need no SWIG. The generated layer mirrors the C API one to one (function
 * Kvc_config_create is kvc_config_create); the package kvcache on top of it
 * is the one to use.
 *
 * Mapping rules (the same for every function, so a new C function needs no
 * new line here unless its header is new or a struct gains a typed pointer
 * member, see KVCGO_ADDRESS_MEMBER):
 *  - Fixed-width integers keep their width: int32_t -> int32, uint64_t ->
 *    uint64, size_t -> uint64; bool -> bool; double -> float64.
 *  - A pointer to a scalar (an out parameter or an input array) is a Go
 *    pointer to its first element: uint64_t * -> *uint64. The callee may
 *    read or write as many elements as the C contract says; callers pass
 *    &slice[0]. Go memory passed this way is only borrowed for the call
 *    (cgo's rule), which is what every such C parameter promises.
 *  - void * (device memory, streams, pool bases) is a uintptr address;
 *    it never carries Go memory.
 *  - Opaque handles are typed addresses: kvc_config_t * -> Config,
 *    kvc_cache_t * -> Cache; kvc_x_t ** (a create's out) -> *Config, *Cache.
 *  - Transparent structs (descriptors, options, args, stats) are SWIG
 *    classes in C memory: NewKvc_cache_desc_t() ... DeleteKvc_cache_desc_t().
 *    Their pointer fields therefore hold C or device memory only;
 *    kvcgo_buffer_new below copies Go bytes into C memory for them.
 *  - Every function returning kvc_status_t returns a Go error instead: nil
 *    for KVC_OK, else *Error{Status, Message}. The message is copied out of
 *    the thread-local kvc_last_error_message() inside the same C call that
 *    failed (a goroutine may run on another OS thread at its next cgo
 *    call), so kvc_last_error_message itself is not exposed.
 */
%module kvc

%{
#include <stdlib.h>
#include <string.h>
#include <kvcache/kvcache.h>

/* The casts SWIG writes assume LP64 (see the typedefs below). */
_Static_assert(sizeof(long) == 8 && sizeof(void *) == 8,
               "the committed Go wrapper assumes an LP64 platform");

/* The status of a kvcache call as a Go string: empty for KVC_OK; else a tag
 * byte 'M', the status as 4 little-endian bytes and the message of
 * kvc_last_error_message() read now, on the thread that failed, in memory
 * the Go side frees. If that allocation fails: the tag 'O' and -status
 * zero bytes of a read-only buffer (no message; statuses below -255 become
 * KVC_ERR_INTERNAL), so nothing is shared between threads. */
static _gostring_ kvcgo_capture(kvc_status_t status) {
  static const char no_memory[256] = {'O'};
  _gostring_ r;
  r.p = NULL;
  r.n = 0;
  if (status == KVC_OK) return r;
  const char *msg = kvc_last_error_message();
  size_t n = strlen(msg);
  uint32_t u = (uint32_t)status;
  char *p = (char *)malloc(5 + n);
  if (p == NULL) {
    int32_t minus = status < 0 && status >= -255 ? -status : -KVC_ERR_INTERNAL;
    r.p = (char *)no_memory;
    r.n = (intgo)(1 + minus);
    return r;
  }
  p[0] = 'M';
  p[1] = (char)(u & 0xff);
  p[2] = (char)((u >> 8) & 0xff);
  p[3] = (char)((u >> 16) & 0xff);
  p[4] = (char)((u >> 24) & 0xff);
  memcpy(p + 5, msg, n);
  r.p = p;
  r.n = (intgo)(5 + n);
  return r;
}
%}

/* kvc_status_t results: captured status and message, an error in Go. */
%typemap(gotype) kvc_status_t "error"
%typemap(imtype) kvc_status_t "string"
%typemap(out) kvc_status_t %{ $result = kvcgo_capture($1); %}
%typemap(goout) kvc_status_t %{ $result = statusError($1) %}
/* ... but a status passed in (kvc_status_string) is a plain int32. */
%typemap(gotype) kvc_status_t status "int32"
%typemap(imtype) kvc_status_t status "int32"
%typemap(in) kvc_status_t status %{ $1 = (kvc_status_t)$input; %}

%insert(go_wrapper) %{
// Error is a failed kvcache call: its status (a KVC_ERR_* value) and the
// message kvc_last_error_message() held inside that same call.
type Error struct {
	Status  int32
	Message string
}

func (e *Error) Error() string {
	return Kvc_status_string(e.Status) + ": " + e.Message
}

type capturedString struct {
	p uintptr
	n int
}

// statusError decodes what kvcgo_capture returned, copying it out of C
// memory and freeing that.
func statusError(s string) error {
	if len(s) == 0 {
		return nil
	}
	b := []byte(s)
	if b[0] != 'M' { // 'O': the message could not be copied
		return &Error{Status: -int32(len(b) - 1), Message: "(out of memory copying the error message)"}
	}
	Swig_free((*capturedString)(unsafe.Pointer(&s)).p)
	status := int32(uint32(b[1]) | uint32(b[2])<<8 | uint32(b[3])<<16 | uint32(b[4])<<24)
	return &Error{Status: status, Message: string(b[5:])}
}
%}

/* SWIG's parser needs to know the fixed-width types; the C compiler uses
 * <stdint.h>. SWIG writes the resolved types into casts, so they are the
 * LP64 ones (64-bit Linux, where <stdint.h> has uint64_t == unsigned long). */
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
typedef unsigned long uintptr_t;
#define KVC_API

%define KVCGO_SCALAR(CTYPE, GOTYPE)
%typemap(gotype) CTYPE, const CTYPE "GOTYPE"
%typemap(imtype) CTYPE, const CTYPE "GOTYPE"
%typemap(in) CTYPE, const CTYPE %{ $1 = ($1_ltype)$input; %}
%typemap(out) CTYPE, const CTYPE %{ $result = $1; %}
%typemap(goout) CTYPE, const CTYPE ""
%typemap(gotype) CTYPE *, const CTYPE * "*GOTYPE"
%typemap(imtype) CTYPE *, const CTYPE * "*GOTYPE"
%typemap(in) CTYPE *, const CTYPE * %{ $1 = ($1_ltype)$input; %}
%typemap(goout) CTYPE *, const CTYPE * ""
%enddef
KVCGO_SCALAR(int8_t, int8)
KVCGO_SCALAR(uint8_t, byte)
KVCGO_SCALAR(int16_t, int16)
KVCGO_SCALAR(uint16_t, uint16)
KVCGO_SCALAR(int32_t, int32)
KVCGO_SCALAR(uint32_t, uint32)
KVCGO_SCALAR(int64_t, int64)
KVCGO_SCALAR(uint64_t, uint64)
KVCGO_SCALAR(size_t, uint64)
KVCGO_SCALAR(uintptr_t, uintptr)
KVCGO_SCALAR(bool, bool)
KVCGO_SCALAR(float, float32)
KVCGO_SCALAR(double, float64)

/* Pointer members of the transparent structs are addresses, never Go
 * pointers: the structs live in C memory, where cgo forbids storing Go
 * pointers. TestStructSettersTakeNoGoPointer fails when a header adds a
 * pointer member that is missing here (void * members are uintptr
 * already). SWIG matches these typemaps by type and name (a STRUCT::NAME
 * qualifier is not honoured for members), so a function parameter of the
 * same type and name would become a uintptr too; none exists, and package
 * kvcache would not compile against one. */
%define KVCGO_ADDRESS_MEMBER(CTYPE, NAME)
%typemap(gotype) CTYPE NAME "uintptr"
%typemap(imtype) CTYPE NAME "uintptr"
%typemap(in) CTYPE NAME %{ $1 = ($1_ltype)$input; %}
%typemap(out) CTYPE NAME %{ $result = $1; %}
%typemap(goout) CTYPE NAME ""
%enddef
KVCGO_ADDRESS_MEMBER(const int64_t *, slot_mapping)   /* kvc_store_args_t */
KVCGO_ADDRESS_MEMBER(const int32_t *, seq_lens)       /* kvc_decode_args_t */
KVCGO_ADDRESS_MEMBER(const int32_t *, block_table)    /* kvc_decode_args_t */
KVCGO_ADDRESS_MEMBER(const int32_t *, indptr)         /* kvc_decode_args_t */
KVCGO_ADDRESS_MEMBER(const uint32_t *, row_tokens)    /* kvc_stateful_append_args_t */
KVCGO_ADDRESS_MEMBER(const int32_t *, lengths)        /* kvc_stateful_view_t */
KVCGO_ADDRESS_MEMBER(const int32_t *, beam_table)     /* kvc_stateful_view_t */
KVCGO_ADDRESS_MEMBER(const int32_t *, qo_indptr)      /* kvc_prefill_args_t */
KVCGO_ADDRESS_MEMBER(const int32_t *, kv_lens)        /* kvc_prefill_args_t */
KVCGO_ADDRESS_MEMBER(float *, lse)                    /* kvc_prefill_args_t */
KVCGO_ADDRESS_MEMBER(const uint32_t *, layers)        /* kvc_kv_resource_t */
/* The disk tier's directory (kvc_config_set_disk_cache): a NUL-terminated
 * copy in C memory (kvcgo_buffer_new); the getter's out parameter receives
 * the address of the config's own string (kvcgo_cstring_length). */
KVCGO_ADDRESS_MEMBER(const char *, directory)
%typemap(freearg) const char *directory ""  /* the caller's buffer: not SWIG's copy */
%typemap(gotype) const char **directory "*uintptr"
%typemap(imtype) const char **directory "*uintptr"
%typemap(in) const char **directory %{ $1 = ($1_ltype)$input; %}
/* The remote tier's URL and key namespace (kvc_config_set_remote_cache):
 * the same, C copies in, the config's own strings out. */
KVCGO_ADDRESS_MEMBER(const char *, url)
%typemap(freearg) const char *url ""
%typemap(gotype) const char **url "*uintptr"
%typemap(imtype) const char **url "*uintptr"
%typemap(in) const char **url %{ $1 = ($1_ltype)$input; %}
KVCGO_ADDRESS_MEMBER(const char *, key_namespace)
%typemap(freearg) const char *key_namespace ""
%typemap(gotype) const char **key_namespace "*uintptr"
%typemap(imtype) const char **key_namespace "*uintptr"
%typemap(in) const char **key_namespace %{ $1 = ($1_ltype)$input; %}

/* Static strings (kvc_status_string, kvc_version_string): copied into Go
 * memory on return; the C string is owned by the library and not freed. */
%typemap(gotype) const char * "string"
%typemap(imtype) const char * "string"
%typemap(out) const char * %{ $result.p = (char *)$1; $result.n = $1 ? (intgo)strlen($1) : 0; %}
%typemap(goout) const char * %{ $result = string([]byte($1)) %}

/* Opaque handles: typed C addresses. */
%define KVCGO_HANDLE(CTYPE, GOTYPE)
%typemap(gotype) CTYPE *, const CTYPE * "GOTYPE"
%typemap(imtype) CTYPE *, const CTYPE * "uintptr"
%typemap(in) CTYPE *, const CTYPE * %{ $1 = ($1_ltype)$input; %}
%typemap(out) CTYPE * %{ $result = (uintptr_t)$1; %}
%typemap(goout) CTYPE * ""
%typemap(gotype) CTYPE ** "*GOTYPE"
%typemap(imtype) CTYPE ** "*GOTYPE"
%typemap(in) CTYPE ** %{ $1 = ($1_ltype)$input; %}
%enddef

%insert(go_wrapper) %{
// Config is a kvc_config_t * owned by C (kvc_config_create / kvc_config_destroy).
type Config uintptr

// Cache is a kvc_cache_t * owned by C (kvc_cache_create / kvc_cache_destroy).
type Cache uintptr

// Stateful is a kvc_stateful_t * owned by C (kvc_stateful_create /
// kvc_stateful_destroy).
type Stateful uintptr

// Export is a kvc_export_t * owned by C (kvc_cache_export_sequence /
// kvc_export_release).
type Export uintptr

// Import is a kvc_import_t * owned by C (kvc_cache_import_begin /
// kvc_import_destroy).
type Import uintptr
%}
KVCGO_HANDLE(kvc_config_t, Config)
KVCGO_HANDLE(kvc_cache_t, Cache)
KVCGO_HANDLE(kvc_stateful_t, Stateful)
KVCGO_HANDLE(kvc_export_t, Export)
KVCGO_HANDLE(kvc_import_t, Import)

/* Thread-local and meaningless from Go: every error carries its message. */
%ignore kvc_last_error_message;

/* The public headers, in the order kvcache.h includes them. A header added
 * to kvcache.h is added here too (TestHeadersCovered checks). */
%include "kvcache/common.h"
%include "kvcache/version.h"
%include "kvcache/config.h"
%include "kvcache/cache.h"
%include "kvcache/sequence.h"
%include "kvcache/batch.h"
%include "kvcache/stats.h"
%include "kvcache/kernels.h"
%include "kvcache/stateful.h"
%include "kvcache/events.h"
%include "kvcache/tiers.h"
%include "kvcache/remote_tier.h"
%include "kvcache/transfer.h"
%include "kvcache/state.h"
%include "kvcache/kv_resource.h"

/* C memory for the pointer fields of the transparent structs (salt bytes,
 * extra keys, host buffers on a CPU cache): Go memory may not be stored in
 * C memory. */
%inline %{
/* Allocates `size` bytes (at least 1, so an empty buffer is not NULL) and
 * copies `size` bytes from `src`, or zeroes them when `src` is NULL.
 * Returns 0 when out of memory. Free with kvcgo_buffer_free. */
static uintptr_t kvcgo_buffer_new(const uint8_t *src, size_t size) {
  void *p = malloc(size ? size : 1);
  if (p != NULL && size != 0) {
    if (src != NULL)
      memcpy(p, src, size);
    else
      memset(p, 0, size);
  }
  return (uintptr_t)p;
}
/* Frees a buffer of kvcgo_buffer_new; 0 is ignored. */
static void kvcgo_buffer_free(uintptr_t buffer) { free((void *)buffer); }
/* Copies `size` bytes from C address `src` to Go memory `dst`. */
static void kvcgo_buffer_read(uint8_t *dst, uintptr_t src, size_t size) {
  if (size != 0) memcpy(dst, (const void *)src, size);
}
/* strlen of the C string at address `s` (0 for 0). */
static size_t kvcgo_cstring_length(uintptr_t s) { return s ? strlen((const char *)s) : 0; }
/* Copies `size` bytes from Go memory `src` to C address `dst`. */
static void kvcgo_buffer_write(uintptr_t dst, const uint8_t *src, size_t size) {
  if (size != 0) memcpy((void *)dst, src, size);
}
/* Stores entry `index` of a kvc_extra_key_t array at C address `keys`. */
static void kvcgo_extra_key_set(uintptr_t keys, size_t index, uint64_t offset,
                                uint64_t length, uintptr_t data, size_t size) {
  kvc_extra_key_t *k = (kvc_extra_key_t *)keys + index;
  k->offset = offset;
  k->length = length;
  k->data = (const void *)data;
  k->size = size;
}
/* kvc_cache_get_async_error with the report as the status, so that the
 * message describing it is captured in this call: the call's own error if
 * it failed (*call_failed = true), else the status of the enqueued work
 * (*call_failed = false). */
static kvc_status_t kvcgo_cache_async_error(kvc_cache_t *cache, void *stream,
                                            bool *call_failed) {
  kvc_status_t async_error = KVC_OK;
  kvc_status_t status = kvc_cache_get_async_error(cache, stream, &async_error);
  *call_failed = status != KVC_OK;
  return status != KVC_OK ? status : async_error;
}
/* kvc_stateful_get_async_error, as kvcgo_cache_async_error. */
static kvc_status_t kvcgo_stateful_async_error(kvc_stateful_t *cache, void *stream,
                                               bool *call_failed) {
  kvc_status_t async_error = KVC_OK;
  kvc_status_t status = kvc_stateful_get_async_error(cache, stream, &async_error);
  *call_failed = status != KVC_OK;
  return status != KVC_OK ? status : async_error;
}
/* sizeof(kvc_extra_key_t). */
static size_t kvcgo_extra_key_size(void) { return sizeof(kvc_extra_key_t); }
/* Stores entry `index` of a kvc_retention_range_t array at C address
 * `ranges` (reserved is zeroed). */
static void kvcgo_retention_range_set(uintptr_t ranges, size_t index, uint64_t start,
                                      uint64_t end, uint32_t priority, uint64_t duration_ms) {
  kvc_retention_range_t *r = (kvc_retention_range_t *)ranges + index;
  r->start = start;
  r->end = end;
  r->priority = priority;
  r->reserved = 0;
  r->duration_ms = duration_ms;
}
/* sizeof(kvc_retention_range_t). */
static size_t kvcgo_retention_range_size(void) { return sizeof(kvc_retention_range_t); }
/* sizeof(kvc_event_t) and sizeof(kvc_snapshot_entry_t): the drain and the
 * snapshot write arrays of them into C memory (kvcgo_buffer_new). */
static size_t kvcgo_event_size(void) { return sizeof(kvc_event_t); }
static size_t kvcgo_snapshot_entry_size(void) { return sizeof(kvc_snapshot_entry_t); }
/* Copies `n` events of the kvc_event_t array at C address `events` into Go
 * memory `dst` in one call, 12 words per event, every member but reserved
 * (TestEveryStructMemberUsed checks): id, kind, tier, hash, parent_hash,
 * groups, lora_id, has_lora, priority, num_tokens, token_offset,
 * lost_count. */
static void kvcgo_events_read(uint64_t *dst, uintptr_t events, size_t n) {
  const kvc_event_t *e = (const kvc_event_t *)events;
  for (size_t i = 0; i < n; ++i, ++e, dst += 12) {
    dst[0] = e->id;
    dst[1] = e->kind;
    dst[2] = e->tier;
    dst[3] = e->hash;
    dst[4] = e->parent_hash;
    dst[5] = e->groups;
    dst[6] = e->lora_id;
    dst[7] = e->has_lora;
    dst[8] = e->priority;
    dst[9] = e->num_tokens;
    dst[10] = e->token_offset;
    dst[11] = e->lost_count;
  }
}
/* The same for `n` kvc_snapshot_entry_t at C address `entries`, 8 words
 * each: hash, parent_hash, groups, lora_id, has_lora, tier, priority,
 * num_tokens. */
static void kvcgo_snapshot_read(uint64_t *dst, uintptr_t entries, size_t n) {
  const kvc_snapshot_entry_t *e = (const kvc_snapshot_entry_t *)entries;
  for (size_t i = 0; i < n; ++i, ++e, dst += 8) {
    dst[0] = e->hash;
    dst[1] = e->parent_hash;
    dst[2] = e->groups;
    dst[3] = e->lora_id;
    dst[4] = e->has_lora;
    dst[5] = e->tier;
    dst[6] = e->priority;
    dst[7] = e->num_tokens;
  }
}
%}

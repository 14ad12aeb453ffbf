/**
 * @file common.h
 * @brief Status codes, error reporting and the export macro shared by every
 *        kvcache header.
 *
 * Threading contract (the default for the whole library): every function
 * that takes a cache handle may be called from any thread; calls on one
 * handle are serialized inside the library. A config object is not
 * synchronized: do not mutate one config from two threads at once.
 * Functions that only read take `const` handles and say so.
 */
#ifndef KVCACHE_COMMON_H
#define KVCACHE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define KVC_API
#elif defined(__GNUC__) || defined(__clang__)
/** Marks a declaration as part of the exported ABI. */
#define KVC_API __attribute__((visibility("default")))
#else
#define KVC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* Status codes                                                          */
/* ===================================================================== */

/** Result of every fallible call: KVC_OK or one of the negative KVC_ERR_*. */
typedef int32_t kvc_status_t;

/** Status values. Never renumbered; new ones are only appended. */
enum kvc_status_code {
  KVC_OK = 0,                        /**< Success. */
  KVC_ERR_INVALID_ARGUMENT = -1,     /**< An argument is out of its domain. */
  KVC_ERR_NOT_FOUND = -2,            /**< No object with that id. */
  KVC_ERR_ALREADY_EXISTS = -3,       /**< An object with that id exists. */
  KVC_ERR_OUT_OF_BLOCKS = -4,        /**< Not enough free or evictable blocks. */
  KVC_ERR_BUFFER_TOO_SMALL = -5,     /**< A caller buffer is too small. */
  KVC_ERR_UNSUPPORTED = -6,          /**< Valid, but not supported here. */
  KVC_ERR_DEVICE = -7,               /**< The device is missing or failed. */
  KVC_ERR_OUT_OF_MEMORY = -8,        /**< An allocation failed. */
  KVC_ERR_INVALID_STATE = -9,        /**< Not allowed in the object's state. */
  KVC_ERR_INTERNAL = -100            /**< A bug in kvcache; please report. */
};

/**
 * @brief Static, human-readable name of a status ("KVC_ERR_NOT_FOUND").
 * @return Never NULL; unknown values give "KVC_ERR_UNKNOWN". Owned by the
 *         library, valid for the life of the process.
 * @since 0.1.0
 */
KVC_API const char *kvc_status_string(kvc_status_t status);

/**
 * @brief Message of the last failed call on the calling thread.
 *
 * Names the argument and the value at fault, e.g. "tokens_per_block must be
 * a power of two > 1, got 12". A successful call does not clear it.
 * @return Never NULL ("" if no call has failed on this thread). Owned by the
 *         library; valid until the next kvcache call on this thread.
 * @since 0.1.0
 */
KVC_API const char *kvc_last_error_message(void);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_COMMON_H */

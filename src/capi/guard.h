// Shared machinery of the extern "C" shims: the catch-all wrapper that turns
// exceptions into a status and the thread-local message, NULL checks, and
// reading/writing size-prefixed transparent structs.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>

#include "capi/last_error.h"
#include "base/error.h"

namespace kvc::capi {

// Runs body(); no exception escapes. Every exported function with a status
// goes through here. A body may return its status itself (a refusal told
// without an exception, see refused()); one returning nothing succeeded.
template <class Body>
kvc_status_t guarded(Body&& body) noexcept {
  try {
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      return KVC_OK;
    } else {
      return body();
    }
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return KVC_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal error: ") + e.what());
    return KVC_ERR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return KVC_ERR_INTERNAL;
  }
}

// The status and message of a refusal (BlockManager's try_ calls).
inline kvc_status_t refused(const Refusal& r) noexcept {
  set_last_error(r.message);
  return r.status;
}

template <class T>
void require(const T* ptr, const char* name) {
  if (ptr == nullptr) invalid_argument(std::string(name) + " must not be NULL");
}

// What every kvc_x_init() of a zero-defaulted struct does: zeroes it and
// sets struct_size. NULL is ignored.
template <class T>
void init_sized(T* desc) noexcept {
  if (desc == nullptr) return;
  *desc = T{};
  desc->struct_size = sizeof(T);
}

// Writes `value` to the caller's struct: min(struct_size, sizeof(T)) bytes,
// zeroing any tail a newer caller knows about (0 means "not provided").
template <class T>
void write_sized(T* out, T value, const char* name) {
  require(out, name);
  const uint32_t size = out->struct_size;
  if (size < sizeof(uint32_t))
    invalid_argument(std::string(name) + "->struct_size must be set (use its _init function), got " +
                     std::to_string(size));
  value.struct_size = size;
  const size_t n = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(out, &value, n);
  if (size > sizeof(T)) std::memset(reinterpret_cast<char*>(out) + sizeof(T), 0, size - sizeof(T));
}

// Reads the caller's struct into a defaulted T: min(struct_size, sizeof(T))
// bytes. Bytes past sizeof(T) from a newer caller must be zero: a setting
// this library does not know must not be silently ignored.
template <class T>
T read_sized(const T* in, const T& defaults, const char* name) {
  require(in, name);
  const uint32_t size = in->struct_size;
  if (size < sizeof(uint32_t))
    invalid_argument(std::string(name) + "->struct_size must be set (use its _init function), got " +
                     std::to_string(size));
  T value = defaults;
  const size_t n = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(&value, in, n);
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t i = sizeof(T); i < size; ++i) {
    if (bytes[i] != 0)
      invalid_argument(std::string(name) + " has struct_size " + std::to_string(size) +
                       " with a non-zero byte at offset " + std::to_string(i) +
                       ", past the " + std::to_string(sizeof(T)) +
                       " bytes this library knows: it was built for a newer kvcache");
  }
  value.struct_size = sizeof(T);
  return value;
}

}  // namespace kvc::capi

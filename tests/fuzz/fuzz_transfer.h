// Helpers shared by the block-transfer operations (fuzz_export.cpp,
// fuzz_import.cpp).
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>

#include "fuzz_model.h"

namespace kvc_fuzz {
namespace transfer {

inline constexpr size_t kMaxExports = 4;
inline constexpr unsigned char kFill = 0xCD;
inline kvc_export_t* const kExportSentinel = reinterpret_cast<kvc_export_t*>(uintptr_t(0xDEAD0));
inline kvc_import_t* const kImportSentinel = reinterpret_cast<kvc_import_t*>(uintptr_t(0xBEEF0));

inline void must_direct(kvc_status_t st, kvc_status_t want, const char* what) {
  ++g_count.calls;
  if (st != want)
    finding("%s returned %s, expected %s: %s", what, kvc_status_string(st), kvc_status_string(want),
            st == KVC_OK ? "" : kvc_last_error_message());
}

inline uint64_t keys_size_of(uint64_t blocks, uint32_t T) {
  return 64 + 4 * blocks * T + 8 * blocks + 8;  // key blob format version 2
}


}  // namespace transfer
}  // namespace kvc_fuzz

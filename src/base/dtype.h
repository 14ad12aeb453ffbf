// Element types of stored K/V: sizes and names.
#pragma once

#include <cstddef>
#include <string>

#include "kvcache/config.h"

namespace kvc {

// Bytes per element; 0 for an unknown dtype.
inline size_t dtype_size(kvc_dtype_t dtype) {
  switch (dtype) {
    case KVC_DTYPE_F32: return 4;
    case KVC_DTYPE_F16: return 2;
    case KVC_DTYPE_BF16: return 2;
    case KVC_DTYPE_FP8_E4M3: return 1;
    default: return 0;
  }
}

inline const char* dtype_name(kvc_dtype_t dtype) {
  switch (dtype) {
    case KVC_DTYPE_F32: return "f32";
    case KVC_DTYPE_F16: return "f16";
    case KVC_DTYPE_BF16: return "bf16";
    case KVC_DTYPE_FP8_E4M3: return "fp8_e4m3";
    default: return "unknown";
  }
}

inline const char* layout_name(kvc_layout_t layout) {
  switch (layout) {
    case KVC_LAYOUT_NHD: return "NHD";
    case KVC_LAYOUT_HND: return "HND";
    default: return "unknown";
  }
}

}  // namespace kvc

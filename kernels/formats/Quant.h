// CPU dequantization (ggml block formats -> f32) and quantization (f32 -> simple block formats).
// Dequantization is bit-exact with ggml's `to_float` for every supported type.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/formats/GgmlType.h"

namespace memra::formats {

bool CanDequantize(GgmlType type);
// Dequantizes dst.size() elements (a multiple of the block size) from `src`, which must hold
// exactly the matching number of bytes.
absl::Status Dequantize(GgmlType type, absl::Span<const uint8_t> src, absl::Span<float> dst);

bool CanQuantize(GgmlType type);
// Quantizes src.size() elements into `dst` (exactly the matching number of bytes), as ggml's
// reference quantizers do.
absl::Status Quantize(GgmlType type, absl::Span<const float> src, absl::Span<uint8_t> dst);

// Scalar conversions (IEEE half, bfloat16 with round-to-nearest-even as ggml does).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);

}  // namespace memra::formats

// A result's buffer may hold more than its values: an op recording `q8_companion = i` has the
// values of result i followed by their q8 form (kernels/cuda/Q8Companion.h: a decode product
// reads it instead of quantizing x itself), `q8_companion_at` bytes from the buffer's start and
// `q8_companion_bytes` long. plan-memory and the CUDA executor size buffers by ResultBufferBytes.
#pragma once

#include <cstdint>

#include "ir/Op.h"

namespace memra::ir {

inline constexpr char kQ8CompanionAttr[] = "q8_companion";
inline constexpr char kQ8CompanionAtAttr[] = "q8_companion_at";
inline constexpr char kQ8CompanionBytesAttr[] = "q8_companion_bytes";

// The bytes result `result` of `op` needs when its values take `value_bytes`.
inline int64_t ResultBufferBytes(const Op& op, unsigned result, int64_t value_bytes) {
  if (op.attrs().I64Or(kQ8CompanionAttr, -1) != static_cast<int64_t>(result)) return value_bytes;
  const int64_t at = op.attrs().I64Or(kQ8CompanionAtAttr, 0), n = op.attrs().I64Or(kQ8CompanionBytesAttr, 0);
  if (at < 0 || n <= 0 || at > (int64_t{1} << 40) || n > (int64_t{1} << 40)) return value_bytes;
  return at + n > value_bytes ? at + n : value_bytes;
}

}  // namespace memra::ir

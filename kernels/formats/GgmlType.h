// The ggml tensor types (ids as stored in GGUF) with their block geometry.
#pragma once

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace memra::formats {

// Ids match ggml.h (llama.cpp b10573). Gaps are ids llama.cpp retired; they are rejected.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};
inline constexpr uint32_t kGgmlTypeCount = 43;

struct GgmlTypeTraits {
  GgmlType type;
  absl::string_view name;  // lower-case as llama.cpp prints it: "f32", "q4_K", "iq2_xxs"
  uint32_t block_elems;    // elements per block (1 for plain types)
  uint32_t block_bytes;    // bytes per block
  bool quantized;          // block-quantized (not a plain scalar type)
};

// Traits of a type id read from a file; nullopt for ids no llama.cpp type has.
std::optional<GgmlTypeTraits> LookupGgmlType(uint32_t id);
// Traits of a known enum value (never fails).
const GgmlTypeTraits& TraitsOf(GgmlType type);
absl::string_view GgmlTypeName(GgmlType type);
// Parses a name as printed by GgmlTypeName ("q8_0", "Q8_0", "bf16"; case-insensitive).
absl::StatusOr<GgmlType> ParseGgmlType(absl::string_view name);

// Bytes of one row of `ne0` elements; error if ne0 is not a multiple of the block size or overflows.
absl::StatusOr<uint64_t> RowBytes(GgmlType type, int64_t ne0);

}  // namespace memra::formats

#include "kernels/formats/GgmlType.h"

#include <array>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace memra::formats {
namespace {

constexpr std::array<GgmlTypeTraits, 35> kTypes = {{
    {GgmlType::kF32, "f32", 1, 4, false},
    {GgmlType::kF16, "f16", 1, 2, false},
    {GgmlType::kQ4_0, "q4_0", 32, 18, true},
    {GgmlType::kQ4_1, "q4_1", 32, 20, true},
    {GgmlType::kQ5_0, "q5_0", 32, 22, true},
    {GgmlType::kQ5_1, "q5_1", 32, 24, true},
    {GgmlType::kQ8_0, "q8_0", 32, 34, true},
    {GgmlType::kQ8_1, "q8_1", 32, 36, true},
    {GgmlType::kQ2_K, "q2_K", 256, 84, true},
    {GgmlType::kQ3_K, "q3_K", 256, 110, true},
    {GgmlType::kQ4_K, "q4_K", 256, 144, true},
    {GgmlType::kQ5_K, "q5_K", 256, 176, true},
    {GgmlType::kQ6_K, "q6_K", 256, 210, true},
    {GgmlType::kQ8_K, "q8_K", 256, 292, true},
    {GgmlType::kIQ2_XXS, "iq2_xxs", 256, 66, true},
    {GgmlType::kIQ2_XS, "iq2_xs", 256, 74, true},
    {GgmlType::kIQ3_XXS, "iq3_xxs", 256, 98, true},
    {GgmlType::kIQ1_S, "iq1_s", 256, 50, true},
    {GgmlType::kIQ4_NL, "iq4_nl", 32, 18, true},
    {GgmlType::kIQ3_S, "iq3_s", 256, 110, true},
    {GgmlType::kIQ2_S, "iq2_s", 256, 82, true},
    {GgmlType::kIQ4_XS, "iq4_xs", 256, 136, true},
    {GgmlType::kI8, "i8", 1, 1, false},
    {GgmlType::kI16, "i16", 1, 2, false},
    {GgmlType::kI32, "i32", 1, 4, false},
    {GgmlType::kI64, "i64", 1, 8, false},
    {GgmlType::kF64, "f64", 1, 8, false},
    {GgmlType::kIQ1_M, "iq1_m", 256, 56, true},
    {GgmlType::kBF16, "bf16", 1, 2, false},
    {GgmlType::kTQ1_0, "tq1_0", 256, 54, true},
    {GgmlType::kTQ2_0, "tq2_0", 256, 66, true},
    {GgmlType::kMXFP4, "mxfp4", 32, 17, true},
    {GgmlType::kNVFP4, "nvfp4", 64, 36, true},
    {GgmlType::kQ1_0, "q1_0", 128, 18, true},
    {GgmlType::kQ2_0, "q2_0", 64, 18, true},
}};

}  // namespace

std::optional<GgmlTypeTraits> LookupGgmlType(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

const GgmlTypeTraits& TraitsOf(GgmlType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  return kTypes[0];  // unreachable for valid enum values
}

absl::string_view GgmlTypeName(GgmlType type) { return TraitsOf(type).name; }

absl::StatusOr<GgmlType> ParseGgmlType(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  for (const auto& t : kTypes)
    if (absl::AsciiStrToLower(t.name) == lower) return t.type;
  return absl::InvalidArgumentError(absl::StrCat("unknown ggml type '", name, "'"));
}

absl::StatusOr<uint64_t> RowBytes(GgmlType type, int64_t ne0) {
  const GgmlTypeTraits& t = TraitsOf(type);
  if (ne0 < 0) return absl::InvalidArgumentError(absl::StrCat("negative row length ", ne0));
  if (ne0 % t.block_elems != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("row length ", ne0, " is not a multiple of the ", t.name, " block size ", t.block_elems));
  uint64_t blocks = static_cast<uint64_t>(ne0) / t.block_elems;
  if (blocks > std::numeric_limits<uint64_t>::max() / t.block_bytes)
    return absl::InvalidArgumentError(absl::StrCat("row of ", ne0, " ", t.name, " elements overflows"));
  return blocks * t.block_bytes;
}

}  // namespace memra::formats

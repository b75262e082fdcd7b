#include "ir/DType.h"

#include <array>

namespace memra::ir {
namespace {

constexpr DTypeInfo kInfos[] = {
#define MEMRA_DTYPE(id, name, ggml, belems, bbytes, quant) {DType::k##id, name, ggml, belems, bbytes, quant},
#include "ir/DTypes.def"
#undef MEMRA_DTYPE
};

}  // namespace

const DTypeInfo& InfoOf(DType t) { return kInfos[static_cast<size_t>(t)]; }
absl::string_view DTypeName(DType t) { return InfoOf(t).name; }

std::optional<DType> ParseDType(absl::string_view name) {
  for (const auto& info : kInfos)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

std::optional<DType> DTypeFromGgmlId(uint32_t ggml_id) {
  for (const auto& info : kInfos)
    if (info.ggml_id >= 0 && static_cast<uint32_t>(info.ggml_id) == ggml_id) return info.dtype;
  return std::nullopt;
}

bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64; }
bool IsKvCacheDType(DType t) { return IsFloat(t) || t == DType::kQ8_0; }

bool IsInteger(DType t) {
  return t == DType::kI64 || t == DType::kI32 || t == DType::kI16 || t == DType::kI8 || t == DType::kU8;
}

std::optional<int64_t> StorageBytes(DType t, int64_t n) {
  const DTypeInfo& info = InfoOf(t);
  if (n < 0 || n % info.block_elems != 0) return std::nullopt;
  return n / info.block_elems * info.block_bytes;
}

}  // namespace memra::ir

// Element types (dtypes) of IR values: plain scalars and ggml quantized block formats.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace memra::ir {

enum class DType : uint8_t {
#define MEMRA_DTYPE(id, name, ggml, belems, bbytes, quant) k##id,
#include "ir/DTypes.def"
#undef MEMRA_DTYPE
};

struct DTypeInfo {
  DType dtype;
  absl::string_view name;  // textual form: "f32", "q4_K"
  int ggml_id;             // ggml type id (as stored in GGUF), -1 when ggml has none
  int64_t block_elems;     // elements per block (1 for scalar types)
  int64_t block_bytes;     // bytes per block
  bool quantized;
};

const DTypeInfo& InfoOf(DType t);
absl::string_view DTypeName(DType t);
std::optional<DType> ParseDType(absl::string_view name);  // exact spelling, e.g. "q4_K"
std::optional<DType> DTypeFromGgmlId(uint32_t ggml_id);

inline bool IsQuantized(DType t) { return InfoOf(t).quantized; }
// f32, f16, bf16, f64: dtypes activations may have.
bool IsFloat(DType t);
bool IsInteger(DType t);  // i8..i64, u8
// Element types a KV cache state may have: the float types, or q8_0 blocks (-ctk / -ctv q8_0;
// each head's row whole blocks).
bool IsKvCacheDType(DType t);
// Bytes of `n` elements (n a multiple of the block size for quantized types), or nullopt.
std::optional<int64_t> StorageBytes(DType t, int64_t n);

}  // namespace memra::ir

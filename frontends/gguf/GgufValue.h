// A GGUF metadata value: a scalar, a string, or an array (possibly of arrays).
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

namespace memra::gguf {

// Ids as stored in the file (gguf.h `gguf_type`).
enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
inline constexpr uint32_t kValueTypeCount = 13;
absl::string_view ValueTypeName(ValueType t);  // "u32", "string", "array", ...

struct Value {
  ValueType type = ValueType::kU8;
  // Scalars: unsigned types and bool in `u`, signed in `i`, floats in `f` (f32 widened exactly).
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;                         // kString
  ValueType elem_type = ValueType::kU8;  // kArray: element type
  std::vector<Value> array;              // kArray: elements

  static Value U8(uint8_t v) {
    Value x;
    x.type = ValueType::kU8;
    x.u = v;
    return x;
  }
  static Value I8(int8_t v) {
    Value x;
    x.type = ValueType::kI8;
    x.i = v;
    return x;
  }
  static Value U16(uint16_t v) {
    Value x;
    x.type = ValueType::kU16;
    x.u = v;
    return x;
  }
  static Value I16(int16_t v) {
    Value x;
    x.type = ValueType::kI16;
    x.i = v;
    return x;
  }
  static Value U32(uint32_t v) {
    Value x;
    x.type = ValueType::kU32;
    x.u = v;
    return x;
  }
  static Value I32(int32_t v) {
    Value x;
    x.type = ValueType::kI32;
    x.i = v;
    return x;
  }
  static Value U64(uint64_t v) {
    Value x;
    x.type = ValueType::kU64;
    x.u = v;
    return x;
  }
  static Value I64(int64_t v) {
    Value x;
    x.type = ValueType::kI64;
    x.i = v;
    return x;
  }
  static Value F32(float v) {
    Value x;
    x.type = ValueType::kF32;
    x.f = v;
    return x;
  }
  static Value F64(double v) {
    Value x;
    x.type = ValueType::kF64;
    x.f = v;
    return x;
  }
  static Value Bool(bool v) {
    Value x;
    x.type = ValueType::kBool;
    x.u = v;
    return x;
  }
  static Value String(std::string v) {
    Value x;
    x.type = ValueType::kString;
    x.s = std::move(v);
    return x;
  }
  static Value Array(ValueType elem, std::vector<Value> elems) {
    Value x;
    x.type = ValueType::kArray;
    x.elem_type = elem;
    x.array = std::move(elems);
    return x;
  }
  static Value StringArray(const std::vector<std::string>& v);
  static Value I32Array(const std::vector<int32_t>& v);
  static Value F32Array(const std::vector<float>& v);

  bool IsInteger() const;  // u8..i64 (not bool)
  bool operator==(const Value& o) const;
  // Short human-readable rendering (arrays abbreviated after `max_elems`).
  std::string ToString(size_t max_elems = 8) const;
};

}  // namespace memra::gguf

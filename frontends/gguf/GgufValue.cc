#include "frontends/gguf/GgufValue.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace memra::gguf {
namespace {

bool SameBits(double a, double b) {
  uint64_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x == y;
}

// Quotes and escapes a string for display; long strings are cut.
std::string Quote(const std::string& s, size_t max_chars = 64) {
  std::string out = "\"";
  size_t n = 0;
  for (unsigned char c : s) {
    if (n++ == max_chars) {
      absl::StrAppend(&out, "...");
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

}  // namespace

absl::string_view ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kU8:
      return "u8";
    case ValueType::kI8:
      return "i8";
    case ValueType::kU16:
      return "u16";
    case ValueType::kI16:
      return "i16";
    case ValueType::kU32:
      return "u32";
    case ValueType::kI32:
      return "i32";
    case ValueType::kF32:
      return "f32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kU64:
      return "u64";
    case ValueType::kI64:
      return "i64";
    case ValueType::kF64:
      return "f64";
  }
  return "invalid";
}

Value Value::StringArray(const std::vector<std::string>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (const auto& s : v) elems.push_back(String(s));
  return Array(ValueType::kString, std::move(elems));
}

Value Value::I32Array(const std::vector<int32_t>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (int32_t x : v) elems.push_back(I32(x));
  return Array(ValueType::kI32, std::move(elems));
}

Value Value::F32Array(const std::vector<float>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (float x : v) elems.push_back(F32(x));
  return Array(ValueType::kF32, std::move(elems));
}

bool Value::IsInteger() const {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kU16:
    case ValueType::kI16:
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kU64:
    case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

bool Value::operator==(const Value& o) const {
  if (type != o.type) return false;
  switch (type) {
    case ValueType::kU8:
    case ValueType::kU16:
    case ValueType::kU32:
    case ValueType::kU64:
      return u == o.u;
    case ValueType::kBool:
      return (u != 0) == (o.u != 0);
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64:
      return i == o.i;
    case ValueType::kF32:
    case ValueType::kF64:
      // Bitwise, so that NaNs compare equal to themselves and -0 differs from +0 (round trips).
      return SameBits(f, o.f);
    case ValueType::kString:
      return s == o.s;
    case ValueType::kArray:
      return elem_type == o.elem_type && array == o.array;
  }
  return false;
}

std::string Value::ToString(size_t max_elems) const {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kU16:
    case ValueType::kU32:
    case ValueType::kU64:
      return absl::StrCat(u);
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64:
      return absl::StrCat(i);
    case ValueType::kBool:
      return u ? "true" : "false";
    case ValueType::kF32:
      return absl::StrFormat("%.9g", f);
    case ValueType::kF64:
      return absl::StrFormat("%.17g", f);
    case ValueType::kString:
      return Quote(s);
    case ValueType::kArray: {
      std::string out = absl::StrCat(ValueTypeName(elem_type), "[", array.size(), "] [");
      for (size_t k = 0; k < array.size(); ++k) {
        if (k == max_elems) {
          absl::StrAppend(&out, ", ...");
          break;
        }
        absl::StrAppend(&out, k ? ", " : "", array[k].ToString(max_elems));
      }
      out += ']';
      return out;
    }
  }
  return absl::StrCat("<invalid value type ", static_cast<uint32_t>(type), ">");
}

}  // namespace memra::gguf

// A small JSON value (objects keep insertion order) with a parser and a Python-json.dumps-style
// writer: what chat messages, tool schemas and the template engine's `tojson` need.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memra::tokenizer {

class Json {
 public:
  enum class Kind { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : kind_(Kind::kBool), b_(b) {}
  Json(int v) : kind_(Kind::kInt), i_(v) {}
  Json(int64_t v) : kind_(Kind::kInt), i_(v) {}
  Json(double v) : kind_(Kind::kDouble), d_(v) {}
  Json(const char* s) : kind_(Kind::kString), s_(s) {}
  Json(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}
  Json(absl::string_view s) : kind_(Kind::kString), s_(s.data(), s.size()) {}
  static Json MakeArray(Array a = {});
  static Json MakeObject(Object o = {});

  // Parses one JSON document (RFC 8259; nesting depth at most 512). Errors give the byte offset.
  static absl::StatusOr<Json> Parse(absl::string_view text);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kDouble; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return kind_ == Kind::kDouble ? static_cast<int64_t>(d_) : i_; }
  double number_value() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : d_; }
  const std::string& string_value() const { return s_; }
  const Array& array() const;
  const Object& object() const;
  Array& mutable_array();    // makes this an array if it is not one
  Object& mutable_object();  // makes this an object if it is not one

  // Object member, nullptr if absent or not an object.
  const Json* Find(absl::string_view key) const;
  // Object member or array element; a shared null when absent.
  const Json& operator[](absl::string_view key) const;
  const Json& operator[](const char* key) const { return (*this)[absl::string_view(key)]; }
  const Json& operator[](size_t i) const;
  size_t size() const;  // elements / members, 0 otherwise
  // Sets (or replaces, keeping its position) an object member.
  void Set(std::string key, Json value);
  void Push(Json value);

  struct DumpOptions {
    // Python's json.dumps defaults: ", " and ": " separators, ASCII-only output off here
    // (ensure_ascii=False, as HF's and llama.cpp's chat templates use it).
    std::string item_separator = ", ";
    std::string key_separator = ": ";
    bool ensure_ascii = false;
    int indent = -1;  // >= 0: pretty-print with this many spaces (separators "," + newline)
  };
  std::string Dump(const DumpOptions& opts) const;
  std::string Dump() const { return Dump(DumpOptions()); }

  bool operator==(const Json& o) const;
  bool operator!=(const Json& o) const { return !(*this == o); }

 private:
  void DumpTo(const DumpOptions& opts, int level, std::string* out) const;

  Kind kind_ = Kind::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::shared_ptr<Array> a_;  // copy-on-write is not needed: values are small and rarely copied
  std::shared_ptr<Object> o_;
};

// Appends `s` as a JSON string literal (with quotes).
void AppendJsonString(absl::string_view s, bool ensure_ascii, std::string* out);

}  // namespace memra::tokenizer

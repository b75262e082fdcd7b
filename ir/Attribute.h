// Typed op attributes (i64, f64, string, i64 array, f64 array) and the sorted attribute
// dictionary an op carries. Every numeric constant of the model lives in attributes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace memra::ir {

enum class AttrKind : uint8_t { kI64, kF64, kString, kI64Array, kF64Array, kStringArray };
// "i64", "f64", "str", "i64[]", "f64[]", "str[]"
absl::string_view AttrKindName(AttrKind k);

class Attr {
 public:
  Attr() : v_(int64_t{0}) {}
  Attr(int64_t v) : v_(v) {}                          // NOLINT (implicit on purpose: {"eps", 1e-6} reads well)
  Attr(int v) : v_(int64_t{v}) {}                     // NOLINT
  Attr(bool v) : v_(int64_t{v}) {}                    // NOLINT
  Attr(double v) : v_(v) {}                           // NOLINT
  Attr(const char* v) : v_(std::string(v)) {}         // NOLINT
  Attr(std::string v) : v_(std::move(v)) {}           // NOLINT
  Attr(absl::string_view v) : v_(std::string(v)) {}   // NOLINT
  Attr(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT
  Attr(std::initializer_list<int64_t> v) : v_(std::vector<int64_t>(v)) {}  // NOLINT
  Attr(std::vector<double> v) : v_(std::move(v)) {}                        // NOLINT
  Attr(std::vector<std::string> v) : v_(std::move(v)) {}                   // NOLINT

  AttrKind kind() const { return static_cast<AttrKind>(v_.index()); }
  bool is_i64() const { return kind() == AttrKind::kI64; }
  bool is_f64() const { return kind() == AttrKind::kF64; }
  bool is_string() const { return kind() == AttrKind::kString; }
  bool is_i64_array() const { return kind() == AttrKind::kI64Array; }
  bool is_f64_array() const { return kind() == AttrKind::kF64Array; }
  bool is_string_array() const { return kind() == AttrKind::kStringArray; }

  int64_t i64() const { return std::get<int64_t>(v_); }
  double f64() const { return std::get<double>(v_); }
  const std::string& str() const { return std::get<std::string>(v_); }
  const std::vector<int64_t>& i64_array() const { return std::get<std::vector<int64_t>>(v_); }
  const std::vector<double>& f64_array() const { return std::get<std::vector<double>>(v_); }
  const std::vector<std::string>& string_array() const { return std::get<std::vector<std::string>>(v_); }

  // Textual form: 3, 1.0e-06 style floats that always re-parse as floats and round-trip exactly,
  // "quoted strings" with C escapes, [1, 2], [0.5, 1.0], ["a", "b"].
  std::string ToString() const;
  bool operator==(const Attr& o) const;
  bool operator!=(const Attr& o) const { return !(*this == o); }
  size_t Hash() const;

 private:
  std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>, std::vector<std::string>> v_;
};

// Shortest decimal form of `v` that parses back to the same double, always with a '.' or an
// exponent ("1.0", "1e-06", "0.1", "inf", "-inf", "nan").
std::string FormatDouble(double v);
// "quoted" with \" \\ \n \t and \xNN escapes for other non-printables.
std::string QuoteString(absl::string_view s);

struct NamedAttr {
  std::string name;
  Attr value;
};

// Attributes sorted by name (so printing and CSE comparisons are canonical).
class AttrDict {
 public:
  AttrDict() = default;
  AttrDict(std::initializer_list<std::pair<absl::string_view, Attr>> init);

  void Set(absl::string_view name, Attr value);
  bool Erase(absl::string_view name);
  const Attr* Get(absl::string_view name) const;
  bool Has(absl::string_view name) const { return Get(name) != nullptr; }
  // Typed getters: nullopt when absent or of another kind (GetF64 also accepts an i64).
  std::optional<int64_t> GetI64(absl::string_view name) const;
  std::optional<double> GetF64(absl::string_view name) const;
  std::optional<std::string> GetString(absl::string_view name) const;
  std::optional<std::vector<int64_t>> GetI64Array(absl::string_view name) const;
  std::optional<std::vector<double>> GetF64Array(absl::string_view name) const;
  std::optional<std::vector<std::string>> GetStringArray(absl::string_view name) const;
  int64_t I64Or(absl::string_view name, int64_t dflt) const { return GetI64(name).value_or(dflt); }
  double F64Or(absl::string_view name, double dflt) const { return GetF64(name).value_or(dflt); }

  size_t size() const { return attrs_.size(); }
  bool empty() const { return attrs_.empty(); }
  auto begin() const { return attrs_.begin(); }
  auto end() const { return attrs_.end(); }

  std::string ToString() const;  // "{eps = 1e-06, n_rot = 16}" ("" when empty)
  bool operator==(const AttrDict& o) const;
  bool operator!=(const AttrDict& o) const { return !(*this == o); }
  size_t Hash() const;

 private:
  llvm::SmallVector<NamedAttr, 4> attrs_;
};

}  // namespace memra::ir

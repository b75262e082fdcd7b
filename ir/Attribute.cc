#include "ir/Attribute.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace memra::ir {

absl::string_view AttrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::kI64:
      return "i64";
    case AttrKind::kF64:
      return "f64";
    case AttrKind::kString:
      return "str";
    case AttrKind::kI64Array:
      return "i64[]";
    case AttrKind::kF64Array:
      return "f64[]";
    case AttrKind::kStringArray:
      return "str[]";
  }
  return "?";
}

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  double mag = std::fabs(v);
  if (s.find('e') != std::string::npos && mag >= 1e-4 && mag < 1e16) {
    // Plain decimal reads better than 1e+04 for moderate magnitudes (rope bases, scales).
    for (int decimals = 1; decimals <= 24; ++decimals) {
      std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
      if (std::strtod(buf, nullptr) == v) {
        s = buf;
        break;
      }
    }
  }
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string QuoteString(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c >= 0x7f)
          out += absl::StrFormat("\\x%02x", c);
        else
          out += static_cast<char>(c);
    }
  }
  out += "\"";
  return out;
}

std::string Attr::ToString() const {
  switch (kind()) {
    case AttrKind::kI64:
      return absl::StrCat(i64());
    case AttrKind::kF64:
      return FormatDouble(f64());
    case AttrKind::kString:
      return QuoteString(str());
    case AttrKind::kI64Array:
      return absl::StrCat("[", absl::StrJoin(i64_array(), ", "), "]");
    case AttrKind::kF64Array:
      return absl::StrCat(
          "[", absl::StrJoin(f64_array(), ", ", [](std::string* o, double d) { o->append(FormatDouble(d)); }), "]");
    case AttrKind::kStringArray:
      return absl::StrCat(
          "[",
          absl::StrJoin(string_array(), ", ", [](std::string* o, const std::string& e) { o->append(QuoteString(e)); }),
          "]");
  }
  return "";
}

static bool SameDouble(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0 || a == b; }

bool Attr::operator==(const Attr& o) const {
  if (kind() != o.kind()) return false;
  if (is_f64()) return SameDouble(f64(), o.f64());
  if (is_f64_array()) {
    const auto& a = f64_array();
    const auto& b = o.f64_array();
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!SameDouble(a[i], b[i])) return false;
    return true;
  }
  return v_ == o.v_;
}

size_t Attr::Hash() const {
  switch (kind()) {
    case AttrKind::kI64:
      return absl::HashOf(0, i64());
    case AttrKind::kF64:
      return absl::HashOf(1, f64() == 0 ? 0.0 : f64());
    case AttrKind::kString:
      return absl::HashOf(2, str());
    case AttrKind::kI64Array:
      return absl::HashOf(3, i64_array());
    case AttrKind::kF64Array:
      return absl::HashOf(4, f64_array().size());
    case AttrKind::kStringArray:
      return absl::HashOf(5, string_array());
  }
  return 0;
}

AttrDict::AttrDict(std::initializer_list<std::pair<absl::string_view, Attr>> init) {
  for (const auto& [k, v] : init) Set(k, v);
}

void AttrDict::Set(absl::string_view name, Attr value) {
  auto it = std::lower_bound(attrs_.begin(), attrs_.end(), name,
                             [](const NamedAttr& a, absl::string_view n) { return a.name < n; });
  if (it != attrs_.end() && it->name == name) {
    it->value = std::move(value);
    return;
  }
  attrs_.insert(it, NamedAttr{std::string(name), std::move(value)});
}

bool AttrDict::Erase(absl::string_view name) {
  for (auto it = attrs_.begin(); it != attrs_.end(); ++it) {
    if (it->name == name) {
      attrs_.erase(it);
      return true;
    }
  }
  return false;
}

const Attr* AttrDict::Get(absl::string_view name) const {
  auto it = std::lower_bound(attrs_.begin(), attrs_.end(), name,
                             [](const NamedAttr& a, absl::string_view n) { return a.name < n; });
  if (it != attrs_.end() && it->name == name) return &it->value;
  return nullptr;
}

std::optional<int64_t> AttrDict::GetI64(absl::string_view name) const {
  const Attr* a = Get(name);
  if (a && a->is_i64()) return a->i64();
  return std::nullopt;
}
std::optional<double> AttrDict::GetF64(absl::string_view name) const {
  const Attr* a = Get(name);
  if (a && a->is_f64()) return a->f64();
  if (a && a->is_i64()) return static_cast<double>(a->i64());
  return std::nullopt;
}
std::optional<std::string> AttrDict::GetString(absl::string_view name) const {
  const Attr* a = Get(name);
  if (a && a->is_string()) return a->str();
  return std::nullopt;
}
std::optional<std::vector<int64_t>> AttrDict::GetI64Array(absl::string_view name) const {
  const Attr* a = Get(name);
  if (a && a->is_i64_array()) return a->i64_array();
  return std::nullopt;
}
std::optional<std::vector<std::string>> AttrDict::GetStringArray(absl::string_view name) const {
  const Attr* a = Get(name);
  if (a && a->is_string_array()) return a->string_array();
  return std::nullopt;
}
std::optional<std::vector<double>> AttrDict::GetF64Array(absl::string_view name) const {
  const Attr* a = Get(name);
  if (a && a->is_f64_array()) return a->f64_array();
  if (a && a->is_i64_array()) {
    std::vector<double> v;
    for (int64_t x : a->i64_array()) v.push_back(static_cast<double>(x));
    return v;
  }
  return std::nullopt;
}

std::string AttrDict::ToString() const {
  if (attrs_.empty()) return "";
  return absl::StrCat("{",
                      absl::StrJoin(attrs_, ", ",
                                    [](std::string* out, const NamedAttr& a) {
                                      absl::StrAppend(out, a.name, " = ", a.value.ToString());
                                    }),
                      "}");
}

bool AttrDict::operator==(const AttrDict& o) const {
  if (attrs_.size() != o.attrs_.size()) return false;
  for (size_t i = 0; i < attrs_.size(); ++i)
    if (attrs_[i].name != o.attrs_[i].name || attrs_[i].value != o.attrs_[i].value) return false;
  return true;
}

size_t AttrDict::Hash() const {
  size_t h = attrs_.size();
  for (const auto& a : attrs_) h = absl::HashOf(h, a.name, a.value.Hash());
  return h;
}

}  // namespace memra::ir

#include "passes/Pass.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/Attribute.h"

namespace memra::passes {

Statistic::Statistic(Pass* pass, absl::string_view name, absl::string_view description)
    : name_(name), description_(description) {
  pass->statistics_.push_back(this);
}

OptionBase::OptionBase(Pass* pass, absl::string_view name, absl::string_view description)
    : name_(name), description_(description) {
  pass->options_.push_back(this);
}

template <>
absl::Status Option<int64_t>::Parse(absl::string_view text) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v))
    return absl::InvalidArgumentError(absl::StrCat("option '", name(), "' expects an integer, got '", text, "'"));
  if ((lo_ && v < *lo_) || (hi_ && v > *hi_))
    return absl::InvalidArgumentError(absl::StrCat("option '", name(), "' must be in [", lo_.value_or(INT64_MIN), ", ",
                                                   hi_.value_or(INT64_MAX), "], got ", v));
  value_ = v;
  return absl::OkStatus();
}
template <>
absl::Status Option<double>::Parse(absl::string_view text) {
  if (!absl::SimpleAtod(text, &value_))
    return absl::InvalidArgumentError(absl::StrCat("option '", name(), "' expects a number, got '", text, "'"));
  return absl::OkStatus();
}
template <>
absl::Status Option<bool>::Parse(absl::string_view text) {
  if (text == "1" || text == "true")
    value_ = true;
  else if (text == "0" || text == "false")
    value_ = false;
  else
    return absl::InvalidArgumentError(absl::StrCat("option '", name(), "' expects true/false/1/0, got '", text, "'"));
  return absl::OkStatus();
}
template <>
absl::Status Option<std::string>::Parse(absl::string_view text) {
  value_ = std::string(text);
  return absl::OkStatus();
}

template <>
std::string Option<int64_t>::ToString(const int64_t& v) {
  return absl::StrCat(v);
}
template <>
std::string Option<double>::ToString(const double& v) {
  return ir::FormatDouble(v);
}
template <>
std::string Option<bool>::ToString(const bool& v) {
  return v ? "true" : "false";
}
template <>
std::string Option<std::string>::ToString(const std::string& v) {
  return v;
}

absl::Status Pass::SetOption(absl::string_view key, absl::string_view value) {
  for (OptionBase* o : options_)
    if (o->name() == key) return o->Parse(value);
  std::string known =
      options_.empty()
          ? "it has no options"
          : absl::StrCat("its options: ", absl::StrJoin(options_, ", ", [](std::string* out, OptionBase* o) {
                           out->append(o->name());
                         }));
  return absl::InvalidArgumentError(absl::StrCat("pass '", name(), "' has no option '", key, "' (", known, ")"));
}

std::string Pass::OptionsString() const {
  std::vector<std::string> parts;
  for (OptionBase* o : options_)
    if (!o->is_default()) parts.push_back(absl::StrCat(o->name(), "=", o->ValueString()));
  if (parts.empty()) return "";
  return absl::StrCat("{", absl::StrJoin(parts, " "), "}");
}

}  // namespace memra::passes

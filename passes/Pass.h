// The pass interface. A pass transforms a Module in place and says whether it changed it.
// Passes declare options and statistics as members:
//
//   class MyPass : public Pass {
//     Option<int64_t> max_group_{this, "max-group", "largest group to fuse", 4};
//     Statistic fused_{this, "fused", "add+norm pairs fused"};
//     absl::StatusOr<bool> Run(ir::Module& m) override { ... fused_ += n; ... }
//   };
//
// Options are set from pipeline strings (`my-pass{max-group=8}`); statistics accumulate over
// runs and are printed by the PassManager (`--pass-statistics`).
// Passes that work function by function derive from FunctionPass (passes/FunctionPass.h);
// fusions are PatternPasses of rewrite patterns (passes/RewritePattern.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Module.h"

namespace memra::passes {

class Pass;

class Statistic {
 public:
  Statistic(Pass* pass, absl::string_view name, absl::string_view description);
  Statistic(const Statistic&) = delete;
  Statistic& operator=(const Statistic&) = delete;
  Statistic& operator++() {
    ++value_;
    return *this;
  }
  Statistic& operator+=(int64_t n) {
    value_ += n;
    return *this;
  }
  int64_t value() const { return value_; }
  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }

 private:
  std::string name_, description_;
  int64_t value_ = 0;
};

class OptionBase {
 public:
  OptionBase(Pass* pass, absl::string_view name, absl::string_view description);
  virtual ~OptionBase() = default;
  OptionBase(const OptionBase&) = delete;
  OptionBase& operator=(const OptionBase&) = delete;
  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  virtual absl::Status Parse(absl::string_view text) = 0;
  virtual std::string ValueString() const = 0;
  virtual std::string DefaultString() const = 0;
  bool is_default() const { return ValueString() == DefaultString(); }

 private:
  std::string name_, description_;
};

// T is int64_t, double, bool or std::string.
template <typename T>
class Option : public OptionBase {
 public:
  Option(Pass* pass, absl::string_view name, absl::string_view description, T dflt)
      : OptionBase(pass, name, description), value_(dflt), default_(dflt) {}
  // An integer option with its valid range: values outside [lo, hi] are refused, naming both.
  Option(Pass* pass, absl::string_view name, absl::string_view description, T dflt, T lo, T hi)
      : OptionBase(pass, name, description), value_(dflt), default_(dflt), lo_(lo), hi_(hi) {}
  const T& operator*() const { return value_; }
  const T& value() const { return value_; }
  void set(T v) { value_ = std::move(v); }
  absl::Status Parse(absl::string_view text) override;
  std::string ValueString() const override { return ToString(value_); }
  std::string DefaultString() const override { return ToString(default_); }

 private:
  static std::string ToString(const T& v);
  T value_;
  T default_;
  std::optional<T> lo_, hi_;
};

#define MEMRA_OPTION_SPECIALIZATIONS(T)                  \
  template <>                                            \
  absl::Status Option<T>::Parse(absl::string_view text); \
  template <>                                            \
  std::string Option<T>::ToString(const T& v);
MEMRA_OPTION_SPECIALIZATIONS(int64_t)
MEMRA_OPTION_SPECIALIZATIONS(double)
MEMRA_OPTION_SPECIALIZATIONS(bool)
MEMRA_OPTION_SPECIALIZATIONS(std::string)
#undef MEMRA_OPTION_SPECIALIZATIONS

class Pass {
 public:
  virtual ~Pass() = default;
  // Kebab-case name used in pipelines ("cse", "fuse-add-rmsnorm").
  virtual absl::string_view name() const = 0;
  virtual absl::string_view description() const = 0;
  // Transforms `m`; true if anything changed.
  virtual absl::StatusOr<bool> Run(ir::Module& m) = 0;

  // `key=value`; error names the pass and lists its options.
  absl::Status SetOption(absl::string_view key, absl::string_view value);
  // Options that differ from their defaults, as written in a pipeline: "{max-group=8}" or "".
  std::string OptionsString() const;
  const std::vector<OptionBase*>& options() const { return options_; }
  const std::vector<Statistic*>& statistics() const { return statistics_; }

 private:
  friend class Statistic;
  friend class OptionBase;
  std::vector<OptionBase*> options_;
  std::vector<Statistic*> statistics_;
};

}  // namespace memra::passes

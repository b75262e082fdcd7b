#include "passes/PassManager.h"

#include <chrono>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "ir/Printer.h"
#include "ir/StatusMacros.h"
#include "ir/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "passes/PassRegistry.h"

namespace memra::passes {
namespace {

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

llvm::StringRef Ref(absl::string_view s) { return {s.data(), s.size()}; }

}  // namespace

absl::StatusOr<std::vector<PipelineElement>> ParsePipeline(absl::string_view pipeline) {
  std::vector<PipelineElement> out;
  size_t i = 0;
  auto err = [&](absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline \"", pipeline, "\" at offset ", i, ": ", msg));
  };
  auto skip_ws = [&] {
    while (i < pipeline.size() && (pipeline[i] == ' ' || pipeline[i] == '\t')) ++i;
  };
  skip_ws();
  if (i == pipeline.size()) return out;
  while (true) {
    skip_ws();
    size_t start = i;
    while (i < pipeline.size() && IsNameChar(pipeline[i])) ++i;
    if (start == i) return err("expected a pass name");
    PipelineElement el;
    el.name = std::string(pipeline.substr(start, i - start));
    skip_ws();
    if (i < pipeline.size() && pipeline[i] == '{') {
      ++i;
      while (true) {
        while (i < pipeline.size() && (pipeline[i] == ' ' || pipeline[i] == ',')) ++i;
        if (i < pipeline.size() && pipeline[i] == '}') {
          ++i;
          break;
        }
        size_t ks = i;
        while (i < pipeline.size() && IsNameChar(pipeline[i])) ++i;
        if (ks == i) return err("expected an option name or '}'");
        std::string key(pipeline.substr(ks, i - ks));
        if (i >= pipeline.size() || pipeline[i] != '=') return err("expected '=' after the option name");
        ++i;
        size_t vs = i;
        while (i < pipeline.size() && pipeline[i] != ' ' && pipeline[i] != '}' && pipeline[i] != ',') ++i;
        el.options.emplace_back(key, std::string(pipeline.substr(vs, i - vs)));
      }
    }
    out.push_back(std::move(el));
    skip_ws();
    if (i == pipeline.size()) break;
    if (pipeline[i] != ',') return err("expected ',' between passes");
    ++i;
  }
  return out;
}

PassManager::PassManager(PassManagerOptions options) : options_(std::move(options)), log_(&llvm::errs()) {}

absl::StatusOr<std::unique_ptr<PassManager>> PassManager::Create(const PassManagerOptions& options) {
  auto pm = std::make_unique<PassManager>(options);
  for (const std::string& name : options.disable_passes)
    if (!CreatePass(name))
      return absl::InvalidArgumentError(absl::StrCat("--disable-passes: unknown pass '", name,
                                                     "' (known: ", absl::StrJoin(RegisteredPassNames(), ", "), ")"));
  for (const auto* list : {&options.print_before, &options.print_after})
    for (const std::string& name : *list)
      if (!CreatePass(name))
        return absl::InvalidArgumentError(absl::StrCat("--print-before/--print-after: unknown pass '", name,
                                                       "' (known: ", absl::StrJoin(RegisteredPassNames(), ", "), ")"));
  MEMRA_RETURN_IF_ERROR(pm->AddPipeline(options.pipeline));
  return pm;
}

absl::Status PassManager::AddPipeline(absl::string_view pipeline) {
  MEMRA_ASSIGN_OR_RETURN(std::vector<PipelineElement> elements, ParsePipeline(pipeline));
  for (const PipelineElement& el : elements) {
    std::unique_ptr<Pass> pass = CreatePass(el.name);
    if (!pass)
      return absl::InvalidArgumentError(absl::StrCat("unknown pass '", el.name, "' in pipeline \"", pipeline,
                                                     "\" (known: ", absl::StrJoin(RegisteredPassNames(), ", "), ")"));
    for (const auto& [k, v] : el.options) MEMRA_RETURN_IF_ERROR(pass->SetOption(k, v));
    if (Selected(options_.disable_passes, el.name)) continue;
    AddPass(std::move(pass));
  }
  return absl::OkStatus();
}

void PassManager::AddPass(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }

std::string PassManager::PipelineString(size_t n) const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < n && i < passes_.size(); ++i)
    parts.push_back(absl::StrCat(passes_[i]->name(), passes_[i]->OptionsString()));
  return absl::StrJoin(parts, ",");
}

bool PassManager::Selected(const std::vector<std::string>& names, absl::string_view pass) const {
  for (const auto& n : names)
    if (n == pass) return true;
  return false;
}

absl::Status PassManager::Dump(const ir::Module& m, size_t index, absl::string_view label, bool changed) {
  if (options_.dump_dir.empty()) return absl::OkStatus();
  if (std::error_code ec = llvm::sys::fs::create_directories(Ref(options_.dump_dir)))
    return absl::InternalError(absl::StrCat("--dump-dir: cannot create ", options_.dump_dir, ": ", ec.message()));
  std::string file = absl::StrFormat("%02d-%s.mir", index, label);
  llvm::SmallString<256> path(Ref(options_.dump_dir));
  llvm::sys::path::append(path, file);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("--dump-dir: cannot write ", path.str().str(), ": ", ec.message()));
  std::string done = PipelineString(index);
  std::string rest;
  {
    std::vector<std::string> parts;
    for (size_t i = index; i < passes_.size(); ++i)
      parts.push_back(absl::StrCat(passes_[i]->name(), passes_[i]->OptionsString()));
    rest = absl::StrJoin(parts, ",");
  }
  if (index == 0) {
    os << "// memra dump 00-input: the input IR, before pass 1 of " << passes_.size() << "\n";
  } else {
    os << "// memra dump " << file.substr(0, file.size() - 4) << ": the IR after pass " << index << " of "
       << passes_.size() << " ('" << Ref(label) << "'" << (changed ? ", changed" : ", unchanged") << ")\n";
  }
  os << "// pipeline: " << PipelineString() << "\n";
  os << "// reproduce: memra opt " << options_.input_name << " --passes=" << done << "\n";
  os << "// continue: memra opt " << file << " --passes=" << rest << "\n";
  ir::PrintModule(m, os);
  return absl::OkStatus();
}

absl::Status PassManager::Run(ir::Module& m) {
  Clock::time_point t_all = Clock::now();
  pass_ms_.assign(passes_.size(), 0.0);
  {
    Clock::time_point t0 = Clock::now();
    absl::Status s = ir::VerifyModule(m, {options_.input_name});
    verify_ms_ += MsSince(t0);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("input IR is invalid: ", s.message()));
  }
  MEMRA_RETURN_IF_ERROR(Dump(m, 0, "input", false));
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass& pass = *passes_[i];
    std::string name(pass.name());
    std::string position = absl::StrCat(i + 1, "/", passes_.size());
    if (options_.print_before_all || Selected(options_.print_before, name)) {
      *log_ << "// -----// IR Dump Before " << name << " (" << position << ") //----- //\n";
      ir::PrintModule(m, *log_);
      *log_ << "\n";
    }
    std::string before;
    if (options_.verify_each) before = ir::ToText(m);
    Clock::time_point t0 = Clock::now();
    absl::StatusOr<bool> changed = pass.Run(m);
    pass_ms_[i] += MsSince(t0);
    if (!changed.ok())
      return absl::Status(changed.status().code(),
                          absl::StrCat("pass '", name, "' (", position, ") failed: ", changed.status().message()));
    if (options_.verify_each) {
      Clock::time_point tv = Clock::now();
      absl::Status s = ir::VerifyModule(m, {options_.input_name});
      if (s.ok() && !*changed && ir::ToText(m) != before)
        s = absl::InternalError("it reported no change but modified the IR");
      verify_ms_ += MsSince(tv);
      if (!s.ok()) {
        (void)Dump(m, i + 1, name + ".invalid", *changed);
        return absl::InternalError(
            absl::StrCat("pass '", name, "' (", position, ") produced invalid IR: ", s.message()));
      }
    }
    bool selected = options_.print_after_all || Selected(options_.print_after, name);
    bool print = options_.print_after_change
                     ? *changed && (selected || (!options_.print_after_all && options_.print_after.empty()))
                     : selected;
    if (print) {
      *log_ << "// -----// IR Dump After " << name << " (" << position << ")" << (*changed ? "" : " (no change)")
            << " //----- //\n";
      ir::PrintModule(m, *log_);
      *log_ << "\n";
    }
    MEMRA_RETURN_IF_ERROR(Dump(m, i + 1, name, *changed));
  }
  total_ms_ += MsSince(t_all);
  if (options_.time_passes) PrintTiming(*log_);
  if (options_.print_statistics) PrintStatistics(*log_);
  return absl::OkStatus();
}

void PassManager::PrintTiming(llvm::raw_ostream& os) const {
  os << "===" << std::string(73, '-') << "===\n"
     << "                      ... Pass execution timing report ...\n"
     << "===" << std::string(73, '-') << "===\n";
  os << absl::StrFormat("  Total Execution Time: %.4f seconds\n\n", total_ms_ / 1000.0);
  os << "   Wall Time (ms)    (%)   Name\n";
  double total = total_ms_ > 0 ? total_ms_ : 1;
  for (size_t i = 0; i < passes_.size() && i < pass_ms_.size(); ++i)
    os << absl::StrFormat("   %12.3f  %6.1f%%   %s\n", pass_ms_[i], 100.0 * pass_ms_[i] / total, passes_[i]->name());
  os << absl::StrFormat("   %12.3f  %6.1f%%   %s\n", verify_ms_, 100.0 * verify_ms_ / total, "(verifier)");
  os << absl::StrFormat("   %12.3f  %6.1f%%   %s\n", total_ms_, 100.0, "Total");
}

void PassManager::PrintStatistics(llvm::raw_ostream& os) const {
  os << "===" << std::string(73, '-') << "===\n"
     << "                         ... Pass statistics report ...\n"
     << "===" << std::string(73, '-') << "===\n";
  for (const auto& pass : passes_) {
    os << "'" << Ref(pass->name()) << "'\n";
    for (const Statistic* s : pass->statistics())
      os << absl::StrFormat("  (S) %6d %s - %s\n", s->value(), s->name(), s->description());
  }
}

}  // namespace memra::passes

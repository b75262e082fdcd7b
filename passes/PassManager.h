// The PassManager: a pipeline of passes built from a string, the verifier between passes, IR
// printing before/after passes, numbered dumps, timing and statistics. Commands that run
// pipelines (`memra opt`, `memra compile`, `memra run`) fill PassManagerOptions from the shared
// flags of tools/PassManagerFlags.h.
//
//   PassManagerOptions opts;
//   opts.pipeline = "canonicalize,dce,cse";
//   MEMRA_ASSIGN_OR_RETURN(auto pm, PassManager::Create(opts));
//   MEMRA_RETURN_IF_ERROR(pm->Run(module));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llvm/Support/raw_ostream.h"
#include "passes/Pass.h"

namespace memra::passes {

#ifdef NDEBUG
inline constexpr bool kVerifyEachDefault = false;
#else
inline constexpr bool kVerifyEachDefault = true;
#endif

struct PassManagerOptions {
  // Passes separated by ',', each `name` or `name{key=value key=value}`.
  std::string pipeline;
  // Verify the IR after every pass (and check that a pass reporting "no change" changed nothing).
  // The input is always verified before the first pass.
  bool verify_each = kVerifyEachDefault;
  bool print_before_all = false;
  bool print_after_all = false;
  std::vector<std::string> print_before;  // pass names
  std::vector<std::string> print_after;
  // Print after every pass that changed the IR; combined with print-after(-all), only those of
  // the selected passes that changed it.
  bool print_after_change = false;
  // Writes 00-input.mir and NN-<pass>.mir after pass NN (1-based) into this directory.
  std::string dump_dir;
  bool time_passes = false;                 // table of wall time per pass (and verifier)
  std::vector<std::string> disable_passes;  // names removed from the pipeline
  bool print_statistics = false;            // pass statistics after the run
  // Name of the input recorded in dump headers (the command that reproduces a dump).
  std::string input_name = "<input>";
};

class PassManager {
 public:
  explicit PassManager(PassManagerOptions options);
  // A manager with options.pipeline parsed (unknown pass / option names are errors).
  static absl::StatusOr<std::unique_ptr<PassManager>> Create(const PassManagerOptions& options);

  // Appends the passes of a pipeline string (disabled passes are skipped).
  absl::Status AddPipeline(absl::string_view pipeline);
  void AddPass(std::unique_ptr<Pass> pass);
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }
  // The pipeline as a string that recreates it (with non-default options).
  std::string PipelineString() const { return PipelineString(passes_.size()); }
  // The first n passes only.
  std::string PipelineString(size_t n) const;

  // Where IR prints, timing and statistics go (default: llvm::errs()).
  void set_log(llvm::raw_ostream* log) { log_ = log; }

  // Verifies the input, runs every pass; stops at the first error (pass failure or invalid IR,
  // the message names the pass and its position).
  absl::Status Run(ir::Module& m);

  void PrintTiming(llvm::raw_ostream& os) const;
  void PrintStatistics(llvm::raw_ostream& os) const;

 private:
  absl::Status Dump(const ir::Module& m, size_t index, absl::string_view label, bool changed);
  bool Selected(const std::vector<std::string>& names, absl::string_view pass) const;

  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
  llvm::raw_ostream* log_;
  std::vector<double> pass_ms_;
  double verify_ms_ = 0;
  double total_ms_ = 0;
};

// Splits "a,b{x=1 y=2},c" into pass names and option assignments.
struct PipelineElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;
};
absl::StatusOr<std::vector<PipelineElement>> ParsePipeline(absl::string_view pipeline);

}  // namespace memra::passes

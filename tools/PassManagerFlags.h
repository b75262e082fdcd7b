// The pass-manager command-line flags, for any subcommand that runs a pipeline:
//
//   static llvm::cl::SubCommand CompileSub("compile", "...");
//   static memra::tools::PassManagerFlags pm_flags(CompileSub);   // after the SubCommand
//   ...
//   passes::PassManagerOptions opts = pm_flags.Options();
//
// Flags: --passes, --verify-each, --print-before-all, --print-after-all, --print-before=,
// --print-after=, --print-after-change, --dump-dir=, --time-passes, --disable-passes=,
// --pass-statistics.
#pragma once

#include <string>

#include "llvm/Support/CommandLine.h"
#include "passes/PassManager.h"

namespace memra::tools {

class PassManagerFlags {
 public:
  // `default_pipeline` is the --passes default of this command.
  explicit PassManagerFlags(llvm::cl::SubCommand& sub, const char* default_pipeline = "");
  PassManagerFlags(const PassManagerFlags&) = delete;
  PassManagerFlags& operator=(const PassManagerFlags&) = delete;

  // The options as given on the command line.
  passes::PassManagerOptions Options() const;
  // Whether --passes was given (else Options().pipeline is the default pipeline).
  bool pipeline_given() const { return passes_.getNumOccurrences() > 0; }
  // Whether any of these flags was given (a plan, compiled already, takes none of them).
  bool any_given() const;

 private:
  // Descriptions built at run time (cl::desc keeps a reference, so they live here).
  std::string passes_desc_, verify_desc_;
  llvm::cl::opt<std::string> passes_;
  llvm::cl::opt<bool> verify_each_;
  llvm::cl::opt<bool> print_before_all_;
  llvm::cl::opt<bool> print_after_all_;
  llvm::cl::list<std::string> print_before_;
  llvm::cl::list<std::string> print_after_;
  llvm::cl::opt<bool> print_after_change_;
  llvm::cl::opt<std::string> dump_dir_;
  llvm::cl::opt<bool> time_passes_;
  llvm::cl::list<std::string> disable_passes_;
  llvm::cl::opt<bool> statistics_;
};

}  // namespace memra::tools

#include "passes/FunctionPass.h"

#include <vector>

#include "ir/StatusMacros.h"

namespace memra::passes {

absl::StatusOr<bool> FunctionPass::RunOnFunctions(ir::Module& m) {
  // A snapshot: m.functions() is a vector a misbehaving RunOnFunction could grow.
  std::vector<ir::Function*> functions;
  for (const auto& f : m.functions()) functions.push_back(f.get());
  bool changed = false;
  for (ir::Function* f : functions) {
    if (!ShouldRunOn(*f)) continue;
    MEMRA_ASSIGN_OR_RETURN(bool c, RunOnFunction(*f, m));
    changed |= c;
  }
  return changed;
}

}  // namespace memra::passes

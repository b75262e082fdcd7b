// A pass that transforms each function on its own (the idea of XLA's HloComputationPass and
// MLIR's OperationPass<FuncOp>): it implements RunOnFunction, and Run calls it on every function
// of the module that ShouldRunOn selects, in module order, ORing "changed".
//
//   class MyPass : public FunctionPass {
//     absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module& m) override { ... }
//   };
//
// A pass with module-level work too (checking an option first, erasing globals after) overrides
// Run and calls RunOnFunctions(m) from it.
#pragma once

#include "absl/status/statusor.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "passes/Pass.h"

namespace memra::passes {

class FunctionPass : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Module& m) override { return RunOnFunctions(m); }

 protected:
  // Transforms `f`, a function of `m`; true if it changed anything. It may read `m` (globals,
  // attributes) but not add or erase functions.
  virtual absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module& m) = 0;
  // The filter: functions it returns false for are left alone (default: every function). It may
  // count what it leaves out in a statistic.
  virtual bool ShouldRunOn(const ir::Function& f) { return true; }

  // RunOnFunction over the selected functions (every one runs, even after a change); the first
  // error stops it.
  absl::StatusOr<bool> RunOnFunctions(ir::Module& m);
};

}  // namespace memra::passes

// dce: erases ops whose results are unused and that write no state (walking backwards, so
// whole dead chains go in one run), then segments left empty. With `globals=true` also erases
// weights and states no function uses.
#include "ir/Module.h"
#include "ir/StatusMacros.h"
#include "passes/FunctionPass.h"
#include "passes/PassRegistry.h"

namespace memra::passes {
namespace {

class DcePass : public FunctionPass {
 public:
  absl::string_view name() const override { return "dce"; }
  absl::string_view description() const override {
    return "Erases unused ops without side effects (and empty segments)";
  }

  // The functions, then (globals=true) the module's weights.
  absl::StatusOr<bool> Run(ir::Module& m) override {
    MEMRA_ASSIGN_OR_RETURN(bool changed, RunOnFunctions(m));
    if (*globals_) {
      std::vector<std::string> dead;
      for (const auto& w : m.weights())
        if (!w->has_uses()) dead.push_back(w->name());
      for (const auto& n : dead) {
        m.EraseWeight(n);
        ++erased_globals_;
        changed = true;
      }
    }
    return changed;
  }

 private:
  absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module&) override {
    bool changed = false;
    std::vector<ir::Op*> ops = f.Ops();
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      ir::Op* op = *it;
      if (op->is(ir::OpKind::kSegment)) {
        if (op->body()->empty()) {
          op->Erase();
          ++erased_segments_;
          changed = true;
        }
        continue;
      }
      if (op->is_trivially_dead()) {
        op->Erase();
        ++erased_ops_;
        changed = true;
      }
    }
    return changed;
  }

  Option<bool> globals_{this, "globals", "also erase weights no function uses", false};
  Statistic erased_ops_{this, "erased-ops", "unused ops erased"};
  Statistic erased_segments_{this, "erased-segments", "empty segments erased"};
  Statistic erased_globals_{this, "erased-weights", "unused weights erased"};
};

}  // namespace

std::unique_ptr<Pass> CreateDcePass() { return std::make_unique<DcePass>(); }

}  // namespace memra::passes

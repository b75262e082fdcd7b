// cse: replaces a pure op by an earlier op of the same kind with the same operands, attributes
// and result types (operands of commutative ops in either order). Ops touching state are never
// merged. Segments are transparent, so an op may be replaced by an equal one in an earlier
// segment.
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "ir/Module.h"
#include "passes/FunctionPass.h"
#include "passes/PassRegistry.h"

namespace memra::passes {
namespace {

struct OpKey {
  const ir::Op* op;
  bool swapped;  // commutative op whose two operands are compared swapped
};

llvm::SmallVector<ir::Value*, 4> CanonicalOperands(const ir::Op& op) {
  llvm::SmallVector<ir::Value*, 4> ops(op.operands().begin(), op.operands().end());
  if (op.info().HasFlag(ir::op_flags::kCommutative) && ops.size() == 2 && ops[0]->type() == ops[1]->type() &&
      std::less<ir::Value*>()(ops[1], ops[0]))
    std::swap(ops[0], ops[1]);
  return ops;
}

struct OpHash {
  size_t operator()(const ir::Op* op) const {
    size_t h = absl::HashOf(static_cast<int>(op->kind()), op->attrs().Hash());
    for (ir::Value* v : CanonicalOperands(*op)) h = absl::HashOf(h, v);
    for (ir::Value* r : op->results()) h = absl::HashOf(h, r->type());
    return h;
  }
};

struct OpEq {
  bool operator()(const ir::Op* a, const ir::Op* b) const {
    if (a == b) return true;
    if (a->kind() != b->kind() || a->num_results() != b->num_results()) return false;
    if (CanonicalOperands(*a) != CanonicalOperands(*b)) return false;
    if (a->attrs() != b->attrs()) return false;
    for (unsigned i = 0; i < a->num_results(); ++i)
      if (a->result(i)->type() != b->result(i)->type()) return false;
    return true;
  }
};

class CsePass : public FunctionPass {
 public:
  absl::string_view name() const override { return "cse"; }
  absl::string_view description() const override {
    return "Merges equal side-effect-free ops (common subexpression elimination)";
  }

  absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module&) override {
    bool changed = false;
    absl::flat_hash_map<const ir::Op*, ir::Op*, OpHash, OpEq> seen;
    for (ir::Op* op : f.Ops()) {
      if (!op->is_pure() || op->num_results() == 0) continue;
      auto [it, inserted] = seen.try_emplace(op, op);
      if (inserted) continue;
      ir::Op* keep = it->second;
      for (unsigned i = 0; i < op->num_results(); ++i) {
        // Keep the earlier name when the surviving value has none.
        if (keep->result(i)->name().empty() && !op->result(i)->name().empty())
          keep->result(i)->set_name(op->result(i)->name());
        op->result(i)->ReplaceAllUsesWith(keep->result(i));
      }
      op->Erase();
      ++merged_;
      changed = true;
    }
    return changed;
  }

 private:
  Statistic merged_{this, "merged-ops", "ops replaced by an equal earlier op"};
};

}  // namespace

std::unique_ptr<Pass> CreateCsePass() { return std::make_unique<CsePass>(); }

}  // namespace memra::passes

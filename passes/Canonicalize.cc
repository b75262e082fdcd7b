// canonicalize: local simplifications to a fixed point, each counted in a statistic:
//   fold-reshape     reshape(reshape(x)) -> reshape(x)
//   identity-reshape reshape(x) to x's own type -> x
//   identity-view    view covering the whole axis -> x;  view(view(x)) on one axis -> one view
//   identity-cast    cast to x's own dtype -> x
//   identity-op      scale by 1.0, single-operand concat, single-piece split, take_last_row of
//                    one row -> x
//   fold-scale       scale(scale(x, a), b) -> scale(x, a*b)
//   fold-constant    mul/add with a splat constant: x * 1 -> x, x + 0 -> x, x * c -> scale(x, c),
//                    scale(constant c, f) -> constant c*f; a constant first operand of a
//                    commutative op moves second
//   canonical-attrs  negative axis attributes made non-negative; optional attributes equal to
//                    their default dropped (rope mode = "neox")
// Ops left without uses and without side effects are erased (like MLIR's greedy rewriter).
#include "absl/container/flat_hash_set.h"
#include "ir/Builder.h"
#include "ir/Module.h"
#include "passes/FunctionPass.h"
#include "passes/PassRegistry.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;

std::optional<double> SplatValue(const Value* v) {
  if (!v->def() || !v->def()->is(OpKind::kConstant)) return std::nullopt;
  return v->def()->attrs().GetF64("value");
}

class CanonicalizePass : public FunctionPass {
 public:
  absl::string_view name() const override { return "canonicalize"; }
  absl::string_view description() const override {
    return "Folds reshapes and views, identity ops and constant attributes; erases dead ops";
  }

  absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module&) override {
    bool changed = false;
    for (int iter = 0; iter < *max_iterations_; ++iter) {
      bool round = false;
      for (Op* op : f.Ops()) {
        if (erased_.contains(op)) continue;
        round |= Simplify(op);
      }
      round |= EraseDead(f);
      erased_.clear();
      if (!round) break;
      changed = true;
    }
    return changed;
  }

 private:
  // Replaces op's single result by `v` (same type) and erases op.
  bool ReplaceWith(Op* op, Value* v, Statistic& stat) {
    if (op->result(0)->type() != v->type()) return false;
    // A value built by the rewrite takes over the name of the value it replaces.
    if (v->name().empty() && v->def() && v->kind() == ir::Value::Kind::kResult) v->set_name(op->result(0)->name());
    op->result(0)->ReplaceAllUsesWith(v);
    Erase(op);
    ++stat;
    return true;
  }
  void Erase(Op* op) {
    erased_.insert(op);
    op->Erase();
  }

  bool EraseDead(ir::Function& f) {
    bool changed = false;
    std::vector<Op*> ops = f.Ops();
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      if ((*it)->is_trivially_dead()) {
        (*it)->Erase();
        ++dead_;
        changed = true;
      }
    }
    return changed;
  }

  bool NormalizeAxis(Op* op, int64_t rank) {
    std::optional<int64_t> axis = op->attrs().GetI64("axis");
    if (!axis || *axis >= 0 || *axis + rank < 0) return false;
    op->attrs().Set("axis", *axis + rank);
    ++canonical_attrs_;
    return true;
  }

  bool Simplify(Op* op) {
    if (op->num_operands() > 0)
      for (Value* v : op->operands())
        if (!v) return false;
    Value* x = op->num_operands() > 0 ? op->operand(0) : nullptr;
    switch (op->kind()) {
      case OpKind::kReshape: {
        if (x->type() == op->result(0)->type()) return ReplaceWith(op, x, identity_reshape_);
        if (x->def() && x->def()->is(OpKind::kReshape)) {
          op->SetOperand(0, x->def()->operand(0));
          ++fold_reshape_;
          return true;
        }
        return false;
      }
      case OpKind::kView: {
        bool changed = NormalizeAxis(op, x->rank());
        int64_t axis = op->attrs().I64Or("axis", 0);
        if (axis < 0 || axis >= x->rank()) return changed;
        if (x->shape()[axis].IsConstant() && op->attrs().I64Or("offset", -1) == 0 &&
            op->attrs().I64Or("size", -1) == x->shape()[axis].value())
          return ReplaceWith(op, x, identity_view_) || changed;
        if (x->def() && x->def()->is(OpKind::kView) && x->def()->attrs().GetI64("axis") == axis) {
          Op* inner = x->def();
          op->attrs().Set("offset", op->attrs().I64Or("offset", 0) + inner->attrs().I64Or("offset", 0));
          op->SetOperand(0, inner->operand(0));
          ++identity_view_;
          return true;
        }
        return changed;
      }
      case OpKind::kCast:
        if (x->type() == op->result(0)->type()) return ReplaceWith(op, x, identity_cast_);
        return false;
      case OpKind::kScale: {
        double factor = op->attrs().F64Or("factor", 0);
        if (factor == 1.0) return ReplaceWith(op, x, identity_op_);
        if (x->def() && x->def()->is(OpKind::kScale)) {
          op->attrs().Set("factor", factor * x->def()->attrs().F64Or("factor", 0));
          op->SetOperand(0, x->def()->operand(0));
          ++fold_scale_;
          return true;
        }
        if (std::optional<double> c = SplatValue(x)) {
          ir::OpBuilder b(op->parent_block(), ir::Block::iterator(*op));
          Value* folded = b.Constant(op->result(0)->type(), *c * factor);
          if (!b.ok()) return false;
          return ReplaceWith(op, folded, fold_constant_);
        }
        return false;
      }
      case OpKind::kAdd:
      case OpKind::kMul: {
        Value* a = op->operand(0);
        Value* bv = op->operand(1);
        // A splat constant goes second (when the swap keeps the types valid).
        if (SplatValue(a) && !SplatValue(bv) && a->type() == bv->type()) {
          op->SetOperand(0, bv);
          op->SetOperand(1, a);
          ++fold_constant_;
          return true;
        }
        std::optional<double> c = SplatValue(bv);
        if (!c) return false;
        bool is_mul = op->is(OpKind::kMul);
        if ((is_mul && *c == 1.0) || (!is_mul && *c == 0.0)) return ReplaceWith(op, a, fold_constant_);
        if (is_mul && IsFloat(a->dtype())) {
          ir::OpBuilder b(op->parent_block(), ir::Block::iterator(*op));
          Value* scaled = b.Scale(a, *c);
          if (!b.ok()) return false;
          return ReplaceWith(op, scaled, fold_constant_);
        }
        return false;
      }
      case OpKind::kConcat: {
        bool changed = NormalizeAxis(op, x->rank());
        if (op->num_operands() == 1) return ReplaceWith(op, x, identity_op_) || changed;
        return changed;
      }
      case OpKind::kSplit: {
        bool changed = NormalizeAxis(op, x->rank());
        if (op->num_results() == 1) return ReplaceWith(op, x, identity_op_) || changed;
        return changed;
      }
      case OpKind::kTakeLastRow:
        if (x->rank() >= 1 && x->shape()[0] == ir::Dim(1)) return ReplaceWith(op, x, identity_op_);
        return false;
      case OpKind::kRope:
        if (op->attrs().GetString("mode") == std::optional<std::string>("neox")) {
          op->attrs().Erase("mode");
          ++canonical_attrs_;
          return true;
        }
        return false;
      default:
        return false;
    }
  }

  Option<int64_t> max_iterations_{this, "max-iterations", "rounds over each function before giving up", 10, 1, 1000};
  Statistic fold_reshape_{this, "fold-reshape", "reshape(reshape(x)) folded"};
  Statistic identity_reshape_{this, "identity-reshape", "reshapes to the same type removed"};
  Statistic identity_view_{this, "identity-view", "identity views removed or nested views merged"};
  Statistic identity_cast_{this, "identity-cast", "casts to the same dtype removed"};
  Statistic identity_op_{this, "identity-op", "other identity ops removed"};
  Statistic fold_scale_{this, "fold-scale", "nested scales folded"};
  Statistic fold_constant_{this, "fold-constant", "ops with splat constants folded"};
  Statistic canonical_attrs_{this, "canonical-attrs", "attributes put in canonical form"};
  Statistic dead_{this, "erased-dead", "dead ops erased"};
  absl::flat_hash_set<Op*> erased_;
};

}  // namespace

std::unique_ptr<Pass> CreateCanonicalizePass() { return std::make_unique<CanonicalizePass>(); }

}  // namespace memra::passes

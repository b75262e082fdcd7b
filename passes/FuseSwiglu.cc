// fuse-swiglu: the SwiGLU FFN's gate and up projections of one input and their gating become
// one op,
//
//   %g = matmul(%x, @w_gate)
//   %u = matmul(%x, @w_up)          ->    %y = matmul_swiglu(%x, @w_gate, @w_up)
//   %y = swiglu(%g, %u)
//
// so a backend can run both GEMMs as one launch with the gating in its epilogue and never
// store g and u. Fuses when both products have the swiglu as their only user (otherwise the
// products are needed anyway: left to fuse-matmul-group). Run it before fuse-matmul-group, which
// would otherwise group the two products first. The fused op sits where the swiglu was.
// On the CPU executor it computes the two matmuls and the swiglu exactly (bit-identical).
#include "ir/Builder.h"
#include "ir/Module.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

class FuseSwigluPass : public Pass {
 public:
  absl::string_view name() const override { return "fuse-swiglu"; }
  absl::string_view description() const override {
    return "Fuses matmul gate/up products of one input and their swiglu into matmul_swiglu";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    bool changed = false;
    for (const auto& f : m.functions()) {
      for (Op* sw : f->Ops()) {
        if (!sw->is(OpKind::kSwiglu)) continue;
        Op* g = DefOf(sw->operand(0), OpKind::kMatMul);
        Op* u = DefOf(sw->operand(1), OpKind::kMatMul);
        if (g == nullptr || u == nullptr || g == u) continue;
        if (g->operand(0) != u->operand(0)) {
          ++skipped_inputs_;
          continue;
        }
        if (!HasSingleUse(g->result(0)) || !HasSingleUse(u->result(0))) {
          ++skipped_uses_;
          continue;
        }
        ir::OpBuilder b(sw->parent_block(), ir::Block::iterator(*sw));
        auto fused = b.Create(OpKind::kMatMulSwiglu, {g->operand(0), g->operand(1), u->operand(1)});
        if (!fused.ok()) return fused.status();
        ReplaceValue(sw->result(0), (*fused)->result(0));
        sw->Erase();
        g->Erase();
        u->Erase();
        ++fused_;
        changed = true;
      }
    }
    return changed;
  }

 private:
  Statistic fused_{this, "fused", "matmul + matmul + swiglu fused into matmul_swiglu"};
  Statistic skipped_inputs_{this, "skipped-inputs", "swiglus of products of different inputs"};
  Statistic skipped_uses_{this, "skipped-uses", "swiglus whose products have other users"};
};

}  // namespace

std::unique_ptr<Pass> CreateFuseSwigluPass() { return std::make_unique<FuseSwigluPass>(); }

}  // namespace memra::passes

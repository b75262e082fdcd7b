// fuse-gated-rmsnorm: an RMSNorm multiplied by the SiLU of a gate becomes gated_rms_norm,
//
//   %n = rms_norm(%x, @w) {eps}
//   %s = silu(%z)                    ->    %y = gated_rms_norm(%x, %z, @w) {eps}
//   %y = mul(%n, %s)
//
// (the delta-net output norm). The Qwen3.5 lowering already emits gated_rms_norm, so on those
// modules the pass finds nothing (fused = 0); it serves IR from other frontends and `memra opt`.
// Fuses when x and z have the same type and the norm has no other user (the silu stays if it
// has other users). The fused op sits where the mul was. Numerics: the CPU gated_rms_norm kernel
// computes the same per-element product ((x * rms scale) * w) * silu(z).
#include "ir/Builder.h"
#include "ir/Module.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

class FuseGatedRmsNormPass : public Pass {
 public:
  absl::string_view name() const override { return "fuse-gated-rmsnorm"; }
  absl::string_view description() const override {
    return "Fuses mul(rms_norm(x), silu(z)) into gated_rms_norm";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    bool changed = false;
    for (const auto& f : m.functions()) {
      for (Op* mul : f->Ops()) {
        if (!mul->is(OpKind::kMul)) continue;
        for (unsigned side : {0u, 1u}) {
          Op* norm = DefOf(mul->operand(side), OpKind::kRmsNorm);
          Op* silu = DefOf(mul->operand(1 - side), OpKind::kSilu);
          if (norm == nullptr || silu == nullptr || !HasSingleUse(norm->result(0))) continue;
          if (norm->operand(0)->type() != silu->operand(0)->type()) continue;
          ir::OpBuilder b(mul->parent_block(), ir::Block::iterator(*mul));
          auto fused = b.Create(OpKind::kGatedRmsNorm, {norm->operand(0), silu->operand(0), norm->operand(1)},
                                {{"eps", norm->attrs().F64Or("eps", 0)}});
          if (!fused.ok()) return fused.status();
          ReplaceValue(mul->result(0), (*fused)->result(0));
          mul->Erase();
          norm->Erase();
          if (!silu->result(0)->has_uses()) silu->Erase();
          ++fused_;
          changed = true;
          break;
        }
      }
    }
    return changed;
  }

 private:
  Statistic fused_{this, "fused", "rms_norm * silu fused into gated_rms_norm"};
};

}  // namespace

std::unique_ptr<Pass> CreateFuseGatedRmsNormPass() { return std::make_unique<FuseGatedRmsNormPass>(); }

}  // namespace memra::passes

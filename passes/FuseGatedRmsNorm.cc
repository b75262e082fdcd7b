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
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct GatedNormMatch {
  Op* mul;
  Op* norm;
  Op* silu;
};

class GatedRmsNormPattern : public RewritePattern<GatedNormMatch> {
 public:
  explicit GatedRmsNormPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kMul, "fused", "rms_norm * silu fused into gated_rms_norm") {}

  MatchResult<GatedNormMatch> Match(Op& mul, const PatternRewriter&) override {
    // Either operand order; at most one side can have the shape.
    for (unsigned side : {0u, 1u}) {
      Op* norm = DefOf(mul.operand(side), OpKind::kRmsNorm);
      Op* silu = DefOf(mul.operand(1 - side), OpKind::kSilu);
      if (norm == nullptr || silu == nullptr || norm->num_operands() < 2) continue;
      if (!HasSingleUse(norm->result(0))) return Skip(skipped_uses_);
      if (norm->operand(0)->type() != silu->operand(0)->type()) return Skip(skipped_type_);
      return GatedNormMatch{&mul, norm, silu};
    }
    return NoMatch();
  }

  absl::Status Rewrite(const GatedNormMatch& m, PatternRewriter& rw) override {
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.mul, OpKind::kGatedRmsNorm,
                                                 {m.norm->operand(0), m.silu->operand(0), m.norm->operand(1)},
                                                 {{"eps", m.norm->attrs().F64Or("eps", 0)}}));
    rw.Replace(m.mul->result(0), fused->result(0));
    rw.Erase(m.mul);
    rw.Erase(m.norm);
    if (!m.silu->result(0)->has_uses()) rw.Erase(m.silu);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_uses_{pass(), "skipped-uses", "gated norms whose norm has other users"};
  Statistic skipped_type_{pass(), "skipped-type", "gated norms whose x and gate differ in type"};
};

class FuseGatedRmsNormPass : public PatternPass {
 public:
  FuseGatedRmsNormPass() { AddPattern<GatedRmsNormPattern>(); }
  absl::string_view name() const override { return "fuse-gated-rmsnorm"; }
  absl::string_view description() const override { return "Fuses mul(rms_norm(x), silu(z)) into gated_rms_norm"; }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseGatedRmsNormPass() { return std::make_unique<FuseGatedRmsNormPass>(); }

}  // namespace memra::passes

// fuse-matmul-delta-net-step: a decode step's delta-net input projections and the delta_net_step
// that reads them become one matmul_delta_net_step (ir/Ops.def):
//
//   %qkv, %zp, %b, %a = matmul_group(%x, @w_qkv, @w_z, @w_b, @w_a)
//   %z = reshape(%zp)                                             ->   %y = matmul_delta_net_step(%x,
//   %y = delta_net_step(%qkv, @cw, %b, %a, @dt, @A, %z, @nw, @cs, @ds)      @w_qkv, @w_z, @w_b, @w_a, @cw,
//          {scale, qk_l2_eps, eps}                                          @dt, @A, @nw, @cs, @ds) {...}
//
// where the rows are one token (a static T = 1: the decode function), each of the group's results
// and z's reshape has the one use shown, the group carries no attributes, and its four matrices
// are weights of one float dtype (f32, f16 or bf16: the 16-bit GEMV's storages; a quantized layer
// keeps the two ops, its group running on GemvQuant.cu) with K a multiple of 32. On the GPU the
// two launches become one: each head's step runs in the product's block that completes its rows
// (kernels/cuda/Gemv.cu gemv_group_delta_step). Runs after fuse-matmul-group and
// fuse-delta-net-step, which form the two ops. Numerics: the CPU executor runs the two ops'
// kernels in order, so the results are the same bits.
#include "ir/StatusMacros.h"
#include "ir/TypeInference.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct ProjectedStepMatch {
  Op* step;
  Op* group;
  Op* z_reshape;
};

class MatMulDeltaNetStepPattern : public RewritePattern<ProjectedStepMatch> {
 public:
  explicit MatMulDeltaNetStepPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kDeltaNetStep, "fused",
                       "delta-net steps fused with the input projections before them") {}

  MatchResult<ProjectedStepMatch> Match(Op& step, const PatternRewriter&) override {
    ProjectedStepMatch m{&step, nullptr, nullptr};
    m.group = DefOf(step.operand(0), OpKind::kMatMulGroup);
    if (m.group == nullptr) return NoMatch();
    if (m.group->num_operands() != 5 || m.group->num_results() != 4) return Skip(skipped_form_);
    // z through its reshape to [1, Hv, Dv] (the group's result is [1, Hv Dv]).
    m.z_reshape = DefOf(step.operand(6), OpKind::kReshape);
    if (m.z_reshape == nullptr) return Skip(skipped_form_);
    if (!HasSingleUse(m.z_reshape->result(0))) return Skip(skipped_uses_);
    const ir::Value* z = m.z_reshape->operand(0);
    if (step.operand(0) != m.group->result(0) || z != m.group->result(1) || step.operand(2) != m.group->result(2) ||
        step.operand(3) != m.group->result(3))
      return Skip(skipped_form_);
    for (unsigned i = 0; i < 4; ++i)
      if (!HasSingleUse(m.group->result(i))) return Skip(skipped_uses_);
    const ir::Shape& xs = m.group->operand(0)->shape();
    if (xs.rank() != 2 || !xs[0].IsConstant() || xs[0].value() != 1) return Skip(skipped_tokens_);
    if (!xs[1].IsConstant() || xs[1].value() % 32 != 0 || !m.group->attrs().empty()) return Skip(skipped_weight_);
    for (unsigned i = 1; i < 5; ++i) {
      const ir::Value* w = m.group->operand(i);
      if (!llvm::isa<ir::Weight>(w) || !ir::IsFloatWeight(w->dtype()) || w->dtype() != m.group->operand(1)->dtype())
        return Skip(skipped_weight_);
    }
    return m;
  }

  absl::Status Rewrite(const ProjectedStepMatch& m, PatternRewriter& rw) override {
    ir::AttrDict attrs;
    CopyAttrs(m.step->attrs(), attrs, {"scale", "qk_l2_eps", "eps"});
    const Op& s = *m.step;
    const Op& g = *m.group;
    MEMRA_ASSIGN_OR_RETURN(
        Op * fused, rw.Create(m.step, OpKind::kMatMulDeltaNetStep,
                              {g.operand(0), g.operand(1), g.operand(2), g.operand(3), g.operand(4), s.operand(1),
                               s.operand(4), s.operand(5), s.operand(7), s.operand(8), s.operand(9)},
                              std::move(attrs)));
    rw.ReplaceOp(m.step, fused);
    rw.Erase(m.z_reshape);
    rw.Erase(m.group);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_tokens_{pass(), "skipped-tokens", "projections of more than one token (or of an unknown count)"};
  Statistic skipped_form_{pass(), "skipped-form",
                          "steps whose x, z, b and a are not one four-matrix group's results in that order"};
  Statistic skipped_uses_{pass(), "skipped-uses", "groups (or z reshapes) whose results have other users"};
  Statistic skipped_weight_{pass(), "skipped-weight",
                            "groups whose matrices are not float weights of one dtype, whose K is not a multiple "
                            "of 32, or that carry attributes"};
};

class FuseMatMulDeltaNetStepPass : public PatternPass {
 public:
  FuseMatMulDeltaNetStepPass() { AddPattern<MatMulDeltaNetStepPattern>(); }
  absl::string_view name() const override { return "fuse-matmul-delta-net-step"; }
  absl::string_view description() const override {
    return "Fuses a one-token delta-net layer's input projections (a float matmul_group) with its delta_net_step "
           "into matmul_delta_net_step";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseMatMulDeltaNetStepPass() { return std::make_unique<FuseMatMulDeltaNetStepPass>(); }

}  // namespace memra::passes

// fuse-matmul-add-rmsnorm: a decode step's product and the add_rms_norm that takes it become one
// matmul_add_rms_norm (ir/Ops.def):
//
//   %p = matmul(%x, @w)                               ->   %sum, %y = matmul_add_rms_norm(%x, @w, %r, @nw)
//   %sum, %y = add_rms_norm(%r, %p, @nw) {eps}             {eps}
//   (or add_rms_norm(%p, %r, @nw))
//
// where the rows are one token (a static T = 1: the decode function), the product has no other
// use, the matmul carries no attributes and its weight is a weight (any matrix type: the decode
// GEMVs stream 16-bit and f32 matrices and GGUF blocks alike) with K a multiple of 32. These are the
// attention and FFN outputs of a layer, whose norm was a launch of its own after each; the CUDA unit
// runs it as the product's tail (its last block, found by an arrival ticket). Runs after
// fuse-rows, so a norm that fuse-rows folds into a longer row program stays there. Numerics: the
// CPU executor runs the two ops' kernels in order (the sum's operand order does not change an f32
// addition), so the fused op's results are the same bits.
#include "ir/StatusMacros.h"
#include "ir/TypeInference.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct ProductNormMatch {
  Op* norm;
  Op* matmul;
  ir::Value* residual;
};

class MatMulAddRmsNormPattern : public RewritePattern<ProductNormMatch> {
 public:
  explicit MatMulAddRmsNormPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kMatMul, "fused", "products fused with the add_rms_norm after them") {}

  MatchResult<ProductNormMatch> Match(Op& matmul, const PatternRewriter&) override {
    if (matmul.num_operands() != 2 || matmul.result(0)->uses().empty()) return NoMatch();
    Op* norm = matmul.result(0)->uses().front().user;
    if (!norm->is(OpKind::kAddRmsNorm)) return NoMatch();
    // One use: the product in a's or b's place (add_rms_norm(p, p) uses it twice).
    if (!HasSingleUse(matmul.result(0))) return Skip(skipped_uses_);
    ir::Value* const p = matmul.result(0);
    ir::Value* residual = norm->operand(0) == p ? norm->operand(1) : norm->operand(0);
    const ir::Shape& xs = matmul.operand(0)->shape();
    if (xs.rank() != 2 || !xs[0].IsConstant() || xs[0].value() != 1) return Skip(skipped_tokens_);
    const ir::Value* w = matmul.operand(1);
    if (!llvm::isa<ir::Weight>(w) || !matmul.attrs().empty()) return Skip(skipped_weight_);
    // K a multiple of 32 (the decode GEMVs' rows; another K keeps the two ops).
    if (!xs[1].IsConstant() || xs[1].value() % 32 != 0) return Skip(skipped_weight_);
    return ProductNormMatch{norm, &matmul, residual};
  }

  absl::Status Rewrite(const ProductNormMatch& m, PatternRewriter& rw) override {
    ir::AttrDict attrs;
    CopyAttrs(m.norm->attrs(), attrs, {"eps"});
    MEMRA_ASSIGN_OR_RETURN(
        Op * fused,
        rw.Create(m.norm, OpKind::kMatMulAddRmsNorm,
                  {m.matmul->operand(0), m.matmul->operand(1), m.residual, m.norm->operand(2)}, std::move(attrs)));
    rw.ReplaceOp(m.norm, fused);
    rw.Erase(m.matmul);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_tokens_{pass(), "skipped-tokens", "products of more than one token (or of an unknown count)"};
  Statistic skipped_uses_{pass(), "skipped-uses",
                          "products with other users than the norm (or that are both of its operands)"};
  Statistic skipped_weight_{
      pass(), "skipped-weight",
      "products whose matrix is not a weight, whose K is not a multiple of 32, or whose matmul carries "
      "attributes"};
};

class FuseMatMulAddRmsNormPass : public PatternPass {
 public:
  FuseMatMulAddRmsNormPass() { AddPattern<MatMulAddRmsNormPattern>(); }
  absl::string_view name() const override { return "fuse-matmul-add-rmsnorm"; }
  absl::string_view description() const override {
    return "Fuses a one-token product with the add_rms_norm that takes it into matmul_add_rms_norm";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseMatMulAddRmsNormPass() { return std::make_unique<FuseMatMulAddRmsNormPass>(); }

}  // namespace memra::passes

// fuse-moe-router: a decode step's router product and its routing become one moe_router (ir/Ops.def):
//
//   %l = matmul(%x, @w)                                 ->   %wts, %ids = moe_router(%x, @w, @s) {k}
//   %wts, %ids = moe_route(%l, @s) {k}                       (gate = "sigmoid" from moe_route_sigmoid,
//                                                              with its norm and scale)
//
// where the rows are one token (a static T = 1: the decode function), the logits have no other
// use, the matmul carries no attributes and its weight is one the decode GEMV streams (f32, f16 or
// bf16: ir::IsFloatWeight; llama.cpp keeps routers unquantized) with K a multiple of 32. Every MoE family's decode
// ran the two as two launches; the CUDA unit is one (the GEMV's last block routes). Numerics: the CPU executor runs the
// two ops' kernels in order (runtime/cpu/CpuExecutor.cc), so the fused op's results are the same bits.
#include <vector>

#include "ir/StatusMacros.h"
#include "ir/TypeInference.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct RouterMatch {
  Op* route;
  Op* matmul;
};

class MoeRouterPattern : public RewritePattern<RouterMatch> {
 public:
  explicit MoeRouterPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kMatMul, "fused", "router products and their routing fused into moe_router") {}

  MatchResult<RouterMatch> Match(Op& matmul, const PatternRewriter&) override {
    if (matmul.num_operands() != 2 || matmul.result(0)->uses().empty()) return NoMatch();
    Op* route = matmul.result(0)->uses().front().user;
    if (!route->is(OpKind::kMoeRoute) && !route->is(OpKind::kMoeRouteSigmoid)) return NoMatch();
    if (route->operand(0) != matmul.result(0)) return NoMatch();
    if (!HasSingleUse(matmul.result(0))) return Skip(skipped_uses_);
    const ir::Shape& xs = matmul.operand(0)->shape();
    if (xs.rank() != 2 || !xs[0].IsConstant() || xs[0].value() != 1) return Skip(skipped_tokens_);
    const ir::Value* w = matmul.operand(1);
    if (!llvm::isa<ir::Weight>(w) || !ir::IsFloatWeight(w->dtype()) || !matmul.attrs().empty())
      return Skip(skipped_weight_);
    // K a multiple of 32 (the decode GEMV's rows; another K keeps the matmul and its routing).
    if (!xs[1].IsConstant() || xs[1].value() % 32 != 0) return Skip(skipped_weight_);
    return RouterMatch{route, &matmul};
  }

  absl::Status Rewrite(const RouterMatch& m, PatternRewriter& rw) override {
    ir::AttrDict attrs;
    CopyAttrs(m.route->attrs(), attrs, {"k", "norm", "scale"});
    if (m.route->is(OpKind::kMoeRouteSigmoid)) attrs.Set("gate", "sigmoid");
    std::vector<ir::Value*> operands = {m.matmul->operand(0), m.matmul->operand(1)};
    if (m.route->num_operands() > 1) operands.push_back(m.route->operand(1));
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.route, OpKind::kMoeRouter, operands, std::move(attrs)));
    rw.ReplaceOp(m.route, fused);
    rw.Erase(m.matmul);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_tokens_{pass(), "skipped-tokens", "routers of more than one token (or of an unknown count)"};
  Statistic skipped_uses_{pass(), "skipped-uses", "router logits with other users than the routing"};
  Statistic skipped_weight_{
      pass(), "skipped-weight",
      "router products whose weight is not an f32, f16 or bf16 weight, whose K is not a multiple of 32, or whose "
      "matmul carries attributes"};
};

class FuseMoeRouterPass : public PatternPass {
 public:
  FuseMoeRouterPass() { AddPattern<MoeRouterPattern>(); }
  absl::string_view name() const override { return "fuse-moe-router"; }
  absl::string_view description() const override {
    return "Fuses a one-token router product with its routing (moe_route, moe_route_sigmoid) into moe_router";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseMoeRouterPass() { return std::make_unique<FuseMoeRouterPass>(); }

}  // namespace memra::passes

// fuse-add-rmsnorm-matmul: a one-token add_rms_norm whose normalized row feeds only products
// becomes their prologue (ir/Ops.def add_rms_norm_matmul):
//
//   %s, %n = add_rms_norm(%a, %b, @nw) {eps}
//   %q, %k = matmul_group(%n, @wq, @wk)         ->   %s, %q, %k = add_rms_norm_matmul(%a, %b, @nw, @wq, @wk) {eps}
//
//   %s, %n = add_rms_norm(%a, %b, @nw) {eps}
//   %y = matmul_swiglu(%n, @wg, @wu)            ->   %s, %y = add_rms_norm_matmul(%a, %b, @nw, @wg, @wu)
//                                                              {eps, glu = "silu"}
//
// (and a plain matmul: the head's output norm). In a decode step every layer runs two such norms
// as launches of their own between two products (2.7-4.7 us each alone on the H200); the CUDA
// GEMV can compute the norm per warp from a and b while its weights stream.
// Fuses when the rows are one token (a static leading dim of 1), y's only user is the product's
// x, and every matrix is of a storage in `types` (':'-separated dtype names; default f32:f16:bf16,
// the GEMV storages that take the prologue) with K a multiple of 32 (the GEMV's row granule).
// The fused op sits where the norm was. Not in the default pipelines: on the H200 the fused GEMVs
// decoded slower than a norm launch followed by the plain GEMVs, whose weight prefetch before the
// grid dependency wait already hides that launch (bench/RESULTS.md, session 18: 0.8B tg128 989 vs
// 1,226 tok/s with the prologue per warp, 1,154 vs 1,230 with x staged per block). Opt in with
// `--passes` (after bucket-shapes, before select-kernels).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct NormMatMulMatch {
  Op* norm;
  Op* product;
};

class AddRmsNormMatMulPattern : public RewritePattern<NormMatMulMatch> {
 public:
  AddRmsNormMatMulPattern(Pass* pass, const Option<std::string>* types)
      : RewritePattern(pass, OpKind::kAddRmsNorm, "fused", "add_rms_norm fused into the products of its row"),
        types_(types) {}

  MatchResult<NormMatMulMatch> Match(Op& norm, const PatternRewriter&) override {
    const ir::Shape& as = norm.operand(0)->shape();
    if (as.rank() < 1 || !as.NumElements().has_value() || as.NumElements().value() != as.back().value())
      return Skip(skipped_rows_);
    if (!HasSingleUse(norm.result(1))) return Skip(skipped_uses_);
    Op* product = norm.result(1)->uses().front().user;
    const bool kind =
        product->is(OpKind::kMatMul) || product->is(OpKind::kMatMulGroup) || product->is(OpKind::kMatMulSwiglu);
    if (!kind || product->operand(0) != norm.result(1)) return Skip(skipped_user_);
    if (as.back().value() % 32 != 0) return Skip(skipped_types_);
    const std::vector<std::string> allowed = SplitListOption(**types_);
    for (unsigned i = 1; i < product->num_operands(); ++i) {
      const std::string dt(ir::DTypeName(product->operand(i)->dtype()));
      if (std::find(allowed.begin(), allowed.end(), dt) == allowed.end()) return Skip(skipped_types_);
    }
    return NormMatMulMatch{&norm, product};
  }

  absl::Status Rewrite(const NormMatMulMatch& m, PatternRewriter& rw) override {
    ir::AttrDict attrs;
    attrs.Set("eps", m.norm->attrs().F64Or("eps", 0));
    if (m.product->is(OpKind::kMatMulSwiglu)) {
      attrs.Set("glu", m.product->attrs().GetString("activation").value_or("silu"));
      if (std::optional<double> clamp = m.product->attrs().GetF64("clamp")) attrs.Set("clamp", *clamp);
    }
    std::vector<ir::Value*> operands{m.norm->operand(0), m.norm->operand(1), m.norm->operand(2)};
    for (unsigned i = 1; i < m.product->num_operands(); ++i) operands.push_back(m.product->operand(i));
    // Where the norm was: the matrices are module weights, defined before any op.
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.norm, OpKind::kAddRmsNormMatMul, operands, std::move(attrs)));
    rw.Replace(m.norm->result(0), fused->result(0));
    for (unsigned i = 0; i < m.product->num_results(); ++i) rw.Replace(m.product->result(i), fused->result(i + 1));
    rw.Erase(m.product);
    rw.Erase(m.norm);
    return absl::OkStatus();
  }

 private:
  const Option<std::string>* types_;
  Statistic skipped_rows_{pass(), "skipped-rows", "norms of more than one row (prefill: GEMMs)"};
  Statistic skipped_uses_{pass(), "skipped-uses", "norms whose normalized row has other users"};
  Statistic skipped_user_{pass(), "skipped-user", "norms whose normalized row feeds something else than a product"};
  Statistic skipped_types_{pass(), "skipped-types", "products of matrices outside `types` or K not a multiple of 32"};
};

class FuseAddRmsNormMatMulPass : public PatternPass {
 public:
  FuseAddRmsNormMatMulPass() { AddPattern<AddRmsNormMatMulPattern>(&types_); }
  absl::string_view name() const override { return "fuse-add-rmsnorm-matmul"; }
  absl::string_view description() const override {
    return "Fuses a one-token add_rms_norm into the products of its normalized row (add_rms_norm_matmul)";
  }
  absl::StatusOr<bool> Run(ir::Module& m) override {
    for (const std::string& t : SplitListOption(*types_))
      if (!ir::ParseDType(t))
        return absl::InvalidArgumentError(
            absl::StrCat("fuse-add-rmsnorm-matmul: option 'types': '", t, "' is not a dtype name"));
    return PatternPass::Run(m);
  }

 private:
  Option<std::string> types_{this, "types", "matrix storages to fuse (':'-separated dtype names)", "f32:f16:bf16"};
};

}  // namespace

std::unique_ptr<Pass> CreateFuseAddRmsNormMatMulPass() { return std::make_unique<FuseAddRmsNormMatMulPass>(); }

}  // namespace memra::passes

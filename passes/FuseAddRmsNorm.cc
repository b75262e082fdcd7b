// fuse-add-rmsnorm: the residual add and the RMSNorm that follows it become one op,
//
//   %r = add(%a, %b)                      %r, %y = add_rms_norm(%a, %b, @w) {eps}
//   %y = rms_norm(%r, @w) {eps}     ->
//
// which writes both the sum (the residual stream, still read by the next residual add) and the
// normalized rows, so the sum is read once instead of twice. The fused op sits where the add
// was (its operands dominate it, and so does it every use of the sum). Only same-type adds fuse
// (add_rms_norm has no broadcast); when one sum feeds several norms, the first one fuses.
// On the CPU executor the fused op computes exactly the add and then the norm (bit-identical).
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct AddNormMatch {
  Op* add;
  Op* norm;
};

class AddRmsNormPattern : public RewritePattern<AddNormMatch> {
 public:
  explicit AddRmsNormPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kRmsNorm, "fused", "add + rms_norm pairs fused into add_rms_norm") {}

  MatchResult<AddNormMatch> Match(Op& norm, const PatternRewriter&) override {
    Op* add = DefOf(norm.operand(0), OpKind::kAdd);
    if (add == nullptr) return NoMatch();
    if (norm.num_operands() < 2) return NoMatch();  // add_rms_norm takes a weight
    if (add->operand(0)->type() != add->operand(1)->type()) return Skip(skipped_broadcast_);
    if (add->parent_block() != norm.parent_block()) return Skip(skipped_block_);
    return AddNormMatch{add, &norm};
  }

  absl::Status Rewrite(const AddNormMatch& m, PatternRewriter& rw) override {
    MEMRA_ASSIGN_OR_RETURN(
        Op * fused, rw.Create(m.add, OpKind::kAddRmsNorm, {m.add->operand(0), m.add->operand(1), m.norm->operand(1)},
                              {{"eps", m.norm->attrs().F64Or("eps", 0)}}));
    rw.Replace(m.norm->result(0), fused->result(1));
    rw.Replace(m.add->result(0), fused->result(0));
    rw.Erase(m.norm);
    rw.Erase(m.add);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_broadcast_{pass(), "skipped-broadcast", "norms of broadcasting adds left alone"};
  Statistic skipped_block_{pass(), "skipped-block", "norms in another block (segment) than their add"};
};

class FuseAddRmsNormPass : public PatternPass {
 public:
  FuseAddRmsNormPass() { AddPattern<AddRmsNormPattern>(); }
  absl::string_view name() const override { return "fuse-add-rmsnorm"; }
  absl::string_view description() const override {
    return "Fuses a residual add and the RMSNorm of its sum into add_rms_norm";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseAddRmsNormPass() { return std::make_unique<FuseAddRmsNormPass>(); }

}  // namespace memra::passes

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
#include "ir/Builder.h"
#include "ir/Module.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

class FuseAddRmsNormPass : public Pass {
 public:
  absl::string_view name() const override { return "fuse-add-rmsnorm"; }
  absl::string_view description() const override {
    return "Fuses a residual add and the RMSNorm of its sum into add_rms_norm";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    bool changed = false;
    for (const auto& f : m.functions()) {
      for (Op* norm : f->Ops()) {
        if (!norm->is(OpKind::kRmsNorm)) continue;
        Op* add = DefOf(norm->operand(0), OpKind::kAdd);
        if (add == nullptr) continue;
        if (add->operand(0)->type() != add->operand(1)->type()) {
          ++skipped_broadcast_;
          continue;
        }
        if (add->parent_block() != norm->parent_block()) continue;
        ir::OpBuilder b(add->parent_block(), ir::Block::iterator(*add));
        auto fused = b.Create(OpKind::kAddRmsNorm, {add->operand(0), add->operand(1), norm->operand(1)},
                              {{"eps", norm->attrs().F64Or("eps", 0)}});
        if (!fused.ok()) return fused.status();
        ReplaceValue(norm->result(0), (*fused)->result(1));
        ReplaceValue(add->result(0), (*fused)->result(0));
        norm->Erase();
        add->Erase();
        ++fused_;
        changed = true;
      }
    }
    return changed;
  }

 private:
  Statistic fused_{this, "fused", "add + rms_norm pairs fused into add_rms_norm"};
  Statistic skipped_broadcast_{this, "skipped-broadcast", "norms of broadcasting adds left alone"};
};

}  // namespace

std::unique_ptr<Pass> CreateFuseAddRmsNormPass() { return std::make_unique<FuseAddRmsNormPass>(); }

}  // namespace memra::passes

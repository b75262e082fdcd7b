// fuse-attention-output-gate: gated attention's output gate joins the attention op,
//
//   %a = attention(%q, @k_cache, @v_cache, %pos) {scale}
//   %s = sigmoid(%gate)                          ->   %o = attention_gated(%q, @k_cache,
//   %o = mul(%a, %s)                                        @v_cache, %pos, %gate) {scale}
//
// so the attention kernel applies the gate in its epilogue. Fuses when the attention result has
// no other user and the gate has q's type (the sigmoid stays if it has other users). The fused
// op sits where the mul was: moving the cache read later is safe because a function writes each
// cache once, before its attention (the verifier's rule). On the CPU executor the fused op
// computes attention, sigmoid and mul exactly (bit-identical).
#include "ir/Builder.h"
#include "ir/Module.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

class FuseAttentionOutputGatePass : public Pass {
 public:
  absl::string_view name() const override { return "fuse-attention-output-gate"; }
  absl::string_view description() const override {
    return "Fuses attention * sigmoid(gate) into attention_gated";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    bool changed = false;
    for (const auto& f : m.functions()) {
      for (Op* mul : f->Ops()) {
        if (!mul->is(OpKind::kMul)) continue;
        for (unsigned side : {0u, 1u}) {
          Op* att = DefOf(mul->operand(side), OpKind::kAttention);
          Op* sig = DefOf(mul->operand(1 - side), OpKind::kSigmoid);
          if (att == nullptr || sig == nullptr) continue;
          if (!HasSingleUse(att->result(0))) {
            ++skipped_uses_;
            continue;
          }
          if (sig->operand(0)->type() != att->operand(0)->type()) continue;
          llvm::SmallVector<ir::Value*, 5> operands(att->operands().begin(), att->operands().end());
          operands.push_back(sig->operand(0));
          ir::OpBuilder b(mul->parent_block(), ir::Block::iterator(*mul));
          auto fused = b.Create(OpKind::kAttentionGated, operands, att->attrs());
          if (!fused.ok()) return fused.status();
          ReplaceValue(mul->result(0), (*fused)->result(0));
          mul->Erase();
          att->Erase();
          if (!sig->result(0)->has_uses()) sig->Erase();
          ++fused_;
          changed = true;
          break;
        }
      }
    }
    return changed;
  }

 private:
  Statistic fused_{this, "fused", "attention * sigmoid(gate) fused into attention_gated"};
  Statistic skipped_uses_{this, "skipped-uses", "gated attentions whose result has other users"};
};

}  // namespace

std::unique_ptr<Pass> CreateFuseAttentionOutputGatePass() {
  return std::make_unique<FuseAttentionOutputGatePass>();
}

}  // namespace memra::passes

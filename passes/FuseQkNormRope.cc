// fuse-qk-norm-rope: the per-head RMSNorm and RoPE of an attention layer's queries and keys
// become one op,
//
//   %qn = rms_norm(%q, @q_norm) {eps}
//   %kn = rms_norm(%k, @k_norm) {eps}              %qr, %kr = qk_norm_rope(%q, %k, @q_norm,
//   %qr = rope(%qn, %pos) {base, n_rot}      ->                    @k_norm, %pos) {base, eps, n_rot}
//   %kr = rope(%kn, %pos) {base, n_rot}
//
// (one launch normalizes and rotates both). Candidates are rope(rms_norm(x)) chains of rank-3
// x whose norm result has no other user; two candidates pair when they share the positions,
// eps, n_rot, base, mode, dtype, token count and head dim, in program order (the first is q).
// The fused op sits where the later rope was, so it is skipped when a user of the earlier rope
// comes before that point. A candidate without a partner stays as it is. On the CPU executor the
// fused op computes each norm and rope exactly (bit-identical).
#include "ir/Builder.h"
#include "ir/Module.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct Candidate {
  Op* norm;
  Op* rope;
};

bool Compatible(const Candidate& a, const Candidate& b) {
  const ir::Value* qa = a.norm->operand(0);
  const ir::Value* qb = b.norm->operand(0);
  return a.rope->operand(1) == b.rope->operand(1) && a.rope->parent_block() == b.rope->parent_block() &&
         a.norm->attrs().GetF64("eps") == b.norm->attrs().GetF64("eps") &&
         a.rope->attrs().GetI64("n_rot") == b.rope->attrs().GetI64("n_rot") &&
         a.rope->attrs().GetF64("base") == b.rope->attrs().GetF64("base") &&
         a.rope->attrs().GetString("mode").value_or("neox") == b.rope->attrs().GetString("mode").value_or("neox") &&
         qa->dtype() == qb->dtype() && qa->shape()[0] == qb->shape()[0] && qa->shape()[2] == qb->shape()[2];
}

class FuseQkNormRopePass : public Pass {
 public:
  absl::string_view name() const override { return "fuse-qk-norm-rope"; }
  absl::string_view description() const override {
    return "Fuses the per-head rms_norm + rope of q and k into qk_norm_rope";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    bool changed = false;
    for (const auto& f : m.functions()) {
      auto order = ProgramOrder(*f);
      std::vector<Candidate> cands;
      for (Op* rope : f->Ops()) {
        if (!rope->is(OpKind::kRope)) continue;
        Op* norm = DefOf(rope->operand(0), OpKind::kRmsNorm);
        if (norm == nullptr || !HasSingleUse(norm->result(0)) || norm->operand(0)->rank() != 3) continue;
        cands.push_back({norm, rope});
      }
      std::vector<bool> used(cands.size(), false);
      for (size_t i = 0; i < cands.size(); ++i) {
        if (used[i]) continue;
        size_t j = i + 1;
        while (j < cands.size() && (used[j] || !Compatible(cands[i], cands[j]))) ++j;
        if (j == cands.size()) {
          ++unpaired_;
          continue;
        }
        const Candidate& q = cands[i];
        const Candidate& k = cands[j];
        const int64_t at = order.at(k.rope);
        bool early_use = false;
        for (const ir::Use& u : q.rope->result(0)->uses()) early_use |= order.at(u.user) < at;
        if (early_use) {
          ++skipped_order_;
          continue;
        }
        used[i] = used[j] = true;
        ir::AttrDict attrs = k.rope->attrs();
        attrs.Set("eps", q.norm->attrs().F64Or("eps", 0));
        ir::OpBuilder b(k.rope->parent_block(), ir::Block::iterator(*k.rope));
        auto fused = b.Create(OpKind::kQkNormRope,
                              {q.norm->operand(0), k.norm->operand(0), q.norm->operand(1), k.norm->operand(1),
                               q.rope->operand(1)},
                              attrs);
        if (!fused.ok()) return fused.status();
        ReplaceValue(q.rope->result(0), (*fused)->result(0));
        ReplaceValue(k.rope->result(0), (*fused)->result(1));
        for (Op* op : {q.rope, k.rope, q.norm, k.norm}) op->Erase();
        ++fused_;
        changed = true;
      }
    }
    return changed;
  }

 private:
  Statistic fused_{this, "fused", "q/k norm + rope pairs fused into qk_norm_rope"};
  Statistic unpaired_{this, "unpaired", "norm + rope chains without a partner (left alone)"};
  Statistic skipped_order_{this, "skipped-order", "pairs whose first rope is used before the second"};
};

}  // namespace

std::unique_ptr<Pass> CreateFuseQkNormRopePass() { return std::make_unique<FuseQkNormRopePass>(); }

}  // namespace memra::passes

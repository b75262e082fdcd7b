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
// eps, n_rot, base, mode, freq_factors, dtype, token count and head dim, in program order (the
// first is q).
// The fused op sits where the later rope was, so it is skipped when a user of the earlier rope
// comes before that point. A candidate without a partner stays as it is. On the CPU executor the
// fused op computes each norm and rope exactly (bit-identical).
#include <optional>
#include <vector>

#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct Candidate {
  Op* norm;
  Op* rope;
};

// rope(rms_norm(x)) with x of rank 3 and the norm used only by the rope.
std::optional<Candidate> CandidateAt(Op& rope) {
  Op* norm = DefOf(rope.operand(0), OpKind::kRmsNorm);
  if (norm == nullptr || norm->num_operands() < 2 || !HasSingleUse(norm->result(0)) || norm->operand(0)->rank() != 3)
    return std::nullopt;
  return Candidate{norm, &rope};
}

bool Compatible(const Candidate& a, const Candidate& b) {
  const ir::Value* qa = a.norm->operand(0);
  const ir::Value* qb = b.norm->operand(0);
  // The same freq_factors (both none, or the same weight).
  const ir::Value* fa = a.rope->num_operands() > 2 ? a.rope->operand(2) : nullptr;
  const ir::Value* fb = b.rope->num_operands() > 2 ? b.rope->operand(2) : nullptr;
  return a.rope->operand(1) == b.rope->operand(1) && fa == fb && a.rope->parent_block() == b.rope->parent_block() &&
         a.norm->attrs().GetF64("eps") == b.norm->attrs().GetF64("eps") &&
         a.rope->attrs().GetI64("n_rot") == b.rope->attrs().GetI64("n_rot") &&
         a.rope->attrs().GetF64("base") == b.rope->attrs().GetF64("base") &&
         a.rope->attrs().GetString("mode").value_or("neox") == b.rope->attrs().GetString("mode").value_or("neox") &&
         qa->dtype() == qb->dtype() && qa->shape()[0] == qb->shape()[0] && qa->shape()[2] == qb->shape()[2];
}

struct PairMatch {
  Candidate q, k;
};

// Rooted at the q rope: its partner is the first later compatible candidate still there (an
// earlier one would have been the root of this pair).
class QkNormRopePattern : public RewritePattern<PairMatch> {
 public:
  explicit QkNormRopePattern(Pass* pass)
      : RewritePattern(pass, OpKind::kRope, "fused", "q/k norm + rope pairs fused into qk_norm_rope") {}

  MatchResult<PairMatch> Match(Op& rope, const PatternRewriter& rw) override {
    std::optional<Candidate> q = CandidateAt(rope);
    if (!q) return NoMatch();
    std::optional<Candidate> k;
    for (Op* later : rw.LiveOpsAfter(rope, OpKind::kRope)) {
      k = CandidateAt(*later);
      if (k && Compatible(*q, *k)) break;
      k.reset();
    }
    if (!k) return Skip(unpaired_);
    const int64_t at = rw.Order(k->rope);
    for (const ir::Use& u : q->rope->result(0)->uses())
      if (rw.Order(u.user) < at) return Skip(skipped_order_);
    return PairMatch{*q, *k};
  }

  absl::Status Rewrite(const PairMatch& m, PatternRewriter& rw) override {
    const Candidate& q = m.q;
    const Candidate& k = m.k;
    ir::AttrDict attrs = k.rope->attrs();
    attrs.Set("eps", q.norm->attrs().F64Or("eps", 0));
    std::vector<ir::Value*> operands = {q.norm->operand(0), k.norm->operand(0), q.norm->operand(1), k.norm->operand(1),
                                        q.rope->operand(1)};
    if (q.rope->num_operands() > 2) operands.push_back(q.rope->operand(2));  // freq_factors
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(k.rope, OpKind::kQkNormRope, operands, attrs));
    rw.Replace(q.rope->result(0), fused->result(0));
    rw.Replace(k.rope->result(0), fused->result(1));
    for (Op* op : {q.rope, k.rope, q.norm, k.norm}) rw.Erase(op);
    return absl::OkStatus();
  }

 private:
  Statistic unpaired_{pass(), "unpaired", "norm + rope chains without a partner (left alone)"};
  Statistic skipped_order_{pass(), "skipped-order", "pairs whose first rope is used before the second"};
};

class FuseQkNormRopePass : public PatternPass {
 public:
  FuseQkNormRopePass() { AddPattern<QkNormRopePattern>(); }
  absl::string_view name() const override { return "fuse-qk-norm-rope"; }
  absl::string_view description() const override {
    return "Fuses the per-head rms_norm + rope of q and k into qk_norm_rope";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseQkNormRopePass() { return std::make_unique<FuseQkNormRopePass>(); }

}  // namespace memra::passes

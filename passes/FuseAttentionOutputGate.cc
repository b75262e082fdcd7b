// fuse-attention-output-gate: gated attention's output gate joins the attention op,
//
//   %a = attention(%q, @k_cache, @v_cache, %pos) {scale}
//   %s = sigmoid(%gate)                          ->   %o = attention_gated(%q, @k_cache,
//   %o = mul(%a, %s)                                        @v_cache, %pos, %gate) {scale}
//
// a gate per element (Qwen3.5's), or mul_rows(%a, %s) with %gate of [T, Hq, 1], a gate per head
// (Step 3.5's head-wise gate), so the attention kernel applies the gate in its epilogue. Fuses when
// the attention result has no other user and the gate has q's type (per element) or dtype (per
// head); the sigmoid stays if it has other users. The fused op sits where the mul was: moving the
// cache read later is safe because a function writes each cache once, before its attention (the
// verifier's rule). On the CPU executor the fused op computes attention, sigmoid and mul / mul_rows
// exactly (bit-identical).
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct GateMatch {
  Op* mul;
  Op* attention;
  Op* sigmoid;
};

absl::Status RewriteGate(const GateMatch& m, PatternRewriter& rw) {
  llvm::SmallVector<ir::Value*, 5> operands(m.attention->operands().begin(), m.attention->operands().end());
  operands.push_back(m.sigmoid->operand(0));
  MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.mul, OpKind::kAttentionGated, operands, m.attention->attrs()));
  rw.Replace(m.mul->result(0), fused->result(0));
  rw.Erase(m.mul);
  rw.Erase(m.attention);
  if (!m.sigmoid->result(0)->has_uses()) rw.Erase(m.sigmoid);
  return absl::OkStatus();
}

// mul(attention, sigmoid(gate)): a gate per element.
class AttentionOutputGatePattern : public RewritePattern<GateMatch> {
 public:
  explicit AttentionOutputGatePattern(Pass* pass)
      : RewritePattern(pass, OpKind::kMul, "fused", "attention * sigmoid(gate) fused into attention_gated") {}

  MatchResult<GateMatch> Match(Op& mul, const PatternRewriter&) override {
    // Either operand order; at most one side can have the shape.
    for (unsigned side : {0u, 1u}) {
      Op* att = DefOf(mul.operand(side), OpKind::kAttention);
      Op* sig = DefOf(mul.operand(1 - side), OpKind::kSigmoid);
      if (att == nullptr || sig == nullptr) continue;
      if (!HasSingleUse(att->result(0))) return Skip(skipped_uses_);
      if (sig->operand(0)->type() != att->operand(0)->type()) return Skip(skipped_type_);
      return GateMatch{&mul, att, sig};
    }
    return NoMatch();
  }

  absl::Status Rewrite(const GateMatch& m, PatternRewriter& rw) override { return RewriteGate(m, rw); }

 private:
  Statistic skipped_uses_{pass(), "skipped-uses", "gated attentions whose result has other users"};
  Statistic skipped_type_{pass(), "skipped-type", "gates of another type than the queries"};
};

// mul_rows(attention, sigmoid(gate)) with gate [T, Hq, 1]: a gate per head.
class AttentionHeadGatePattern : public RewritePattern<GateMatch> {
 public:
  explicit AttentionHeadGatePattern(Pass* pass)
      : RewritePattern(pass, OpKind::kMulRows, "fused-head",
                       "mul_rows(attention, sigmoid(head gate)) fused into attention_gated") {}

  MatchResult<GateMatch> Match(Op& mul, const PatternRewriter&) override {
    Op* att = DefOf(mul.operand(0), OpKind::kAttention);
    Op* sig = DefOf(mul.operand(1), OpKind::kSigmoid);
    if (att == nullptr || sig == nullptr) return NoMatch();
    if (!HasSingleUse(att->result(0))) return Skip(skipped_uses_);
    if (sig->operand(0)->dtype() != att->operand(0)->dtype()) return Skip(skipped_type_);
    return GateMatch{&mul, att, sig};
  }

  absl::Status Rewrite(const GateMatch& m, PatternRewriter& rw) override { return RewriteGate(m, rw); }

 private:
  Statistic skipped_uses_{pass(), "skipped-head-uses", "head-gated attentions whose result has other users"};
  Statistic skipped_type_{pass(), "skipped-head-type", "head gates of another dtype than the queries"};
};

class FuseAttentionOutputGatePass : public PatternPass {
 public:
  FuseAttentionOutputGatePass() {
    AddPattern<AttentionOutputGatePattern>();
    AddPattern<AttentionHeadGatePattern>();
  }
  absl::string_view name() const override { return "fuse-attention-output-gate"; }
  absl::string_view description() const override {
    return "Fuses attention * sigmoid(gate) (per element or per head) into attention_gated";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseAttentionOutputGatePass() { return std::make_unique<FuseAttentionOutputGatePass>(); }

}  // namespace memra::passes

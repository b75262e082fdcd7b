// fuse-qk-norm-rope-append: a one-token attention layer's q / k norm and rope and its KV append
// become one qk_norm_rope_append (ir/Ops.def):
//
//   %qr, %kr = qk_norm_rope(%q, %k, @qw, @kw, %pos) {eps, n_rot, base}   ->   %qr = qk_norm_rope_append(
//   kv_append(%kr, %v, @kc, @vc, %pos) {ring, v_norm_eps}                        %k, %v, @kc, @vc, %pos,
//                                                                                %q, @qw, @kw) {...}
//
// where a head row fits the op's domain (ir/Ops.def), after fuse-qk-norm-rope and fuse-kv-append-norm (which form the
// pair and the append's v norm) and fuse-gated-attention-step (which takes Qwen3.5's layers whole). Gemma 4's and
// Step 3.5's decode steps ran the two as two launches of a few microseconds each; the CUDA unit is one (each warp a
// head row of q, k or v). The fused op stands where the append stood, so the caches are written at
// the same point; matched only where the rows are one token (a static T = 1: the decode function),
// the rotated k has no other use, both rotate by the same positions, and the rotated q is first used
// after the append (it is now computed there). Numerics: the CPU executor runs the two ops' kernels
// in the same order (runtime/cpu/CpuExecutor.cc).
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

struct AppendMatch {
  Op* append;
  Op* norm_rope;
};

class QkNormRopeAppendPattern : public RewritePattern<AppendMatch> {
 public:
  explicit QkNormRopeAppendPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kKvAppend, "fused",
                       "one-token q/k norm and rope and KV append fused into qk_norm_rope_append") {}

  MatchResult<AppendMatch> Match(Op& append, const PatternRewriter& rw) override {
    AppendMatch m{&append, DefOf(append.operand(0), OpKind::kQkNormRope)};
    if (m.norm_rope == nullptr || append.operand(0) != m.norm_rope->result(1)) return NoMatch();
    const ir::Shape& ks = append.operand(0)->shape();
    if (ks.rank() != 3 || !ks[0].IsConstant() || ks[0].value() != 1) return Skip(skipped_tokens_);
    if (!ks[2].IsConstant() || !ir::InQkNormRopeAppendDomain(ks[2].value(), m.norm_rope->attrs().I64Or("n_rot", 0)))
      return Skip(skipped_dims_);
    if (!HasSingleUse(m.norm_rope->result(1))) return Skip(skipped_uses_);
    if (m.norm_rope->operand(4) != append.operand(4)) return Skip(skipped_form_);
    // The rotated q is computed where the append stands: nothing may read it before, nor the
    // append itself (as its v, when the heads agree: the fused op would read its own result).
    const int64_t at = rw.Order(&append);
    if (at < 0) return Skip(skipped_form_);
    for (const ir::Use& u : m.norm_rope->result(0)->uses())
      if (u.user->function() == &rw.function() && rw.Order(u.user) <= at) return Skip(skipped_form_);
    return m;
  }

  absl::Status Rewrite(const AppendMatch& m, PatternRewriter& rw) override {
    ir::AttrDict attrs;
    CopyAttrs(m.norm_rope->attrs(), attrs, {"eps", "base", "n_rot", "mode"});
    CopyAttrs(m.append->attrs(), attrs, {"ring", "v_norm_eps"});
    std::vector<ir::Value*> operands = {m.norm_rope->operand(1), m.append->operand(1),   m.append->operand(2),
                                        m.append->operand(3),    m.append->operand(4),   m.norm_rope->operand(0),
                                        m.norm_rope->operand(2), m.norm_rope->operand(3)};
    if (m.norm_rope->num_operands() > 5) operands.push_back(m.norm_rope->operand(5));  // freq_factors
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.append, OpKind::kQkNormRopeAppend, operands, std::move(attrs)));
    rw.Replace(m.norm_rope->result(0), fused->result(0));
    rw.Erase(m.append);
    rw.Erase(m.norm_rope);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_tokens_{pass(), "skipped-tokens", "appends of more than one token"};
  Statistic skipped_form_{
      pass(), "skipped-form",
      "pairs rotating by other positions than the append's, or whose rotated q is read before it or by it"};
  Statistic skipped_uses_{pass(), "skipped-uses", "rotated k with other users than the append"};
  Statistic skipped_dims_{pass(), "skipped-dims",
                          "head dims past the op's domain (a multiple of 32 up to 512, n_rot a multiple of 64)"};
};

class FuseQkNormRopeAppendPass : public PatternPass {
 public:
  FuseQkNormRopeAppendPass() { AddPattern<QkNormRopeAppendPattern>(); }
  absl::string_view name() const override { return "fuse-qk-norm-rope-append"; }
  absl::string_view description() const override {
    return "Fuses a one-token q/k norm and rope with the KV append of its k into qk_norm_rope_append";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseQkNormRopeAppendPass() { return std::make_unique<FuseQkNormRopeAppendPass>(); }

}  // namespace memra::passes

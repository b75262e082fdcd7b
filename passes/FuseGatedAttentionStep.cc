// fuse-gated-attention-step: a one-token gated-attention layer's ops between its q / k / v
// projections and its output projection become one gated_attention_step (ir/Ops.def):
//
//   %q, %gate = q_gate_split(%qg) {n_head, head_dim}
//   %qr, %kr = qk_norm_rope(%q, %k, @qw, @kw, %pos) {eps, n_rot, base}   ->   %o = gated_attention_step(
//   kv_append(%kr, %v, @kc, @vc, %pos) {ring}                                    %k, %v, @kc, @vc, %pos,
//   %o = attention_gated(%qr, @kc, @vc, %pos, %gate) {scale, window, ring}       %qg, @qw, @kw) {...}
//
// after fuse-qk-norm-rope and fuse-attention-output-gate (which form the norm/rope pair and the
// gated attention). A decode step ran these as seven launches of 2-7 us each (q_gate_split, two
// qk_norm_rope_rows, kv_append, attention_split, attention_combine, the gate; bench/RESULTS.md,
// session 18); the CUDA unit is two. Only where the attention is over one token (a static T = 1:
// the decode function), every intermediate has the one use shown, the append writes the caches
// the attention reads at the same positions, and no other op touches those caches between the
// append and the attention (the append's write moves to the attention's place). The batched
// step's paged ops are not matched. Numerics: the CPU executor runs the same kernels in the same
// order (runtime/cpu/CpuExecutor.cc).
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct StepMatch {
  Op* attention;
  Op* norm_rope;
  Op* split;
  Op* append;
};

// The op that uses `v` (an op result with a single use), or nullptr.
Op* SingleUser(const ir::Value* v) { return HasSingleUse(v) ? v->uses()[0].user : nullptr; }

class GatedAttentionStepPattern : public RewritePattern<StepMatch> {
 public:
  explicit GatedAttentionStepPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kAttentionGated, "fused",
                       "one-token q/gate split, q/k norm and rope, KV append and gated attention fused into "
                       "gated_attention_step") {}

  MatchResult<StepMatch> Match(Op& attention, const PatternRewriter& rw) override {
    StepMatch m{};
    m.attention = &attention;
    m.norm_rope = DefOf(attention.operand(0), OpKind::kQkNormRope);
    m.split = DefOf(attention.operand(4), OpKind::kQGateSplit);
    if (m.norm_rope == nullptr || m.split == nullptr) return NoMatch();
    const ir::Shape& qs = attention.operand(0)->shape();
    if (qs.rank() != 3 || !qs[0].IsConstant() || qs[0].value() != 1) return Skip(skipped_tokens_);
    if (attention.operand(0) != m.norm_rope->result(0) || m.norm_rope->operand(0) != m.split->result(0) ||
        attention.operand(4) != m.split->result(1))
      return Skip(skipped_form_);
    for (const ir::Value* v : {m.split->result(0), m.split->result(1), m.norm_rope->result(0), m.norm_rope->result(1)})
      if (!HasSingleUse(v)) return Skip(skipped_uses_);
    m.append = SingleUser(m.norm_rope->result(1));
    if (m.append == nullptr || !m.append->is(OpKind::kKvAppend) || m.append->operand(0) != m.norm_rope->result(1))
      return Skip(skipped_form_);
    if (m.append->attrs().Has("v_norm_eps")) return Skip(skipped_form_);  // the step appends v as it is
    if (m.norm_rope->num_operands() > 5) return Skip(skipped_form_);      // nor does it rotate by freq_factors
    // The append writes the caches the attention reads, at the positions both rotate by.
    const ir::Value* pos = attention.operand(3);
    if (m.append->operand(2) != attention.operand(1) || m.append->operand(3) != attention.operand(2) ||
        m.append->operand(4) != pos || m.norm_rope->operand(4) != pos ||
        m.append->attrs().I64Or("ring", 0) != attention.attrs().I64Or("ring", 0))
      return Skip(skipped_form_);
    // Nothing else of this function reads or writes the caches between the append and the
    // attention (the caches are module states: other functions use them too).
    const int64_t from = rw.Order(m.append), to = rw.Order(&attention);
    if (from < 0 || to < 0 || from > to) return Skip(skipped_form_);
    for (const ir::Value* cache : {attention.operand(1), attention.operand(2)})
      for (const ir::Use& u : cache->uses()) {
        if (u.user->function() != &rw.function()) continue;
        const int64_t at = rw.Order(u.user);
        if (u.user != m.append && u.user != &attention && (at < 0 || (at > from && at < to)))
          return Skip(skipped_form_);
      }
    return m;
  }

  absl::Status Rewrite(const StepMatch& m, PatternRewriter& rw) override {
    ir::AttrDict attrs;
    attrs.Set("n_head", m.split->attrs().I64Or("n_head", 0));
    attrs.Set("head_dim", m.split->attrs().I64Or("head_dim", 0));
    CopyAttrs(m.norm_rope->attrs(), attrs, {"eps", "base", "n_rot", "mode"});
    CopyAttrs(m.attention->attrs(), attrs, {"scale", "window", "ring", "precision"});
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.attention, OpKind::kGatedAttentionStep,
                                                 {m.norm_rope->operand(1), m.append->operand(1), m.append->operand(2),
                                                  m.append->operand(3), m.append->operand(4), m.split->operand(0),
                                                  m.norm_rope->operand(2), m.norm_rope->operand(3)},
                                                 std::move(attrs)));
    rw.Replace(m.attention->result(0), fused->result(0));
    rw.Erase(m.attention);
    rw.Erase(m.append);
    rw.Erase(m.norm_rope);
    rw.Erase(m.split);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_tokens_{pass(), "skipped-tokens", "gated attentions over more than one token"};
  Statistic skipped_form_{pass(), "skipped-form",
                          "gated attentions whose inputs are not the layer's split/norm/rope/append chain"};
  Statistic skipped_uses_{pass(), "skipped-uses", "chains with an intermediate that has other users"};
};

class FuseGatedAttentionStepPass : public PatternPass {
 public:
  FuseGatedAttentionStepPass() { AddPattern<GatedAttentionStepPattern>(); }
  absl::string_view name() const override { return "fuse-gated-attention-step"; }
  absl::string_view description() const override {
    return "Fuses a one-token gated-attention layer's q/gate split, q/k norm and rope, KV append and attention into "
           "gated_attention_step";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseGatedAttentionStepPass() { return std::make_unique<FuseGatedAttentionStepPass>(); }

}  // namespace memra::passes

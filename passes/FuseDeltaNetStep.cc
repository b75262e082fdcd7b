// fuse-delta-net-step: a one-token delta-net layer's ops between its input projections and its
// output projection become one delta_net_step (ir/Ops.def):
//
//   %c = conv1d_causal(%x, @cw, @cs) {activation = "silu"}
//   %q0, %k0, %v0 = split(%c) {axis = 1}
//   %q = reshape(%q0)  %k = reshape(%k0)  %v = reshape(%v0)
//   %beta, %g = delta_net_gates(%b, %a, @dt, @A)        ->   %y = delta_net_step(%x, @cw, %b, %a, @dt, @A,
//   %o = gated_delta_scan(%q, %k, %v, %g, %beta, @ds)                             %z, @nw, @cs, @ds)
//          {qk_l2_eps, scale}                                  {scale, qk_l2_eps, eps}
//   %y = gated_rms_norm(%o, %z, @nw) {eps}
//
// after fuse-delta-net-inputs (which forms the conv's silu and the scan's qk_l2_eps). A decode
// step ran these as four launches of 2.6-5.9 us each (bench/RESULTS.md, session 18); the CUDA
// unit is one. Only where the scan is over one token (a static T = 1: the decode function), every
// intermediate has the one use shown, q / k / v are the split's parts in that order as [1, H, D]
// views, and the scan is a single-sequence one (the batched step's seq_ ops are not matched).
// The fused op sits where the norm was; the states' writes move there with it. No other op of the
// function touches those states in between: the verifier allows one write of a state per
// function, and only the conv and the scan read a conv or a delta state. Numerics: the CPU executor runs the same
// kernels in the same order (runtime/cpu/CpuExecutor.cc).
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct StepMatch {
  Op* norm;
  Op* scan;
  Op* gates;
  Op* split;
  Op* conv;
  Op* reshapes[3];
};

class DeltaNetStepPattern : public RewritePattern<StepMatch> {
 public:
  explicit DeltaNetStepPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kGatedRmsNorm, "fused",
                       "one-token conv, gates, scan and gated norm fused into delta_net_step") {}

  MatchResult<StepMatch> Match(Op& norm, const PatternRewriter&) override {
    StepMatch m{};
    m.norm = &norm;
    m.scan = DefOf(norm.operand(0), OpKind::kGatedDeltaScan);
    if (m.scan == nullptr) return NoMatch();
    const ir::Shape& qs = m.scan->operand(0)->shape();
    if (qs.rank() != 3 || !qs[0].IsConstant() || qs[0].value() != 1) return Skip(skipped_tokens_);
    if (!m.scan->attrs().Has("qk_l2_eps")) return Skip(skipped_form_);
    if (!HasSingleUse(m.scan->result(0))) return Skip(skipped_uses_);
    m.gates = DefOf(m.scan->operand(4), OpKind::kDeltaNetGates);
    if (m.gates == nullptr || m.scan->operand(4) != m.gates->result(0) || m.scan->operand(3) != m.gates->result(1))
      return Skip(skipped_form_);
    if (!HasSingleUse(m.gates->result(0)) || !HasSingleUse(m.gates->result(1))) return Skip(skipped_uses_);
    for (unsigned i = 0; i < 3; ++i) {
      m.reshapes[i] = DefOf(m.scan->operand(i), OpKind::kReshape);
      if (m.reshapes[i] == nullptr) return Skip(skipped_form_);
      if (!HasSingleUse(m.reshapes[i]->result(0))) return Skip(skipped_uses_);
      Op* split = DefOf(m.reshapes[i]->operand(0), OpKind::kSplit);
      if (split == nullptr || (m.split != nullptr && split != m.split)) return Skip(skipped_form_);
      m.split = split;
      if (split->num_results() != 3 || m.reshapes[i]->operand(0) != split->result(i)) return Skip(skipped_form_);
      if (!HasSingleUse(split->result(i))) return Skip(skipped_uses_);
    }
    const ir::Shape& cs = m.split->operand(0)->shape();
    int64_t axis = m.split->attrs().I64Or("axis", -1);
    if (axis < 0) axis += static_cast<int64_t>(cs.rank());
    if (cs.rank() != 2 || axis != 1) return Skip(skipped_form_);
    m.conv = DefOf(m.split->operand(0), OpKind::kConv1dCausal);
    if (m.conv == nullptr || m.conv->attrs().GetString("activation").value_or("") != "silu") return Skip(skipped_form_);
    if (!HasSingleUse(m.conv->result(0))) return Skip(skipped_uses_);
    // z as the norm reads it: the [1, Hv, Dv] shape of the scan's output.
    if (norm.operand(1)->shape() != m.scan->result(0)->shape()) return Skip(skipped_form_);
    return m;
  }

  absl::Status Rewrite(const StepMatch& m, PatternRewriter& rw) override {
    ir::AttrDict attrs;
    attrs.Set("scale", m.scan->attrs().F64Or("scale", 1.0));
    attrs.Set("qk_l2_eps", m.scan->attrs().F64Or("qk_l2_eps", 0.0));
    attrs.Set("eps", m.norm->attrs().F64Or("eps", 0.0));
    MEMRA_ASSIGN_OR_RETURN(Op * fused,
                           rw.Create(m.norm, OpKind::kDeltaNetStep,
                                     {m.conv->operand(0), m.conv->operand(1), m.gates->operand(0), m.gates->operand(1),
                                      m.gates->operand(2), m.gates->operand(3), m.norm->operand(1), m.norm->operand(2),
                                      m.conv->operand(2), m.scan->operand(5)},
                                     std::move(attrs)));
    rw.Replace(m.norm->result(0), fused->result(0));
    rw.Erase(m.norm);
    rw.Erase(m.scan);
    for (Op* r : m.reshapes) rw.Erase(r);
    rw.Erase(m.split);
    rw.Erase(m.gates);
    rw.Erase(m.conv);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_tokens_{pass(), "skipped-tokens", "gated norms of scans over more than one token"};
  Statistic skipped_form_{pass(), "skipped-form", "gated norms whose inputs are not the layer's conv/gates/scan chain"};
  Statistic skipped_uses_{pass(), "skipped-uses", "chains with an intermediate that has other users"};
};

class FuseDeltaNetStepPass : public PatternPass {
 public:
  FuseDeltaNetStepPass() { AddPattern<DeltaNetStepPattern>(); }
  absl::string_view name() const override { return "fuse-delta-net-step"; }
  absl::string_view description() const override {
    return "Fuses a one-token delta-net layer's conv, gates, scan and gated norm into delta_net_step";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseDeltaNetStepPass() { return std::make_unique<FuseDeltaNetStepPass>(); }

}  // namespace memra::passes

// fuse-swiglu: the SwiGLU FFN's gate and up projections of one input and their gating become
// one op,
//
//   %g = matmul(%x, @w_gate)
//   %u = matmul(%x, @w_up)          ->    %y = matmul_swiglu(%x, @w_gate, @w_up)
//   %y = swiglu(%g, %u)
//
// and GeGLU (Gemma's MLPs) likewise, with the gelu in place of the silu,
//
//   %g = matmul(%x, @w_gate)
//   %u = matmul(%x, @w_up)          ->    %y = matmul_swiglu(%x, @w_gate, @w_up) {activation = "gelu"}
//   %a = gelu(%g)
//   %y = mul(%a, %u)                (or mul(%u, %a))
//
// so a backend can run both GEMMs as one launch with the gating in its epilogue and never
// store g and u. Fuses when both products have the swiglu as their only user (otherwise the
// products are needed anyway: left to fuse-matmul-group). Run it before fuse-matmul-group, which
// would otherwise group the two products first. The fused op sits where the swiglu was.
// On the CPU executor it computes the two matmuls and the gating exactly (bit-identical).
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct SwigluMatch {
  Op* swiglu;
  Op* gate;
  Op* up;
};

class SwigluPattern : public RewritePattern<SwigluMatch> {
 public:
  explicit SwigluPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kSwiglu, "fused", "matmul + matmul + swiglu fused into matmul_swiglu") {}

  MatchResult<SwigluMatch> Match(Op& sw, const PatternRewriter&) override {
    Op* g = DefOf(sw.operand(0), OpKind::kMatMul);
    Op* u = DefOf(sw.operand(1), OpKind::kMatMul);
    if (g == nullptr || u == nullptr || g == u) return NoMatch();
    if (g->operand(0) != u->operand(0)) return Skip(skipped_inputs_);
    if (!HasSingleUse(g->result(0)) || !HasSingleUse(u->result(0))) return Skip(skipped_uses_);
    return SwigluMatch{&sw, g, u};
  }

  absl::Status Rewrite(const SwigluMatch& m, PatternRewriter& rw) override {
    // The clamped SwiGLU keeps its limit (ir/Ops.def).
    ir::AttrDict attrs;
    if (auto clamp = m.swiglu->attrs().GetF64("clamp")) attrs.Set("clamp", *clamp);
    MEMRA_ASSIGN_OR_RETURN(Op * fused,
                           rw.Create(m.swiglu, OpKind::kMatMulSwiglu,
                                     {m.gate->operand(0), m.gate->operand(1), m.up->operand(1)}, std::move(attrs)));
    rw.Replace(m.swiglu->result(0), fused->result(0));
    for (Op* op : {m.swiglu, m.gate, m.up}) rw.Erase(op);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_inputs_{pass(), "skipped-inputs", "swiglus of products of different inputs"};
  Statistic skipped_uses_{pass(), "skipped-uses", "swiglus whose products have other users"};
};

struct GegluMatch {
  Op* mul;
  Op* gelu;
  Op* gate;
  Op* up;
};

class GegluPattern : public RewritePattern<GegluMatch> {
 public:
  explicit GegluPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kMul, "fused-geglu",
                       "matmul + matmul + gelu + mul fused into matmul_swiglu{activation = gelu}") {}

  MatchResult<GegluMatch> Match(Op& mul, const PatternRewriter&) override {
    // mul(gelu(g), u) or mul(u, gelu(g)), same shapes (no broadcast).
    for (unsigned i : {0u, 1u}) {
      Op* gelu = DefOf(mul.operand(i), OpKind::kGelu);
      Op* u = DefOf(mul.operand(1 - i), OpKind::kMatMul);
      if (gelu == nullptr || u == nullptr) continue;
      Op* g = DefOf(gelu->operand(0), OpKind::kMatMul);
      if (g == nullptr || g == u) continue;
      if (mul.operand(0)->type() != mul.operand(1)->type()) return NoMatch();
      if (g->operand(0) != u->operand(0)) return Skip(skipped_inputs_);
      if (!HasSingleUse(g->result(0)) || !HasSingleUse(u->result(0)) || !HasSingleUse(gelu->result(0)))
        return Skip(skipped_uses_);
      return GegluMatch{&mul, gelu, g, u};
    }
    return NoMatch();
  }

  absl::Status Rewrite(const GegluMatch& m, PatternRewriter& rw) override {
    MEMRA_ASSIGN_OR_RETURN(
        Op * fused, rw.Create(m.mul, OpKind::kMatMulSwiglu, {m.gate->operand(0), m.gate->operand(1), m.up->operand(1)},
                              {{"activation", std::string("gelu")}}));
    rw.Replace(m.mul->result(0), fused->result(0));
    for (Op* op : {m.mul, m.gelu, m.gate, m.up}) rw.Erase(op);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_inputs_{pass(), "skipped-geglu-inputs", "geglus of products of different inputs"};
  Statistic skipped_uses_{pass(), "skipped-geglu-uses", "geglus whose products or gelu have other users"};
};

class FuseSwigluPass : public PatternPass {
 public:
  FuseSwigluPass() {
    AddPattern<SwigluPattern>();
    AddPattern<GegluPattern>();
  }
  absl::string_view name() const override { return "fuse-swiglu"; }
  absl::string_view description() const override {
    return "Fuses matmul gate/up products of one input and their swiglu (or gelu * up) into matmul_swiglu";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseSwigluPass() { return std::make_unique<FuseSwigluPass>(); }

}  // namespace memra::passes

// fuse-moe-ffn: a layer's routed experts, its shared expert and the shared expert's sigmoid gate
// become one op,
//
//   %moe = moe_experts(%x, %w, %ids, @down_exps, @gate_exps, @up_exps)
//   %s   = matmul_swiglu(%x, @gate_shexp, @up_shexp)
//   %sh  = matmul(%s, @down_shexp)                  ->  %y = moe_ffn(%x, %w, %ids, @gate_inp_shexp,
//   %g   = matmul(%x, @gate_inp_shexp)                        @gate_shexp, @up_shexp, @down_shexp,
//   %y   = gated_add(%moe, %sh, %g)                           @down_exps, @gate_exps, @up_exps)
//
// so a backend can treat the shared expert as one more expert of the same launches (decode: one
// gate/up launch over the k selected experts + the shared one, one down launch with the weighted
// sum and the sigmoid-gated shared output fused) and never store the intermediate [T, n_embd]
// results. The routing (moe_route) stays a separate op: its ids and weights are device data the
// fused op reads. Runs after fuse-swiglu (it matches the shared expert's matmul_swiglu) and before
// fuse-matmul-group (which would group the shared gate's matmul with the router's, both of the
// same input). Fuses when every intermediate has the gated_add as its only user and all parts read
// the same x. On the CPU executor moe_ffn computes the parts exactly (bit-identical).
//
// A shared expert without a gate (Step 3.5) is the second pattern:
//
//   %moe = moe_experts(%x, %w, %ids, @down_exps, @gate_exps, @up_exps) {clamp = L}
//   %s   = matmul_swiglu(%x, @gate_shexp, @up_shexp) {clamp = L}
//   %sh  = matmul(%s, @down_shexp)                  ->  %y = moe_ffn_ungated(%x, %w, %ids, @gate_shexp,
//   %y   = add(%moe, %sh)                                     @up_shexp, @down_shexp, @down_exps,
//                                                             @gate_exps, @up_exps) {clamp = L}
//
// fused when the two clamps are equal (both absent on most of Step 3.5's layers; its last layers
// clamp the routed experts at 7 and the shared one at 16, and stay unfused).
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct MoeFfnMatch {
  Op* add;
  Op* experts;
  Op* swiglu;
  Op* down;
  Op* gate;
};

class MoeFfnPattern : public RewritePattern<MoeFfnMatch> {
 public:
  explicit MoeFfnPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kGatedAdd, "fused",
                       "moe_experts + shared expert + its gate + gated_add fused into moe_ffn") {}

  MatchResult<MoeFfnMatch> Match(Op& add, const PatternRewriter&) override {
    Op* experts = DefOf(add.operand(0), OpKind::kMoeExperts);
    if (experts == nullptr) return NoMatch();
    // moe_ffn's experts are SwiGLU's, unclamped (it has no clamp attribute).
    if (experts->attrs().GetString("activation").value_or("silu") != "silu") return NoMatch();
    if (experts->attrs().GetF64("clamp")) return Skip(skipped_clamped_);
    Op* down = DefOf(add.operand(1), OpKind::kMatMul);
    Op* swiglu = down ? DefOf(down->operand(0), OpKind::kMatMulSwiglu) : nullptr;
    Op* gate = DefOf(add.operand(2), OpKind::kMatMul);
    if (down == nullptr || swiglu == nullptr || gate == nullptr) return Skip(skipped_form_);
    const ir::Value* x = experts->operand(0);
    if (swiglu->operand(0) != x || gate->operand(0) != x) return Skip(skipped_inputs_);
    if (swiglu->attrs().GetF64("clamp")) return Skip(skipped_clamped_);
    for (const Op* op : {experts, down, swiglu, gate})
      if (!HasSingleUse(op->result(0))) return Skip(skipped_uses_);
    return MoeFfnMatch{&add, experts, swiglu, down, gate};
  }

  absl::Status Rewrite(const MoeFfnMatch& m, PatternRewriter& rw) override {
    const Op& e = *m.experts;
    llvm::SmallVector<ir::Value*, 10> operands{e.operand(0),       e.operand(1),         e.operand(2),
                                               m.gate->operand(1), m.swiglu->operand(1), m.swiglu->operand(2),
                                               m.down->operand(1)};
    for (unsigned i = 3; i < e.num_operands(); ++i) operands.push_back(e.operand(i));
    // The partition's record travels with the experts (shard-tensor-parallel).
    ir::AttrDict attrs;
    if (auto parts = e.attrs().GetI64("expert_parts")) attrs.Set("expert_parts", *parts);
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.add, OpKind::kMoeFfn, operands, std::move(attrs)));
    for (const char* a : {"tp_mode", "tp_bytes_tensor", "tp_bytes_expert"})
      if (const ir::Attr* v = e.attrs().Get(a)) fused->attrs().Set(a, *v);
    rw.Replace(m.add->result(0), fused->result(0));
    for (Op* op : {m.add, m.experts, m.down, m.swiglu, m.gate}) rw.Erase(op);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_form_{pass(), "skipped-form",
                          "gated_adds of experts whose shared expert is not matmul(matmul_swiglu) + a gate matmul"};
  Statistic skipped_inputs_{pass(), "skipped-inputs", "experts and shared expert reading different inputs"};
  Statistic skipped_uses_{pass(), "skipped-uses", "parts with other users"};
  Statistic skipped_clamped_{pass(), "skipped-clamped", "clamped SwiGLU experts or shared expert"};
};

struct MoeFfnUngatedMatch {
  Op* add;
  Op* experts;
  Op* swiglu;
  Op* down;
};

class MoeFfnUngatedPattern : public RewritePattern<MoeFfnUngatedMatch> {
 public:
  explicit MoeFfnUngatedPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kAdd, "fused-ungated",
                       "moe_experts + an ungated shared expert + add fused into moe_ffn_ungated") {}

  MatchResult<MoeFfnUngatedMatch> Match(Op& add, const PatternRewriter&) override {
    // add is commutative, exactly so in f32: the experts on either side.
    unsigned ei = 0;
    Op* experts = DefOf(add.operand(0), OpKind::kMoeExperts);
    if (experts == nullptr) experts = DefOf(add.operand(ei = 1), OpKind::kMoeExperts);
    if (experts == nullptr) return NoMatch();
    if (experts->attrs().GetString("activation").value_or("silu") != "silu") return NoMatch();
    Op* down = DefOf(add.operand(1 - ei), OpKind::kMatMul);
    Op* swiglu = down ? DefOf(down->operand(0), OpKind::kMatMulSwiglu) : nullptr;
    if (down == nullptr || swiglu == nullptr || down->num_operands() != 2) return Skip(skipped_form_);
    if (swiglu->attrs().GetString("activation").value_or("silu") != "silu") return Skip(skipped_form_);
    if (swiglu->operand(0) != experts->operand(0)) return Skip(skipped_inputs_);
    if (experts->attrs().F64Or("clamp", 0.0) != swiglu->attrs().F64Or("clamp", 0.0)) return Skip(skipped_clamps_);
    for (const Op* op : {experts, down, swiglu})
      if (!HasSingleUse(op->result(0))) return Skip(skipped_uses_);
    return MoeFfnUngatedMatch{&add, experts, swiglu, down};
  }

  absl::Status Rewrite(const MoeFfnUngatedMatch& m, PatternRewriter& rw) override {
    const Op& e = *m.experts;
    llvm::SmallVector<ir::Value*, 10> operands{e.operand(0),         e.operand(1),         e.operand(2),
                                               m.swiglu->operand(1), m.swiglu->operand(2), m.down->operand(1)};
    for (unsigned i = 3; i < e.num_operands(); ++i) operands.push_back(e.operand(i));
    ir::AttrDict attrs;
    if (const double clamp = e.attrs().F64Or("clamp", 0.0); clamp != 0.0) attrs.Set("clamp", clamp);
    if (auto parts = e.attrs().GetI64("expert_parts")) attrs.Set("expert_parts", *parts);
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.add, OpKind::kMoeFfnUngated, operands, std::move(attrs)));
    for (const char* a : {"tp_mode", "tp_bytes_tensor", "tp_bytes_expert"})
      if (const ir::Attr* v = e.attrs().Get(a)) fused->attrs().Set(a, *v);
    rw.Replace(m.add->result(0), fused->result(0));
    for (Op* op : {m.add, m.experts, m.down, m.swiglu}) rw.Erase(op);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_form_{pass(), "skipped-ungated-form",
                          "adds of experts and a value that is not matmul(matmul_swiglu) (SiLU)"};
  Statistic skipped_inputs_{pass(), "skipped-ungated-inputs",
                            "experts and ungated shared expert reading different inputs"};
  Statistic skipped_uses_{pass(), "skipped-ungated-uses", "ungated parts with other users"};
  Statistic skipped_clamps_{pass(), "skipped-ungated-clamps", "routed and shared SwiGLU clamps that differ"};
};

class FuseMoeFfnPass : public PatternPass {
 public:
  FuseMoeFfnPass() {
    AddPattern<MoeFfnPattern>();
    AddPattern<MoeFfnUngatedPattern>();
  }
  absl::string_view name() const override { return "fuse-moe-ffn"; }
  absl::string_view description() const override {
    return "Fuses moe_experts and the shared expert (gated: moe_ffn; ungated: moe_ffn_ungated) into one op";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseMoeFfnPass() { return std::make_unique<FuseMoeFfnPass>(); }

}  // namespace memra::passes

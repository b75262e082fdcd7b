#include "frontends/common/MoeFfn.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/common/ModelWeights.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {
namespace {

// DeclareWeight, with `from` (where the expected shape comes from) added to a shape error and
// `role` (what the tensor is) to a missing one.
absl::Status DeclareMoeWeight(const gguf::GgufFile& file, ir::Module& m, const std::string& name,
                              std::vector<int64_t> ne, absl::string_view from, absl::string_view role) {
  absl::Status st = DeclareWeight(file, m, name, std::move(ne));
  if (st.ok()) return st;
  if (absl::IsInvalidArgument(st) && !from.empty())
    return absl::InvalidArgumentError(absl::StrCat(st.message(), " (", from, ")"));
  if (absl::IsNotFound(st)) return absl::NotFoundError(absl::StrCat(st.message(), " (", role, ")"));
  return st;
}

}  // namespace

absl::Status DeclareMoeFfn(const gguf::GgufFile& file, ir::Module& m, int64_t layer, int64_t n_embd,
                           const MoeFfnParams& p) {
  const int64_t E = p.n_expert, F = p.n_ff_exp, Fs = p.n_ff_shexp;
  const std::string experts = absl::StrCat(p.key_expert_count, " = ", E);
  const std::string exp_ff = absl::StrCat(p.key_ff_exp, " = ", F, ", ", experts);
  const std::string sh_ff = absl::StrCat(p.key_ff_shexp, " = ", Fs);
  auto t = [&](absl::string_view tensor) { return LayerTensorName(layer, tensor); };
  MEMRA_RETURN_IF_ERROR(DeclareMoeWeight(file, m, t("ffn_gate_inp.weight"), {n_embd, E}, experts, "the router"));
  const bool fused = file.FindTensor(t("ffn_gate_up_exps.weight")) != nullptr;
  if (fused) {
    for (absl::string_view other : {"ffn_gate_exps.weight", "ffn_up_exps.weight"})
      if (file.FindTensor(t(other)) != nullptr)
        return absl::InvalidArgumentError(absl::StrCat(file.path(), ": tensor \"", t(other), "\" next to \"",
                                                       t("ffn_gate_up_exps.weight"),
                                                       "\": a layer has either fused or separate gate/up experts"));
    MEMRA_RETURN_IF_ERROR(DeclareMoeWeight(file, m, t("ffn_gate_up_exps.weight"), {n_embd, 2 * F, E},
                                           absl::StrCat("2 x ", exp_ff), "the fused gate/up experts"));
  } else {
    MEMRA_RETURN_IF_ERROR(
        DeclareMoeWeight(file, m, t("ffn_gate_exps.weight"), {n_embd, F, E}, exp_ff, "the gate experts"));
    MEMRA_RETURN_IF_ERROR(DeclareMoeWeight(file, m, t("ffn_up_exps.weight"), {n_embd, F, E}, exp_ff, "the up experts"));
  }
  MEMRA_RETURN_IF_ERROR(
      DeclareMoeWeight(file, m, t("ffn_down_exps.weight"), {F, n_embd, E}, exp_ff, "the down experts"));
  MEMRA_RETURN_IF_ERROR(
      DeclareMoeWeight(file, m, t("ffn_gate_inp_shexp.weight"), {n_embd, 1}, "", "the shared expert's sigmoid gate"));
  MEMRA_RETURN_IF_ERROR(
      DeclareMoeWeight(file, m, t("ffn_gate_shexp.weight"), {n_embd, Fs}, sh_ff, "the shared expert's gate"));
  MEMRA_RETURN_IF_ERROR(
      DeclareMoeWeight(file, m, t("ffn_up_shexp.weight"), {n_embd, Fs}, sh_ff, "the shared expert's up"));
  return DeclareMoeWeight(file, m, t("ffn_down_shexp.weight"), {Fs, n_embd}, sh_ff, "the shared expert's down");
}

ir::Value* BuildMoeFfn(const LayerContext& c, ir::Value* y, const MoeFfnParams& p) {
  ir::OpBuilder& b = c.b;
  ir::Value* logits = b.MatMul(y, c.W("ffn_gate_inp.weight"))->Named(c.Node("ffn_moe_logits"));
  auto [weights, ids] = b.MoeRoute(logits, p.n_expert_used);
  weights->Named(c.Node("ffn_moe_weights_norm"));
  ids->Named(c.Node("ffn_moe_topk"));
  llvm::SmallVector<ir::Value*, 2> gate_up;
  if (ir::Value* fused = c.W("ffn_gate_up_exps.weight"))
    gate_up.push_back(fused);
  else
    gate_up = {c.W("ffn_gate_exps.weight"), c.W("ffn_up_exps.weight")};
  ir::Value* moe = b.MoeExperts(y, weights, ids, c.W("ffn_down_exps.weight"), gate_up)->Named(c.Node("ffn_moe_out"));
  ir::Value* sg = b.MatMul(y, c.W("ffn_gate_shexp.weight"))->Named(c.Node("ffn_shexp_gate"));
  ir::Value* su = b.MatMul(y, c.W("ffn_up_shexp.weight"))->Named(c.Node("ffn_shexp_up"));
  ir::Value* sa = b.Swiglu(sg, su)->Named(c.Node("ffn_shexp_swiglu"));
  ir::Value* sh = b.MatMul(sa, c.W("ffn_down_shexp.weight"))->Named(c.Node("ffn_shexp"));
  ir::Value* gate = b.MatMul(y, c.W("ffn_gate_inp_shexp.weight"))->Named(c.Node("shared_expert_gate"));
  return b.GatedAdd(moe, sh, gate)->Named(c.Node("ffn_out"));
}

}  // namespace memra::frontends

#include "frontends/common/SwigluFfn.h"

#include "frontends/common/ModelWeights.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

absl::Status DeclareSwigluFfn(const gguf::GgufFile& file, ir::Module& m, int64_t layer, int64_t n_embd, int64_t n_ff) {
  MEMRA_RETURN_IF_ERROR(DeclareWeight(file, m, LayerTensorName(layer, "ffn_gate.weight"), {n_embd, n_ff}));
  MEMRA_RETURN_IF_ERROR(DeclareWeight(file, m, LayerTensorName(layer, "ffn_up.weight"), {n_embd, n_ff}));
  return DeclareWeight(file, m, LayerTensorName(layer, "ffn_down.weight"), {n_ff, n_embd});
}

ir::Value* BuildSwigluFfn(const LayerContext& c, ir::Value* y, double clamp) {
  ir::OpBuilder& b = c.b;
  ir::Value* g = b.MatMul(y, c.W("ffn_gate.weight"))->Named(c.Node("ffn_gate"));
  ir::Value* u = b.MatMul(y, c.W("ffn_up.weight"))->Named(c.Node("ffn_up"));
  ir::Value* a = b.Swiglu(g, u, clamp)->Named(c.Node("ffn_swiglu"));
  return b.MatMul(a, c.W("ffn_down.weight"))->Named(c.Node("ffn_out"));
}

}  // namespace memra::frontends

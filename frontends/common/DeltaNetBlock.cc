#include "frontends/common/DeltaNetBlock.h"

#include <cmath>

#include "frontends/common/ModelWeights.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

using ir::Shape;
using ir::Value;

absl::Status DeclareDeltaNetWeights(const gguf::GgufFile& file, ir::Module& m, int64_t layer, int64_t n_embd,
                                    const DeltaNetParams& p) {
  const int64_t E = n_embd, Hv = p.n_v_heads;
  auto declare = [&](absl::string_view tensor, std::vector<int64_t> ne) {
    return DeclareWeight(file, m, LayerTensorName(layer, tensor), std::move(ne));
  };
  MEMRA_RETURN_IF_ERROR(declare("attn_qkv.weight", {E, p.ConvDim()}));
  MEMRA_RETURN_IF_ERROR(declare("attn_gate.weight", {E, p.ValueDim()}));
  MEMRA_RETURN_IF_ERROR(declare("ssm_conv1d.weight", {p.d_conv, p.ConvDim()}));
  MEMRA_RETURN_IF_ERROR(declare("ssm_dt.bias", {Hv}));
  MEMRA_RETURN_IF_ERROR(declare("ssm_a", {Hv}));
  MEMRA_RETURN_IF_ERROR(declare("ssm_beta.weight", {E, Hv}));
  MEMRA_RETURN_IF_ERROR(declare("ssm_alpha.weight", {E, Hv}));
  MEMRA_RETURN_IF_ERROR(declare("ssm_norm.weight", {p.d_state}));
  return declare("ssm_out.weight", {p.ValueDim(), E});
}

void DeclareDeltaNetState(ir::Module& m, int64_t layer, const DeltaNetParams& p, int64_t slots) {
  const ir::AttrDict attrs{{"layer", layer}};
  Shape conv{p.ConvDim(), p.d_conv - 1};
  Shape delta{p.n_v_heads, p.d_state, p.d_state};
  if (slots > 0) {
    conv = Shape{slots, p.ConvDim(), p.d_conv - 1};
    delta = Shape{slots, p.n_v_heads, p.d_state, p.d_state};
  }
  m.AddState(ir::StateKind::kConv, LayerTensorName(layer, "conv_state"), ir::TensorType(ir::DType::kF32, conv), attrs);
  m.AddState(ir::StateKind::kDelta, LayerTensorName(layer, "delta_state"), ir::TensorType(ir::DType::kF32, delta),
             attrs);
}

Value* BuildGatedDeltaNet(const LayerContext& c, Value* h, const DeltaNetParams& p) {
  ir::OpBuilder& b = c.b;
  const ir::Dim& T = c.T;
  const int64_t Kd = p.KeyDim(), Vd = p.ValueDim(), Hk = p.n_k_heads, Hv = p.n_v_heads, Ds = p.d_state;
  Value* qkv = b.MatMul(h, c.W("attn_qkv.weight"))->Named(c.Node("qkv_mixed"));
  Value* z = b.MatMul(h, c.W("attn_gate.weight"))->Named(c.Node("z"));
  Value* braw = b.MatMul(h, c.W("ssm_beta.weight"))->Named(c.Node("beta"));
  Value* alpha = b.MatMul(h, c.W("ssm_alpha.weight"))->Named(c.Node("alpha"));
  auto [beta, g] = b.DeltaNetGates(braw, alpha, c.W("ssm_dt.bias"), c.W("ssm_a"));
  beta->Named(c.Node("beta_sigmoid"));
  g->Named(c.Node("gate"));
  Value* conv =
      c.seq ? b.SeqConv1dCausal(qkv, c.W("ssm_conv1d.weight"), c.S("conv_state"), c.seq->seq_slot, c.seq->seq_start)
            : b.Conv1dCausal(qkv, c.W("ssm_conv1d.weight"), c.S("conv_state"));
  conv->Named(c.Node("conv_output"));
  conv = b.Silu(conv)->Named(c.Node("conv_output_silu"));
  auto parts = b.Split(conv, 1, {Kd, Kd, Vd});
  // After an error Split returns one poison value: index it safely (the error is reported).
  Value* q = b.Reshape(parts[0], Shape{T, Hk, Ds});
  Value* k = b.Reshape(parts.size() > 1 ? parts[1] : parts[0], Shape{T, Hk, Ds});
  Value* v = b.Reshape(parts.size() > 2 ? parts[2] : parts[0], Shape{T, Hv, Ds})->Named(c.Node("v_conv"));
  q = b.L2Norm(q, p.eps)->Named(c.Node("q_conv_predelta"));
  k = b.L2Norm(k, p.eps)->Named(c.Node("k_conv_predelta"));
  const double scale = 1.0 / std::sqrt(static_cast<double>(Ds));
  Value* o = c.seq ? b.SeqGatedDeltaScan(q, k, v, g, beta, c.S("delta_state"), c.seq->seq_slot, c.seq->seq_start, scale)
                   : b.GatedDeltaScan(q, k, v, g, beta, c.S("delta_state"), scale);
  // 16-bit or quantized projections: the scan's chunked products may take bf16 operands (ir/Ops.def).
  if (c.W("attn_qkv.weight")->dtype() != ir::DType::kF32) o->def()->attrs().Set("precision", std::string("bf16"));
  o->Named(c.Node("attn_output"));
  Value* zh = b.Reshape(z, Shape{T, Hv, Ds});
  o = b.GatedRmsNorm(o, zh, c.W("ssm_norm.weight"), p.eps)->Named(c.Node("final_output"));
  o = b.Reshape(o, Shape{T, Vd});
  return b.MatMul(o, c.W("ssm_out.weight"))->Named(c.Node("linear_attn_out"));
}

}  // namespace memra::frontends

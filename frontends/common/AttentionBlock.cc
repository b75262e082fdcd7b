#include "frontends/common/AttentionBlock.h"

#include <tuple>

#include "frontends/common/ModelWeights.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

using ir::Shape;
using ir::Value;

absl::Status DeclareAttentionWeights(const gguf::GgufFile& file, ir::Module& m, int64_t layer, int64_t n_embd,
                                     const AttentionParams& p) {
  const int64_t E = n_embd, D = p.head_dim;
  const int64_t q_rows = (p.gate == AttentionParams::Gate::kInterleavedQ ? 2 : 1) * D * p.n_head;
  auto declare = [&](absl::string_view tensor, std::vector<int64_t> ne) {
    return DeclareWeight(file, m, LayerTensorName(layer, tensor), std::move(ne));
  };
  MEMRA_RETURN_IF_ERROR(declare("attn_q.weight", {E, q_rows}));
  MEMRA_RETURN_IF_ERROR(declare("attn_k.weight", {E, D * p.n_head_kv}));
  MEMRA_RETURN_IF_ERROR(declare("attn_v.weight", {E, D * p.n_head_kv}));
  MEMRA_RETURN_IF_ERROR(declare("attn_output.weight", {D * p.n_head, E}));
  if (p.qk_norm) {
    MEMRA_RETURN_IF_ERROR(declare("attn_q_norm.weight", {D}));
    MEMRA_RETURN_IF_ERROR(declare("attn_k_norm.weight", {D}));
  }
  return absl::OkStatus();
}

namespace {
void DeclareCaches(ir::Module& m, int64_t layer, const Shape& shape, const KvCacheTypes& types, int64_t ring = 0) {
  ir::AttrDict attrs{{"layer", layer}};
  if (ring > 0) attrs.Set("ring", ring);
  m.AddState(ir::StateKind::kKv, LayerTensorName(layer, "k_cache"), ir::TensorType(types.k, shape), attrs);
  m.AddState(ir::StateKind::kKv, LayerTensorName(layer, "v_cache"), ir::TensorType(types.v, shape), attrs);
}
}  // namespace

void DeclareKvCache(ir::Module& m, int64_t layer, int64_t n_ctx, const AttentionParams& p, const KvCacheTypes& types,
                    int64_t ring) {
  DeclareCaches(m, layer, Shape{n_ctx, p.n_head_kv, p.head_dim}, types, ring);
}

void DeclarePagedKvCache(ir::Module& m, int64_t layer, int64_t n_blocks, int64_t block, const AttentionParams& p,
                         const KvCacheTypes& types) {
  DeclareCaches(m, layer, Shape{n_blocks, block, p.n_head_kv, p.head_dim}, types);
}

Value* BuildAttention(const LayerContext& c, Value* h, Value* pos, const AttentionParams& p) {
  ir::OpBuilder& b = c.b;
  const ir::Dim& T = c.T;
  const int64_t D = p.head_dim, H = p.n_head, Hkv = p.n_head_kv;
  const bool gated = p.gate == AttentionParams::Gate::kInterleavedQ;
  Value* q = nullptr;
  Value* gate = nullptr;
  if (gated) {
    Value* qg = b.MatMul(h, c.W("attn_q.weight"))->Named(c.Node("q_gated"));
    std::tie(q, gate) = b.QGateSplit(qg, H, D);
  } else {
    q = b.Reshape(b.MatMul(h, c.W("attn_q.weight"))->Named(c.Node("Qcur_proj")), Shape{T, H, D});
  }
  Value* k = b.Reshape(b.MatMul(h, c.W("attn_k.weight"))->Named(c.Node("Kcur_proj")), Shape{T, Hkv, D});
  Value* v = b.Reshape(b.MatMul(h, c.W("attn_v.weight")), Shape{T, Hkv, D})->Named(c.Node("Vcur"));
  if (p.qk_norm) {
    q = b.RmsNorm(q, c.W("attn_q_norm.weight"), p.norm_eps)->Named(c.Node("Qcur_normed"));
    k = b.RmsNorm(k, c.W("attn_k_norm.weight"), p.norm_eps)->Named(c.Node("Kcur_normed"));
  }
  q = b.Rope(q, pos, p.n_rot, p.rope_base)->Named(c.Node("Qcur"));
  k = b.Rope(k, pos, p.n_rot, p.rope_base)->Named(c.Node("Kcur"));
  Value* kc = c.S("k_cache");
  Value* vc = c.S("v_cache");
  Value* att = nullptr;
  if (c.seq) {
    b.PagedKvAppend(k, v, kc, vc, c.seq->blocks, pos, c.seq->slot);
    att = b.PagedAttention(q, kc, vc, c.seq->blocks, pos, c.seq->slot, p.scale);
  } else {
    b.KvAppend(k, v, kc, vc, pos);
    att = b.Attention(q, kc, vc, pos, p.scale);
  }
  // 16-bit or quantized projections: their GPU products already round the activations to bf16, so
  // the attention may too (ir/Ops.def, precision); an f32 model keeps f32 attention.
  if (c.W("attn_q.weight")->dtype() != ir::DType::kF32) att->def()->attrs().Set("precision", std::string("bf16"));
  att->Named(c.Node(gated ? "attn_pregate" : "kqv_out"));
  if (gated) {
    Value* sg = b.Sigmoid(gate)->Named(c.Node("gate_sigmoid"));
    att = b.Mul(att, sg)->Named(c.Node("attn_gated"));
  }
  att = b.Reshape(att, Shape{T, H * D});
  return b.MatMul(att, c.W("attn_output.weight"))->Named(c.Node("attn_output"));
}

}  // namespace memra::frontends

#include "frontends/qwen35/Qwen35Lowering.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Builder.h"
#include "ir/StatusMacros.h"
#include "ir/Verifier.h"

namespace memra::frontends {
namespace {

using ir::Dim;
using ir::DType;
using ir::OpBuilder;
using ir::Shape;
using ir::StateKind;
using ir::TensorType;
using ir::Value;

class Qwen35Lowering {
 public:
  Qwen35Lowering(const gguf::GgufFile& f, const Qwen35Hparams& h, const LowerOptions& o)
      : f_(f), h_(h), opt_(o) {}

  absl::StatusOr<std::unique_ptr<ir::Module>> Run() {
    m_ = std::make_unique<ir::Module>();
    n_ctx_ = opt_.n_ctx > 0 ? opt_.n_ctx : std::min(h_.n_ctx_train, LowerOptions::kDefaultContext);
    if (n_ctx_ <= 0)
      return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": context length must be > 0"));
    MEMRA_RETURN_IF_ERROR(RejectUnsupportedTensors());
    MEMRA_RETURN_IF_ERROR(DeclareWeights());
    DeclareState();
    RecordAttributes();
    MEMRA_RETURN_IF_ERROR(BuildFunction("prefill", Dim::Symbol("T"), opt_.prefill_all_logits));
    MEMRA_RETURN_IF_ERROR(BuildFunction("decode", Dim(1), /*all_logits=*/true));
    MEMRA_RETURN_IF_ERROR(ir::VerifyModule(*m_));
    return std::move(m_);
  }

 private:
  // ---- weights -----------------------------------------------------------------------------

  // Declares tensor `name` with the expected ggml `ne`; errors name the tensor and both shapes.
  absl::Status Declare(const std::string& name, std::vector<int64_t> ne) {
    MEMRA_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, f_.GetTensor(name));
    std::vector<int64_t> got = t->ne;
    while (got.size() > ne.size() && got.back() == 1) got.pop_back();
    if (got != ne)
      return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": tensor \"", name, "\" has shape ",
                                                     gguf::ShapeString(t->ne), ", expected ",
                                                     gguf::ShapeString(ne)));
    std::optional<DType> dt = ir::DTypeFromGgmlId(static_cast<uint32_t>(t->type));
    if (!dt)
      return absl::UnimplementedError(absl::StrCat(f_.path(), ": tensor \"", name, "\" has type ",
                                                   formats::GgmlTypeName(t->type),
                                                   ", which the IR has no dtype for"));
    if (ir::IsQuantized(*dt) && ne[0] % ir::InfoOf(*dt).block_elems != 0)
      return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": tensor \"", name, "\": ne0 = ", ne[0],
                                                     " is not a multiple of the ", ir::DTypeName(*dt),
                                                     " block size"));
    if (m_->AddWeightNe(name, *dt, ne) == nullptr)
      return absl::InternalError(absl::StrCat("weight ", name, " declared twice"));
    return absl::OkStatus();
  }

  // Tensors llama.cpp would apply that memra cannot yet: refuse rather than compute wrong logits.
  absl::Status RejectUnsupportedTensors() {
    for (const gguf::TensorInfo& t : f_.tensors()) {
      if (absl::EndsWith(t.name, ".scale") || absl::EndsWith(t.name, ".input_scale"))
        return absl::UnimplementedError(absl::StrCat(f_.path(), ": tensor \"", t.name,
                                                     "\": per-tensor weight scales are not supported yet"));
      if (absl::StrContains(t.name, "_exps.") || absl::StrContains(t.name, "ffn_gate_inp"))
        return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": tensor \"", t.name,
                                                       "\" is a MoE tensor in a dense qwen35 model"));
    }
    return absl::OkStatus();
  }

  absl::Status DeclareWeights() {
    const int64_t E = h_.n_embd;
    MEMRA_RETURN_IF_ERROR(Declare("token_embd.weight", {E, h_.n_vocab}));
    MEMRA_RETURN_IF_ERROR(Declare("output_norm.weight", {E}));
    if (!h_.tied_output) MEMRA_RETURN_IF_ERROR(Declare("output.weight", {E, h_.n_vocab}));
    for (int64_t il = 0; il < h_.n_layer; ++il) {
      const std::string p = absl::StrCat("blk.", il, ".");
      MEMRA_RETURN_IF_ERROR(Declare(p + "attn_norm.weight", {E}));
      MEMRA_RETURN_IF_ERROR(Declare(p + "post_attention_norm.weight", {E}));
      MEMRA_RETURN_IF_ERROR(Declare(p + "ffn_gate.weight", {E, h_.n_ff}));
      MEMRA_RETURN_IF_ERROR(Declare(p + "ffn_up.weight", {E, h_.n_ff}));
      MEMRA_RETURN_IF_ERROR(Declare(p + "ffn_down.weight", {h_.n_ff, E}));
      if (h_.IsRecurrent(il)) {
        const int64_t Hv = h_.n_v_heads;
        MEMRA_RETURN_IF_ERROR(Declare(p + "attn_qkv.weight", {E, h_.ConvDim()}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "attn_gate.weight", {E, h_.d_inner}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "ssm_conv1d.weight", {h_.d_conv, h_.ConvDim()}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "ssm_dt.bias", {Hv}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "ssm_a", {Hv}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "ssm_beta.weight", {E, Hv}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "ssm_alpha.weight", {E, Hv}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "ssm_norm.weight", {h_.d_state}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "ssm_out.weight", {h_.d_inner, E}));
      } else {
        const int64_t D = h_.head_dim;
        MEMRA_RETURN_IF_ERROR(Declare(p + "attn_q.weight", {E, 2 * D * h_.n_head}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "attn_k.weight", {E, D * h_.n_head_kv}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "attn_v.weight", {E, D * h_.n_head_kv}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "attn_output.weight", {D * h_.n_head, E}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "attn_q_norm.weight", {D}));
        MEMRA_RETURN_IF_ERROR(Declare(p + "attn_k_norm.weight", {D}));
      }
    }
    // Norm vectors, biases, ssm_a and the conv kernel are consumed as f32 values.
    for (const auto& w : m_->weights()) {
      const bool plain = w->rank() == 1 || absl::EndsWith(w->name(), "ssm_conv1d.weight");
      if (plain && w->dtype() != DType::kF32)
        return absl::UnimplementedError(absl::StrCat(f_.path(), ": tensor \"", w->name(), "\" has type ",
                                                     ir::DTypeName(w->dtype()),
                                                     "; norm, bias and conv tensors must be f32"));
    }
    return absl::OkStatus();
  }

  // ---- state -------------------------------------------------------------------------------

  void DeclareState() {
    pos_ = m_->AddState(StateKind::kPosition, "pos", TensorType(DType::kI32, Shape{}));
    for (int64_t il = 0; il < h_.n_layer; ++il) {
      const std::string p = absl::StrCat("blk.", il, ".");
      ir::AttrDict attrs{{"layer", il}};
      if (h_.IsRecurrent(il)) {
        m_->AddState(StateKind::kConv, p + "conv_state",
                     TensorType(DType::kF32, Shape{h_.ConvDim(), h_.d_conv - 1}), attrs);
        m_->AddState(StateKind::kDelta, p + "delta_state",
                     TensorType(DType::kF32, Shape{h_.n_v_heads, h_.d_state, h_.d_state}), attrs);
      } else {
        const Shape kv{n_ctx_, h_.n_head_kv, h_.head_dim};
        m_->AddState(StateKind::kKv, p + "k_cache", TensorType(DType::kF32, kv), attrs);
        m_->AddState(StateKind::kKv, p + "v_cache", TensorType(DType::kF32, kv), attrs);
      }
    }
  }

  void RecordAttributes() {
    ir::AttrDict& a = m_->attrs();
    a.Set("arch", h_.arch);
    a.Set("n_ctx_train", h_.n_ctx_train);
    a.Set("n_ctx", n_ctx_);
    a.Set("n_embd", h_.n_embd);
    a.Set("n_layer", h_.n_layer);
    a.Set("n_nextn", h_.n_nextn);
    a.Set("n_ff", h_.n_ff);
    a.Set("n_head", h_.n_head);
    a.Set("n_head_kv", h_.n_head_kv);
    a.Set("head_dim", h_.head_dim);
    a.Set("n_rot", h_.n_rot);
    a.Set("rope_base", h_.rope_base);
    a.Set("rope_sections", std::vector<int64_t>(h_.rope_sections.begin(), h_.rope_sections.end()));
    a.Set("rms_eps", h_.rms_eps);
    a.Set("ssm_d_conv", h_.d_conv);
    a.Set("ssm_d_state", h_.d_state);
    a.Set("ssm_n_k_heads", h_.n_k_heads);
    a.Set("ssm_n_v_heads", h_.n_v_heads);
    a.Set("ssm_d_inner", h_.d_inner);
    a.Set("full_attention_interval", h_.full_attention_interval);
    std::vector<int64_t> rec;
    for (bool r : h_.recurrent) rec.push_back(r ? 1 : 0);
    a.Set("recurrent_layers", rec);
    a.Set("n_vocab", h_.n_vocab);
    a.Set("tied_output", static_cast<int64_t>(h_.tied_output));
    a.Set("prefill_logits", opt_.prefill_all_logits ? "all" : "last");
  }

  // ---- functions ---------------------------------------------------------------------------

  Value* W(const std::string& name) const { return m_->weight(name); }
  Value* S(const std::string& name) const { return m_->state(name); }

  absl::Status BuildFunction(absl::string_view name, Dim T, bool all_logits) {
    ir::Function* fn = m_->AddFunction(name);
    Value* tokens = fn->AddArgument("tokens", TensorType(DType::kI32, Shape{T}));
    OpBuilder b(fn);
    Value* x = b.Embed(tokens, W("token_embd.weight"))->Named("model.input_embed");
    Value* pos = b.Positions(pos_, tokens)->Named("pos");
    for (int64_t il = 0; il < h_.n_layer; ++il) {
      x = Layer(b, il, x, pos, T);
      if (!b.ok())
        return absl::Status(b.status().code(), absl::StrCat("lowering @", name, " layer ", il, ": ",
                                                            b.status().message()));
    }
    Value* out = b.RmsNorm(x, W("output_norm.weight"), h_.rms_eps)->Named("result_norm");
    if (!all_logits) out = b.TakeLastRow(out)->Named("result_norm_last");
    Value* head = W(h_.tied_output ? "token_embd.weight" : "output.weight");
    Value* logits = b.MatMul(out, head)->Named("result_output");
    b.AdvancePositions(pos_, tokens);
    b.Return({logits});
    if (!b.ok())
      return absl::Status(b.status().code(), absl::StrCat("lowering @", name, ": ", b.status().message()));
    fn->set_result_types({logits->type()});
    return absl::OkStatus();
  }

  Value* Layer(OpBuilder& b, int64_t il, Value* x, Value* pos, const Dim& T) {
    const std::string p = absl::StrCat("blk.", il, ".");
    const std::string sfx = absl::StrCat("-", il);
    Value* h = b.RmsNorm(x, W(p + "attn_norm.weight"), h_.rms_eps)->Named("attn_norm" + sfx);
    Value* mix = h_.IsRecurrent(il) ? LinearAttention(b, il, h, T) : FullAttention(b, il, h, pos, T);
    Value* r = b.Add(mix, x)->Named("attn_residual" + sfx);
    Value* y = b.RmsNorm(r, W(p + "post_attention_norm.weight"), h_.rms_eps)->Named("attn_post_norm" + sfx);
    Value* g = b.MatMul(y, W(p + "ffn_gate.weight"))->Named("ffn_gate" + sfx);
    Value* u = b.MatMul(y, W(p + "ffn_up.weight"))->Named("ffn_up" + sfx);
    Value* a = b.Swiglu(g, u)->Named("ffn_swiglu" + sfx);
    Value* f = b.MatMul(a, W(p + "ffn_down.weight"))->Named("ffn_out" + sfx);
    return b.Add(f, r)->Named("l_out" + sfx);
  }

  // Gated DeltaNet mixer: h [T, E] -> [T, E]; updates the layer's conv ring and delta state.
  Value* LinearAttention(OpBuilder& b, int64_t il, Value* h, const Dim& T) {
    const std::string p = absl::StrCat("blk.", il, ".");
    const std::string sfx = absl::StrCat("-", il);
    const int64_t Kd = h_.KeyDim(), Vd = h_.d_inner, Hk = h_.n_k_heads, Hv = h_.n_v_heads,
                  Ds = h_.d_state;
    Value* qkv = b.MatMul(h, W(p + "attn_qkv.weight"))->Named("qkv_mixed" + sfx);
    Value* z = b.MatMul(h, W(p + "attn_gate.weight"))->Named("z" + sfx);
    Value* braw = b.MatMul(h, W(p + "ssm_beta.weight"))->Named("beta" + sfx);
    Value* alpha = b.MatMul(h, W(p + "ssm_alpha.weight"))->Named("alpha" + sfx);
    auto [beta, g] = b.DeltaNetGates(braw, alpha, W(p + "ssm_dt.bias"), W(p + "ssm_a"));
    beta->Named("beta_sigmoid" + sfx);
    g->Named("gate" + sfx);
    Value* conv = b.Conv1dCausal(qkv, W(p + "ssm_conv1d.weight"), S(p + "conv_state"))->Named("conv_output" + sfx);
    conv = b.Silu(conv)->Named("conv_output_silu" + sfx);
    auto parts = b.Split(conv, 1, {Kd, Kd, Vd});
    Value* q = b.Reshape(parts[0], Shape{T, Hk, Ds});
    Value* k = b.Reshape(parts.size() > 1 ? parts[1] : parts[0], Shape{T, Hk, Ds});
    Value* v = b.Reshape(parts.size() > 2 ? parts[2] : parts[0], Shape{T, Hv, Ds})->Named("v_conv" + sfx);
    q = b.L2Norm(q, h_.rms_eps)->Named("q_conv_predelta" + sfx);
    k = b.L2Norm(k, h_.rms_eps)->Named("k_conv_predelta" + sfx);
    Value* o = b.GatedDeltaScan(q, k, v, g, beta, S(p + "delta_state"),
                                1.0 / std::sqrt(static_cast<double>(Ds)))
                   ->Named("attn_output" + sfx);
    Value* zh = b.Reshape(z, Shape{T, Hv, Ds});
    o = b.GatedRmsNorm(o, zh, W(p + "ssm_norm.weight"), h_.rms_eps)->Named("final_output" + sfx);
    o = b.Reshape(o, Shape{T, Vd});
    return b.MatMul(o, W(p + "ssm_out.weight"))->Named("linear_attn_out" + sfx);
  }

  // Gated full attention: h [T, E] -> [T, E]; appends to the layer's KV cache.
  Value* FullAttention(OpBuilder& b, int64_t il, Value* h, Value* pos, const Dim& T) {
    const std::string p = absl::StrCat("blk.", il, ".");
    const std::string sfx = absl::StrCat("-", il);
    const int64_t D = h_.head_dim, H = h_.n_head, Hkv = h_.n_head_kv;
    Value* qg = b.MatMul(h, W(p + "attn_q.weight"))->Named("q_gated" + sfx);
    auto [q, gate] = b.QGateSplit(qg, H, D);
    Value* k = b.Reshape(b.MatMul(h, W(p + "attn_k.weight"))->Named("Kcur_proj" + sfx), Shape{T, Hkv, D});
    Value* v = b.Reshape(b.MatMul(h, W(p + "attn_v.weight")), Shape{T, Hkv, D})->Named("Vcur" + sfx);
    q = b.RmsNorm(q, W(p + "attn_q_norm.weight"), h_.rms_eps)->Named("Qcur_normed" + sfx);
    k = b.RmsNorm(k, W(p + "attn_k_norm.weight"), h_.rms_eps)->Named("Kcur_normed" + sfx);
    q = b.Rope(q, pos, h_.n_rot, h_.rope_base)->Named("Qcur" + sfx);
    k = b.Rope(k, pos, h_.n_rot, h_.rope_base)->Named("Kcur" + sfx);
    Value* kc = S(p + "k_cache");
    Value* vc = S(p + "v_cache");
    b.KvAppend(k, v, kc, vc, pos);
    Value* att = b.Attention(q, kc, vc, pos, 1.0 / std::sqrt(static_cast<double>(D)))->Named("attn_pregate" + sfx);
    Value* sg = b.Sigmoid(gate)->Named("gate_sigmoid" + sfx);
    att = b.Mul(att, sg)->Named("attn_gated" + sfx);
    att = b.Reshape(att, Shape{T, H * D});
    return b.MatMul(att, W(p + "attn_output.weight"))->Named("attn_output" + sfx);
  }

  const gguf::GgufFile& f_;
  const Qwen35Hparams& h_;
  const LowerOptions& opt_;
  std::unique_ptr<ir::Module> m_;
  ir::StateVar* pos_ = nullptr;
  int64_t n_ctx_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ir::Module>> LowerQwen35(const gguf::GgufFile& file,
                                                        const LowerOptions& options) {
  MEMRA_ASSIGN_OR_RETURN(Qwen35Hparams h, ReadQwen35Hparams(file));
  Qwen35Lowering lowering(file, h, options);
  return lowering.Run();
}

}  // namespace memra::frontends

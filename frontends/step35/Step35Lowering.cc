#include "frontends/step35/Step35Lowering.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/common/AttentionBlock.h"
#include "frontends/common/DecoderFunctions.h"
#include "frontends/common/Embedding.h"
#include "frontends/common/LayerContext.h"
#include "frontends/common/ModelWeights.h"
#include "frontends/common/Norm.h"
#include "frontends/common/OutputHead.h"
#include "frontends/common/StepLayout.h"
#include "frontends/common/SwigluFfn.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/step35/Step35Hparams.h"
#include "ir/Builder.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {
namespace {

using ir::Dim;
using ir::DType;
using ir::OpBuilder;
using ir::Shape;
using ir::StateKind;
using ir::TensorType;
using ir::Value;

constexpr char kRopeFreqs[] = "rope_freqs.weight";

// llama.cpp clamps a SwiGLU only when its limit exceeds 1e-6.
double Clamp(double limit) { return limit > 1e-6 ? limit : 0.0; }

class Step35Lowering {
 public:
  Step35Lowering(const gguf::GgufFile& f, const Step35Hparams& h, const LowerOptions& o) : f_(f), h_(h), opt_(o) {}

  absl::StatusOr<std::unique_ptr<ir::Module>> Run() {
    MEMRA_RETURN_IF_ERROR(CheckKvCacheTypes(opt_.cache_types, {h_.head_dim}));
    MEMRA_RETURN_IF_ERROR(CheckRouting());
    m_ = std::make_unique<ir::Module>();
    n_ctx_ = ContextLength(opt_, h_.n_ctx_train);
    if (n_ctx_ <= 0) return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": context length must be > 0"));
    if (opt_.max_call_rows <= 0)
      return absl::InvalidArgumentError(absl::StrCat("max_call_rows = ", opt_.max_call_rows, " must be > 0"));
    MEMRA_ASSIGN_OR_RETURN(layout_, CheckSlotOptions(opt_, n_ctx_));
    MEMRA_RETURN_IF_ERROR(RejectUnsupportedTensors());
    MEMRA_RETURN_IF_ERROR(DeclareWeights());
    DeclareState();
    for (const auto& [name, value] : Step35Attributes(h_)) m_->attrs().Set(name, value);
    m_->attrs().Set("n_ctx", n_ctx_);
    m_->attrs().Set("prefill_logits", opt_.prefill_all_logits ? "all" : "last");
    RecordSlotAttributes(m_->attrs(), opt_, layout_);
    MEMRA_RETURN_IF_ERROR(BuildDecoderFunctions(*m_, Hooks(), opt_, blocks_, f_));
    return std::move(m_);
  }

 private:
  // Softmax routing (expert_gating_func 1) is moe_route: top-k of the probabilities, always
  // renormalized, no selection bias and no scale. Other softmax forms are refused by name.
  absl::Status CheckRouting() const {
    if (h_.gating != 1) return absl::OkStatus();
    bool bias = false;
    for (int64_t il = 0; il < h_.n_layer; ++il) bias |= Has(il, "exp_probs_b.bias");
    if (!h_.expert_weights_norm || bias || (h_.expert_weights_scale != 0 && h_.expert_weights_scale != 1))
      return absl::UnimplementedError(
          absl::StrCat(f_.path(),
                       ": step35.expert_gating_func = 1 (softmax) is supported with "
                       "step35.expert_weights_norm = true, no exp_probs_b.bias and no expert_weights_scale"));
    return absl::OkStatus();
  }

  // Per-tensor scales (NVFP4 and the like) would change the products: refuse them by name.
  absl::Status RejectUnsupportedTensors() const {
    for (const gguf::TensorInfo& t : f_.tensors())
      if (absl::EndsWith(t.name, ".scale") || absl::EndsWith(t.name, ".input_scale") ||
          absl::StrContains(t.name, "rope_factors_"))
        return absl::UnimplementedError(absl::StrCat(f_.path(), ": tensor \"", t.name, "\" is not supported yet"));
    return absl::OkStatus();
  }

  absl::Status Declare(int64_t il, absl::string_view tensor, std::vector<int64_t> ne) {
    return DeclareWeight(f_, *m_, LayerTensorName(il, tensor), std::move(ne));
  }
  bool Has(int64_t il, absl::string_view tensor) const { return f_.FindTensor(LayerTensorName(il, tensor)) != nullptr; }

  // Rotated dims of the widest layer: rope_freqs holds that many / 2 factors (llama.cpp's n_rot_max).
  int64_t MaxRot() const {
    int64_t r = 0;
    for (int64_t il = 0; il < h_.n_layer; ++il) r = std::max(r, h_.Rot(il));
    return r;
  }

  absl::Status DeclareWeights() {
    const int64_t E = h_.n_embd, D = h_.head_dim;
    MEMRA_RETURN_IF_ERROR(DeclareTokenEmbedding(f_, *m_, E, h_.n_vocab));
    MEMRA_RETURN_IF_ERROR(DeclareOutputHead(f_, *m_, E, h_.n_vocab, h_.tied_output));
    if (f_.FindTensor(kRopeFreqs) != nullptr) MEMRA_RETURN_IF_ERROR(DeclareWeight(f_, *m_, kRopeFreqs, {MaxRot() / 2}));
    for (int64_t il = 0; il < h_.n_layer; ++il) {
      const int64_t H = h_.n_head[il], Hkv = h_.n_head_kv[il];
      MEMRA_RETURN_IF_ERROR(Declare(il, "attn_norm.weight", {E}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_norm.weight", {E}));
      for (const char* norm : {"attn_q_norm.weight", "attn_k_norm.weight"})
        if (Has(il, norm)) MEMRA_RETURN_IF_ERROR(Declare(il, norm, {D}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "attn_q.weight", {E, D * H}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "attn_k.weight", {E, D * Hkv}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "attn_v.weight", {E, D * Hkv}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "attn_output.weight", {D * H, E}));
      if (h_.gated_layer[il]) MEMRA_RETURN_IF_ERROR(Declare(il, "attn_gate.weight", {E, H}));
      if (!h_.moe_layer[il]) {
        MEMRA_RETURN_IF_ERROR(DeclareSwigluFfn(f_, *m_, il, E, h_.n_ff[il]));
        continue;
      }
      const int64_t X = h_.n_expert, F = h_.n_ff_exp, Fs = h_.n_ff_shexp;
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_gate_inp.weight", {E, X}));
      if (Has(il, "exp_probs_b.bias")) MEMRA_RETURN_IF_ERROR(Declare(il, "exp_probs_b.bias", {X}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_gate_exps.weight", {E, F, X}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_up_exps.weight", {E, F, X}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_down_exps.weight", {F, E, X}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_gate_shexp.weight", {E, Fs}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_up_shexp.weight", {E, Fs}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_down_shexp.weight", {Fs, E}));
    }
    return absl::OkStatus();
  }

  // Rows of layer il's KV cache: the context, or for a sliding-window layer whose window and one
  // call's rows fit in less, a ring of W + max_call_rows - 1 rows (ir/Ops.def kv_append ring).
  int64_t KvRows(int64_t il) const {
    if (!h_.IsSwa(il)) return n_ctx_;
    return std::min(n_ctx_, h_.n_swa + opt_.max_call_rows - 1);
  }
  int64_t Ring(int64_t il) const { return KvRows(il) < n_ctx_ ? h_.n_swa : 0; }

  void DeclareState() {
    const int64_t S = opt_.slots;
    pos_ = m_->AddState(StateKind::kPosition, "pos", TensorType(DType::kI32, S > 0 ? Shape{S} : Shape{}));
    if (S > 0)
      blocks_ = m_->AddState(StateKind::kBlocks, "kv_blocks", TensorType(DType::kI32, Shape{S, layout_.max_blocks}));
    for (int64_t il = 0; il < h_.n_layer; ++il) {
      AttentionParams p;
      p.n_head_kv = h_.n_head_kv[il];
      p.head_dim = h_.head_dim;
      if (S > 0)
        DeclarePagedKvCache(*m_, il, layout_.kv_blocks, LowerOptions::kKvBlock, p, opt_.cache_types);
      else
        DeclareKvCache(*m_, il, KvRows(il), p, opt_.cache_types, Ring(il));
      if (S == 0 && Ring(il) > 0) m_->attrs().Set("max_call_rows", opt_.max_call_rows);
    }
  }

  DecoderHooks Hooks() {
    DecoderHooks h;
    h.n_layer = h_.n_layer;
    h.head = {h_.rms_eps, h_.tied_output};
    h.pos = pos_;
    h.layer = [this](const LayerContext& c, Value* x, Value* pos) { return Layer(c, x, pos); };
    return h;
  }

  // q/k: the optional per-head rms_norm, then NeoX rope with the layer's rotated dims and base
  // (the full layers with rope_freqs when the file has it).
  Value* NormRope(const LayerContext& c, Value* x, Value* pos, absl::string_view norm, absl::string_view node) {
    const int64_t il = c.layer;
    if (Has(il, norm)) x = c.b.RmsNorm(x, c.W(norm), h_.rms_eps);
    Value* ff = h_.IsSwa(il) ? nullptr : c.m.weight(kRopeFreqs);
    return c.b.Rope(x, pos, h_.Rot(il), h_.RopeBase(il), ff)->Named(c.Node(node));
  }

  // Attention with scale 1/sqrt(D) (the window on sliding layers), each head's output times
  // sigmoid(attn_gate · h) when the layer has the gate, then attn_output.
  Value* Attention(const LayerContext& c, Value* h, Value* pos) {
    const int64_t il = c.layer, D = h_.head_dim, H = h_.n_head[il], Hkv = h_.n_head_kv[il];
    OpBuilder& b = c.b;
    const Dim& T = c.T;
    Value* q = b.Reshape(b.MatMul(h, c.W("attn_q.weight"))->Named(c.Node("Qcur")), Shape{T, H, D});
    Value* k = b.Reshape(b.MatMul(h, c.W("attn_k.weight"))->Named(c.Node("Kcur")), Shape{T, Hkv, D});
    Value* v = b.Reshape(b.MatMul(h, c.W("attn_v.weight"))->Named(c.Node("Vcur")), Shape{T, Hkv, D});
    q = NormRope(c, q, pos, "attn_q_norm.weight", "Qcur_pos");
    k = NormRope(c, k, pos, "attn_k_norm.weight", "Kcur_pos");
    if (c.seq)
      b.PagedKvAppend(k, v, c.S("k_cache"), c.S("v_cache"), c.seq->blocks, pos, c.seq->slot);
    else
      b.KvAppend(k, v, c.S("k_cache"), c.S("v_cache"), pos, Ring(il));
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const int64_t window = h_.IsSwa(il) ? h_.n_swa : 0;
    Value* o = c.seq
                   ? b.PagedAttention(q, c.S("k_cache"), c.S("v_cache"), c.seq->blocks, pos, c.seq->slot, scale, window)
                   : b.Attention(q, c.S("k_cache"), c.S("v_cache"), pos, scale, window, Ring(il));
    o->Named(c.Node("attn_out"));
    // 16-bit or quantized projections: their GPU products already round the activations to bf16,
    // so the attention may too (ir/Ops.def, precision); f32 models keep f32 attention.
    if (c.W("attn_q.weight")->dtype() != DType::kF32) o->def()->attrs().Set("precision", std::string("bf16"));
    if (h_.gated_layer[il]) {
      Value* g = b.Sigmoid(b.Reshape(b.MatMul(h, c.W("attn_gate.weight")), Shape{T, H, 1}))
                     ->Named(c.Node("attn_gate_sigmoid"));
      o = b.MulRows(o, g)->Named(c.Node("attn_gated"));
    }
    return b.MatMul(b.Reshape(o, Shape{T, H * D}), c.W("attn_output.weight"))->Named(c.Node("attn_proj"));
  }

  // A MoE layer's FFN: the routed experts (sigmoid or softmax router, SwiGLU clamped at
  // swiglu_clamp_exp) plus the shared expert (clamped at swiglu_clamp_shexp), summed.
  Value* MoeFfn(const LayerContext& c, Value* y) {
    OpBuilder& b = c.b;
    const int64_t il = c.layer;
    Value* logits = b.MatMul(y, c.W("ffn_gate_inp.weight"))->Named(c.Node("ffn_moe_logits"));
    Value* bias = Has(il, "exp_probs_b.bias") ? c.W("exp_probs_b.bias") : nullptr;
    auto [weights, ids] = h_.gating == 2 ? b.MoeRouteSigmoid(logits, h_.n_expert_used, bias, h_.expert_weights_norm,
                                                             h_.expert_weights_scale)
                                         : b.MoeRoute(logits, h_.n_expert_used);
    weights->Named(c.Node("ffn_moe_weights_scaled"));
    ids->Named(c.Node("ffn_moe_topk"));
    Value* moe = b.MoeExperts(y, weights, ids, c.W("ffn_down_exps.weight"),
                              {c.W("ffn_gate_exps.weight"), c.W("ffn_up_exps.weight")}, "silu", Clamp(h_.clamp_exp[il]))
                     ->Named(c.Node("ffn_moe_out"));
    Value* sg = b.MatMul(y, c.W("ffn_gate_shexp.weight"));
    Value* su = b.MatMul(y, c.W("ffn_up_shexp.weight"));
    Value* sh = b.MatMul(b.Swiglu(sg, su, Clamp(h_.clamp_shexp[il])), c.W("ffn_down_shexp.weight"))
                    ->Named(c.Node("ffn_shared_out"));
    return b.Add(moe, sh)->Named(c.Node("ffn_out"));
  }

  Value* Layer(const LayerContext& c, Value* x, Value* pos) {
    OpBuilder& b = c.b;
    const int64_t il = c.layer;
    Value* h = BuildLayerRmsNorm(c, x, "attn_norm.weight", h_.rms_eps, "attn_norm");
    Value* r = b.Add(Attention(c, h, pos), x)->Named(c.Node("ffn_inp"));
    Value* y = BuildLayerRmsNorm(c, r, "ffn_norm.weight", h_.rms_eps, "ffn_norm");
    // A dense layer's FFN is clamped at swiglu_clamp_shexp (llama.cpp's build_ffn reads it).
    Value* f = h_.moe_layer[il] ? MoeFfn(c, y) : BuildSwigluFfn(c, y, Clamp(h_.clamp_shexp[il]));
    return b.Add(f, r)->Named(c.Node("l_out"));
  }

  const gguf::GgufFile& f_;
  const Step35Hparams& h_;
  const LowerOptions& opt_;
  std::unique_ptr<ir::Module> m_;
  ir::StateVar* pos_ = nullptr;
  ir::StateVar* blocks_ = nullptr;  // the paged KV cache's block table (slots > 0)
  int64_t n_ctx_ = 0;
  PagedKvLayout layout_;  // slots > 0
};

}  // namespace

absl::StatusOr<std::unique_ptr<ir::Module>> LowerStep35(const gguf::GgufFile& file, const LowerOptions& options) {
  MEMRA_ASSIGN_OR_RETURN(Step35Hparams h, ReadStep35Hparams(file));
  Step35Lowering lowering(file, h, options);
  return lowering.Run();
}

}  // namespace memra::frontends

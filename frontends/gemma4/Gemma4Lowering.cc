#include "frontends/gemma4/Gemma4Lowering.h"

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
#include "frontends/gemma4/Gemma4Hparams.h"
#include "frontends/gguf/GgufFile.h"
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

class Gemma4Lowering {
 public:
  Gemma4Lowering(const gguf::GgufFile& f, const Gemma4Hparams& h, const LowerOptions& o) : f_(f), h_(h), opt_(o) {}

  absl::StatusOr<std::unique_ptr<ir::Module>> Run() {
    MEMRA_RETURN_IF_ERROR(CheckKvCacheTypes(opt_.cache_types, {h_.head_dim, h_.head_dim_swa}));
    m_ = std::make_unique<ir::Module>();
    n_ctx_ = ContextLength(opt_, h_.n_ctx_train);
    if (n_ctx_ <= 0) return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": context length must be > 0"));
    if (opt_.max_call_rows <= 0)
      return absl::InvalidArgumentError(absl::StrCat("max_call_rows = ", opt_.max_call_rows, " must be > 0"));
    MEMRA_ASSIGN_OR_RETURN(layout_, CheckSlotOptions(opt_, n_ctx_));
    MEMRA_RETURN_IF_ERROR(RejectUnsupportedTensors());
    MEMRA_RETURN_IF_ERROR(DeclareWeights());
    DeclareState();
    for (const auto& [name, value] : Gemma4Attributes(h_)) m_->attrs().Set(name, value);
    m_->attrs().Set("n_ctx", n_ctx_);
    m_->attrs().Set("prefill_logits", opt_.prefill_all_logits ? "all" : "last");
    RecordSlotAttributes(m_->attrs(), opt_, layout_);
    MEMRA_RETURN_IF_ERROR(BuildDecoderFunctions(*m_, Hooks(), opt_, blocks_, f_));
    return std::move(m_);
  }

 private:
  bool OwnsKv(int64_t il) const { return il < h_.FirstSharedLayer(); }

  // Per-tensor scales (NVFP4 and the like) would change the products: refuse them by name, except
  // the MoE layers' router input scale and per-expert output scales, which the graph applies.
  absl::Status RejectUnsupportedTensors() {
    for (const gguf::TensorInfo& t : f_.tensors())
      if ((absl::EndsWith(t.name, ".scale") && !absl::EndsWith(t.name, ".ffn_gate_inp.scale") &&
           !absl::EndsWith(t.name, ".ffn_down_exps.scale")) ||
          absl::EndsWith(t.name, ".input_scale"))
        return absl::UnimplementedError(
            absl::StrCat(f_.path(), ": tensor \"", t.name, "\": per-tensor weight scales are not supported yet"));
    return absl::OkStatus();
  }

  absl::Status Declare(int64_t il, absl::string_view tensor, std::vector<int64_t> ne) {
    return DeclareWeight(f_, *m_, LayerTensorName(il, tensor), std::move(ne));
  }
  bool Has(int64_t il, absl::string_view tensor) const { return f_.FindTensor(LayerTensorName(il, tensor)) != nullptr; }

  absl::Status DeclareWeights() {
    const int64_t E = h_.n_embd;
    MEMRA_RETURN_IF_ERROR(DeclareTokenEmbedding(f_, *m_, E, h_.n_vocab));
    MEMRA_RETURN_IF_ERROR(DeclareOutputHead(f_, *m_, E, h_.n_vocab, h_.tied_output));
    bool any_full = false;
    for (int64_t il = 0; il < h_.n_layer; ++il) any_full |= !h_.IsSwa(il);
    // The full layers' rope factors (llama.cpp requires them when any layer is full).
    if (any_full) MEMRA_RETURN_IF_ERROR(DeclareWeight(f_, *m_, kRopeFreqs, {h_.n_rot / 2}));
    const int64_t P = h_.n_embd_per_layer, L = h_.n_layer;
    if (P > 0) {
      // E-variants: a per-layer input of P values per token and layer.
      MEMRA_RETURN_IF_ERROR(DeclareWeight(f_, *m_, "per_layer_token_embd.weight", {P * L, h_.n_vocab}));
      MEMRA_RETURN_IF_ERROR(DeclareWeight(f_, *m_, "per_layer_model_proj.weight", {E, P * L}));
      MEMRA_RETURN_IF_ERROR(DeclareWeight(f_, *m_, "per_layer_proj_norm.weight", {P}));
    }
    for (int64_t il = 0; il < h_.n_layer; ++il) {
      const int64_t D = h_.HeadDim(il), H = h_.n_head[il], Hkv = h_.n_head_kv[il], F = h_.n_ff[il];
      for (const char* norm :
           {"attn_norm.weight", "post_attention_norm.weight", "ffn_norm.weight", "post_ffw_norm.weight"})
        MEMRA_RETURN_IF_ERROR(Declare(il, norm, {E}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "attn_q.weight", {E, D * H}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "attn_q_norm.weight", {D}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "attn_output.weight", {D * H, E}));
      if (OwnsKv(il)) {
        MEMRA_RETURN_IF_ERROR(Declare(il, "attn_k.weight", {E, D * Hkv}));
        MEMRA_RETURN_IF_ERROR(Declare(il, "attn_k_norm.weight", {D}));
        // Without attn_v the values are the key projection (before its norm and rope).
        if (Has(il, "attn_v.weight")) MEMRA_RETURN_IF_ERROR(Declare(il, "attn_v.weight", {E, D * Hkv}));
      }
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_gate.weight", {E, F}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_up.weight", {E, F}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_down.weight", {F, E}));
      if (Has(il, "layer_output_scale.weight")) MEMRA_RETURN_IF_ERROR(Declare(il, "layer_output_scale.weight", {1}));
      if (h_.moe_layer[il]) MEMRA_RETURN_IF_ERROR(DeclareMoe(il));
      if (P > 0) {
        MEMRA_RETURN_IF_ERROR(Declare(il, "inp_gate.weight", {E, P}));
        MEMRA_RETURN_IF_ERROR(Declare(il, "proj.weight", {P, E}));
        MEMRA_RETURN_IF_ERROR(Declare(il, "post_norm.weight", {E}));
      }
    }
    return absl::OkStatus();
  }

  // The routed experts beside the dense MLP: their norms, the router (input scale, logits), the
  // experts (gate and up fused or split) and their per-expert output scales.
  absl::Status DeclareMoe(int64_t il) {
    const int64_t E = h_.n_embd, X = h_.n_expert, F = h_.n_ff_exp;
    for (const char* norm :
         {"post_ffw_norm_1.weight", "pre_ffw_norm_2.weight", "post_ffw_norm_2.weight", "ffn_gate_inp.scale"})
      MEMRA_RETURN_IF_ERROR(Declare(il, norm, {E}));
    MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_gate_inp.weight", {E, X}));
    if (Has(il, "ffn_gate_up_exps.weight")) {
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_gate_up_exps.weight", {E, 2 * F, X}));
    } else {
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_gate_exps.weight", {E, F, X}));
      MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_up_exps.weight", {E, F, X}));
    }
    MEMRA_RETURN_IF_ERROR(Declare(il, "ffn_down_exps.weight", {F, E, X}));
    return Declare(il, "ffn_down_exps.scale", {X});
  }

  // Rows of layer il's KV cache: the context, or for a sliding-window layer whose window and one
  // call's rows fit in less, a ring of W + max_call_rows - 1 rows (ir/Ops.def kv_append ring).
  int64_t KvRows(int64_t il) const {
    if (!h_.IsSwa(il)) return n_ctx_;
    return std::min(n_ctx_, h_.n_swa + opt_.max_call_rows - 1);
  }
  // The ring attribute of layer il's cache ops (the window), 0 for a full-length cache.
  int64_t Ring(int64_t il) const { return KvRows(il) < n_ctx_ ? h_.n_swa : 0; }

  // The KV-owning layers' caches (the window is the attention's read range; sliding-window layers
  // keep a ring of the window when it is shorter than the context); with slots, per-slot
  // positions, one block table and a paged pool per KV-owning layer.
  void DeclareState() {
    const int64_t S = opt_.slots;
    pos_ = m_->AddState(StateKind::kPosition, "pos", TensorType(DType::kI32, S > 0 ? Shape{S} : Shape{}));
    if (S > 0)
      blocks_ = m_->AddState(StateKind::kBlocks, "kv_blocks", TensorType(DType::kI32, Shape{S, layout_.max_blocks}));
    for (int64_t il = 0; il < h_.FirstSharedLayer(); ++il) {
      AttentionParams p;
      p.n_head_kv = h_.n_head_kv[il];
      p.head_dim = h_.HeadDim(il);
      if (S > 0)
        DeclarePagedKvCache(*m_, il, layout_.kv_blocks, LowerOptions::kKvBlock, p, opt_.cache_types);
      else
        DeclareKvCache(*m_, il, KvRows(il), p, opt_.cache_types, Ring(il));
      if (S == 0 && Ring(il) > 0) m_->attrs().Set("max_call_rows", opt_.max_call_rows);
    }
  }

  // The logit soft cap c tanh(z / c), as llama.cpp builds it (scale, tanh, scale); its
  // result_output is the capped value.
  Value* SoftCap(OpBuilder& b, Value* logits) {
    if (h_.softcap <= 0) return logits;
    logits->Named("result_logits");
    Value* z = b.Scale(logits, 1.0 / h_.softcap);
    return b.Scale(b.Tanh(z), h_.softcap)->Named("result_output");
  }

  // As qwen35's functions, with the embedding scaled by sqrt(E), the E-variants' per-layer inputs
  // and the soft-capped logits.
  DecoderHooks Hooks() {
    DecoderHooks h;
    h.n_layer = h_.n_layer;
    h.head = {h_.rms_eps, h_.tied_output};
    h.pos = pos_;
    h.embed = [this](OpBuilder& b, Value* tokens) {
      return b.Scale(BuildTokenEmbedding(b, *m_, tokens), std::sqrt(static_cast<double>(h_.n_embd)))
          ->Named("inp_scaled");
    };
    h.before_layers = [this](OpBuilder& b, const Dim& T, Value* tokens, Value* x) {
      per_layer_ = PerLayerInputs(b, T, tokens, x);
    };
    h.layer = [this](const LayerContext& c, Value* x, Value* pos) {
      return Layer(c, x, pos, per_layer_.empty() ? nullptr : per_layer_[c.layer]);
    };
    h.after_head = [this](OpBuilder& b, Value* logits) { return SoftCap(b, logits); };
    return h;
  }

  // E-variants: each layer's input of P values per token, from the token's row of
  // per_layer_token_embd (scaled by sqrt(P)) and a projection of the scaled embedding x0 (scaled
  // by 1/sqrt(E), rms-normed per layer), summed and scaled by 1/sqrt(2). [T, P] per layer; none
  // without per-layer inputs.
  std::vector<Value*> PerLayerInputs(OpBuilder& b, const Dim& T, Value* tokens, Value* x0) {
    const int64_t P = h_.n_embd_per_layer, L = h_.n_layer;
    if (P <= 0) return {};
    Value* tok = b.Embed(tokens, m_->weight("per_layer_token_embd.weight"));
    tok = b.Reshape(b.Scale(tok, std::sqrt(static_cast<double>(P))), Shape{T, L, P})->Named("inp_per_layer_selected");
    Value* proj = b.Scale(b.MatMul(x0, m_->weight("per_layer_model_proj.weight")),
                          1.0 / std::sqrt(static_cast<double>(h_.n_embd)));
    proj = b.RmsNorm(b.Reshape(proj, Shape{T, L, P}), m_->weight("per_layer_proj_norm.weight"), h_.rms_eps)
               ->Named("per_layer_proj");
    Value* all = b.Scale(b.Add(proj, tok), 1.0 / std::sqrt(2.0))->Named("inp_per_layer");
    std::vector<Value*> out;
    for (Value* part : b.Split(all, 1, std::vector<int64_t>(static_cast<size_t>(L), 1)))
      out.push_back(b.Reshape(part, Shape{T, P}));
    return out;
  }

  // q/k: per-head rms_norm with its weight, then rope (the full layers' with rope_freqs).
  Value* NormRope(const LayerContext& c, Value* x, Value* pos, absl::string_view norm, absl::string_view node) {
    const int64_t il = c.layer;
    Value* n = c.b.RmsNorm(x, c.W(norm), h_.rms_eps);
    Value* ff = h_.IsSwa(il) ? nullptr : c.m.weight(kRopeFreqs);
    return c.b.Rope(n, pos, h_.Rot(il), h_.RopeBase(il), ff)->Named(c.Node(node));
  }

  Value* Attention(const LayerContext& c, Value* h, Value* pos) {
    const int64_t il = c.layer, D = h_.HeadDim(il), H = h_.n_head[il], Hkv = h_.n_head_kv[il];
    OpBuilder& b = c.b;
    const Dim& T = c.T;
    Value* q = b.Reshape(b.MatMul(h, c.W("attn_q.weight"))->Named(c.Node("Qcur")), Shape{T, H, D});
    q = NormRope(c, q, pos, "attn_q_norm.weight", "Qcur_pos");
    const int64_t src = h_.KvLayer(il);
    if (OwnsKv(il)) {
      Value* kr = b.MatMul(h, c.W("attn_k.weight"))->Named(c.Node("Kcur"));
      Value* vr = Has(il, "attn_v.weight") ? b.MatMul(h, c.W("attn_v.weight"))->Named(c.Node("Vcur")) : kr;
      Value* k = NormRope(c, b.Reshape(kr, Shape{T, Hkv, D}), pos, "attn_k_norm.weight", "Kcur_pos");
      Value* v = b.RmsNorm(b.Reshape(vr, Shape{T, Hkv, D}), nullptr, h_.rms_eps)->Named(c.Node("Vcur_normed"));
      if (c.seq)
        b.PagedKvAppend(k, v, c.S("k_cache"), c.S("v_cache"), c.seq->blocks, pos, c.seq->slot);
      else
        b.KvAppend(k, v, c.S("k_cache"), c.S("v_cache"), pos, Ring(il));
    }
    const LayerContext kv{b, c.m, src, T};
    // Gemma 4 scales q by its norm weights alone: the softmax scale is 1.
    const int64_t window = h_.IsSwa(il) ? h_.n_swa : 0;
    Value* o = c.seq
                   ? b.PagedAttention(q, kv.S("k_cache"), kv.S("v_cache"), c.seq->blocks, pos, c.seq->slot, 1.0, window)
                   : b.Attention(q, kv.S("k_cache"), kv.S("v_cache"), pos, 1.0, window, Ring(src));
    o->Named(c.Node("kqv_out"));
    // 16-bit or quantized projections: their GPU products already round the activations to bf16,
    // so the attention may too (ir/Ops.def, precision: the tensor-core prefill); f32 models keep
    // f32 attention.
    if (c.W("attn_q.weight")->dtype() != DType::kF32) o->def()->attrs().Set("precision", std::string("bf16"));
    o = b.MatMul(b.Reshape(o, Shape{T, H * D}), c.W("attn_output.weight"));
    return BuildLayerRmsNorm(c, o, "post_attention_norm.weight", h_.rms_eps, "attn_post_norm");
  }

  // The dense GELU MLP: down(gelu(gate y) * up y).
  Value* GeluMlp(const LayerContext& c, Value* y) {
    OpBuilder& b = c.b;
    Value* g = b.Gelu(b.MatMul(y, c.W("ffn_gate.weight")));
    return b.MatMul(b.Mul(g, b.MatMul(y, c.W("ffn_up.weight"))), c.W("ffn_down.weight"));
  }

  // A MoE layer's FFN: the dense MLP and the routed GELU experts side by side, each with its own
  // norms, summed (llama.cpp's gemma4 MoE branch). The router reads rms_norm(r) / sqrt(E) times
  // its input scale.
  Value* MoeFfn(const LayerContext& c, Value* r) {
    OpBuilder& b = c.b;
    const double eps = h_.rms_eps;
    Value* m = GeluMlp(c, BuildLayerRmsNorm(c, r, "ffn_norm.weight", eps, "ffn_norm_1"));
    m = BuildLayerRmsNorm(c, m, "post_ffw_norm_1.weight", eps, "ffn_mlp");
    Value* xe = BuildLayerRmsNorm(c, r, "pre_ffw_norm_2.weight", eps, "ffn_norm_2");
    Value* ri = b.Scale(b.RmsNorm(r, nullptr, eps), 1.0 / std::sqrt(static_cast<double>(h_.n_embd)));
    ri = b.MulWeight(ri, c.W("ffn_gate_inp.scale"));
    Value* logits = b.MatMul(ri, c.W("ffn_gate_inp.weight"))->Named(c.Node("ffn_moe_logits"));
    auto [weights, ids] = b.MoeRoute(logits, h_.n_expert_used, c.W("ffn_down_exps.scale"));
    std::vector<Value*> gate_up;
    if (Has(c.layer, "ffn_gate_up_exps.weight"))
      gate_up = {c.W("ffn_gate_up_exps.weight")};
    else
      gate_up = {c.W("ffn_gate_exps.weight"), c.W("ffn_up_exps.weight")};
    Value* me = b.MoeExperts(xe, weights, ids, c.W("ffn_down_exps.weight"), gate_up, "gelu");
    me = BuildLayerRmsNorm(c, me, "post_ffw_norm_2.weight", eps, "ffn_moe");
    return b.Add(m, me)->Named(c.Node("ffn_moe_combined"));
  }

  Value* Layer(const LayerContext& c, Value* x, Value* pos, Value* per_layer) {
    OpBuilder& b = c.b;
    Value* h = BuildLayerRmsNorm(c, x, "attn_norm.weight", h_.rms_eps, "attn_norm");
    Value* r = b.Add(Attention(c, h, pos), x)->Named(c.Node("attn_out"));
    Value* f =
        h_.moe_layer[c.layer]
            ? MoeFfn(c, r)
            : GeluMlp(c, BuildLayerRmsNorm(c, r, "ffn_norm.weight", h_.rms_eps, "ffn_norm"))->Named(c.Node("ffn_out"));
    f = BuildLayerRmsNorm(c, f, "post_ffw_norm.weight", h_.rms_eps, "ffn_post_norm");
    x = b.Add(f, r)->Named(c.Node("pe_in"));
    if (per_layer != nullptr) {
      // The layer's per-layer input gates a GELU of x, projected back and normed into x.
      Value* g = b.Mul(b.Gelu(b.MatMul(x, c.W("inp_gate.weight"))), per_layer);
      Value* e =
          BuildLayerRmsNorm(c, b.MatMul(g, c.W("proj.weight")), "post_norm.weight", h_.rms_eps, "per_layer_embd_out");
      x = b.Add(x, e);
    }
    if (Has(c.layer, "layer_output_scale.weight"))
      x = b.MulWeight(x, c.W("layer_output_scale.weight"))->Named(c.Node("l_out"));
    return x;
  }

  const gguf::GgufFile& f_;
  const Gemma4Hparams& h_;
  const LowerOptions& opt_;
  std::unique_ptr<ir::Module> m_;
  ir::StateVar* pos_ = nullptr;
  std::vector<Value*> per_layer_;   // the E-variants' per-layer inputs of the function being built
  ir::StateVar* blocks_ = nullptr;  // the paged KV cache's block table (slots > 0)
  int64_t n_ctx_ = 0;
  PagedKvLayout layout_;  // slots > 0
};

}  // namespace

absl::StatusOr<std::unique_ptr<ir::Module>> LowerGemma4(const gguf::GgufFile& file, const LowerOptions& options) {
  MEMRA_ASSIGN_OR_RETURN(Gemma4Hparams h, ReadGemma4Hparams(file));
  Gemma4Lowering lowering(file, h, options);
  return lowering.Run();
}

}  // namespace memra::frontends

#include "frontends/qwen35/Qwen35Lowering.h"

#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/common/AttentionBlock.h"
#include "frontends/common/DecoderFunctions.h"
#include "frontends/common/DeltaNetBlock.h"
#include "frontends/common/Embedding.h"
#include "frontends/common/LayerContext.h"
#include "frontends/common/ModelWeights.h"
#include "frontends/common/Norm.h"
#include "frontends/common/OutputHead.h"
#include "frontends/common/StepLayout.h"
#include "frontends/common/SwigluFfn.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/qwen35/Qwen35Trunk.h"
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

// qwen35's FFN: the dense SwiGLU.
class DenseFfn : public Qwen35Ffn {
 public:
  explicit DenseFfn(int64_t n_ff) : n_ff_(n_ff) {}
  absl::Status CheckTensor(const gguf::GgufFile& f, const gguf::TensorInfo& t) const override {
    if (absl::StrContains(t.name, "_exps.") || absl::StrContains(t.name, "ffn_gate_inp"))
      return absl::InvalidArgumentError(
          absl::StrCat(f.path(), ": tensor \"", t.name, "\" is a MoE tensor in a dense qwen35 model"));
    return absl::OkStatus();
  }
  absl::Status Declare(const gguf::GgufFile& f, ir::Module& m, int64_t layer, int64_t n_embd) const override {
    return DeclareSwigluFfn(f, m, layer, n_embd, n_ff_);
  }
  Value* Build(const LayerContext& c, Value* y) const override { return BuildSwigluFfn(c, y); }
  void RecordAttributes(ir::AttrDict&) const override {}

 private:
  int64_t n_ff_;
};

class Qwen35Lowering {
 public:
  Qwen35Lowering(const gguf::GgufFile& f, const Qwen35Hparams& h, const LowerOptions& o, const Qwen35Ffn& ffn)
      : f_(f), h_(h), opt_(o), ffn_(ffn) {
    attn_.n_head = h.n_head;
    attn_.n_head_kv = h.n_head_kv;
    attn_.head_dim = h.head_dim;
    attn_.n_rot = h.n_rot;
    attn_.rope_base = h.rope_base;
    attn_.norm_eps = h.rms_eps;
    attn_.scale = 1.0 / std::sqrt(static_cast<double>(h.head_dim));
    attn_.gate = AttentionParams::Gate::kInterleavedQ;
    attn_.qk_norm = true;
    gdn_.n_k_heads = h.n_k_heads;
    gdn_.n_v_heads = h.n_v_heads;
    gdn_.d_state = h.d_state;
    gdn_.d_conv = h.d_conv;
    gdn_.eps = h.rms_eps;
  }

  absl::StatusOr<std::unique_ptr<ir::Module>> Run() {
    m_ = std::make_unique<ir::Module>();
    n_ctx_ = ContextLength(opt_, h_.n_ctx_train);
    if (n_ctx_ <= 0) return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": context length must be > 0"));
    MEMRA_ASSIGN_OR_RETURN(layout_, CheckSlotOptions(opt_, n_ctx_));
    MEMRA_RETURN_IF_ERROR(CheckKvCacheTypes(opt_.cache_types, {h_.head_dim}));
    MEMRA_RETURN_IF_ERROR(RejectUnsupportedTensors());
    MEMRA_RETURN_IF_ERROR(DeclareWeights());
    DeclareState();
    RecordAttributes();
    MEMRA_RETURN_IF_ERROR(BuildDecoderFunctions(*m_, Hooks(), opt_, blocks_, f_));
    return std::move(m_);
  }

 private:
  // Tensors llama.cpp would apply that memra cannot yet: refuse rather than compute wrong logits.
  absl::Status RejectUnsupportedTensors() {
    for (const gguf::TensorInfo& t : f_.tensors()) {
      if (absl::EndsWith(t.name, ".scale") || absl::EndsWith(t.name, ".input_scale"))
        return absl::UnimplementedError(
            absl::StrCat(f_.path(), ": tensor \"", t.name, "\": per-tensor weight scales are not supported yet"));
      MEMRA_RETURN_IF_ERROR(ffn_.CheckTensor(f_, t));
    }
    return absl::OkStatus();
  }

  absl::Status DeclareWeights() {
    const int64_t E = h_.n_embd;
    MEMRA_RETURN_IF_ERROR(DeclareTokenEmbedding(f_, *m_, E, h_.n_vocab));
    MEMRA_RETURN_IF_ERROR(DeclareOutputHead(f_, *m_, E, h_.n_vocab, h_.tied_output));
    for (int64_t il = 0; il < h_.n_layer; ++il) {
      MEMRA_RETURN_IF_ERROR(DeclareWeight(f_, *m_, LayerTensorName(il, "attn_norm.weight"), {E}));
      MEMRA_RETURN_IF_ERROR(DeclareWeight(f_, *m_, LayerTensorName(il, "post_attention_norm.weight"), {E}));
      MEMRA_RETURN_IF_ERROR(ffn_.Declare(f_, *m_, il, E));
      if (h_.IsRecurrent(il))
        MEMRA_RETURN_IF_ERROR(DeclareDeltaNetWeights(f_, *m_, il, E, gdn_));
      else
        MEMRA_RETURN_IF_ERROR(DeclareAttentionWeights(f_, *m_, il, E, attn_));
    }
    return absl::OkStatus();
  }

  void DeclareState() {
    const int64_t S = opt_.slots;
    pos_ = m_->AddState(StateKind::kPosition, "pos", TensorType(DType::kI32, S > 0 ? Shape{S} : Shape{}));
    if (S > 0)
      blocks_ = m_->AddState(StateKind::kBlocks, "kv_blocks", TensorType(DType::kI32, Shape{S, layout_.max_blocks}));
    for (int64_t il = 0; il < h_.n_layer; ++il) {
      if (h_.IsRecurrent(il))
        DeclareDeltaNetState(*m_, il, gdn_, S);
      else if (S > 0)
        DeclarePagedKvCache(*m_, il, layout_.kv_blocks, LowerOptions::kKvBlock, attn_, opt_.cache_types);
      else
        DeclareKvCache(*m_, il, n_ctx_, attn_, opt_.cache_types);
    }
  }

  void RecordAttributes() {
    ir::AttrDict& a = m_->attrs();
    for (const auto& [name, value] : Qwen35Attributes(h_)) a.Set(name, value);
    ffn_.RecordAttributes(a);
    a.Set("n_ctx", n_ctx_);
    a.Set("prefill_logits", opt_.prefill_all_logits ? "all" : "last");
    RecordSlotAttributes(a, opt_, layout_);
  }

  DecoderHooks Hooks() {
    DecoderHooks h;
    h.n_layer = h_.n_layer;
    h.head = {h_.rms_eps, h_.tied_output};
    h.pos = pos_;
    h.layer = [this](const LayerContext& c, Value* x, Value* pos) { return Layer(c, x, pos); };
    return h;
  }

  // Pre-norm residual layer: mixer (Gated DeltaNet or gated attention), then the family's FFN.
  Value* Layer(const LayerContext& c, Value* x, Value* pos) {
    Value* h = BuildLayerRmsNorm(c, x, "attn_norm.weight", h_.rms_eps, "attn_norm");
    Value* mix = h_.IsRecurrent(c.layer) ? BuildGatedDeltaNet(c, h, gdn_) : BuildAttention(c, h, pos, attn_);
    Value* r = c.b.Add(mix, x)->Named(c.Node("attn_residual"));
    Value* y = BuildLayerRmsNorm(c, r, "post_attention_norm.weight", h_.rms_eps, "attn_post_norm");
    Value* f = ffn_.Build(c, y);
    return c.b.Add(f, r)->Named(c.Node("l_out"));
  }

  const gguf::GgufFile& f_;
  const Qwen35Hparams& h_;
  const LowerOptions& opt_;
  const Qwen35Ffn& ffn_;
  AttentionParams attn_;
  DeltaNetParams gdn_;
  std::unique_ptr<ir::Module> m_;
  ir::StateVar* pos_ = nullptr;
  ir::StateVar* blocks_ = nullptr;  // the paged KV cache's block table (slots > 0)
  int64_t n_ctx_ = 0;
  PagedKvLayout layout_;  // slots > 0
};

}  // namespace

absl::StatusOr<std::unique_ptr<ir::Module>> LowerQwen35Trunk(const gguf::GgufFile& file, const Qwen35Hparams& h,
                                                             const LowerOptions& options, const Qwen35Ffn& ffn) {
  Qwen35Lowering lowering(file, h, options, ffn);
  return lowering.Run();
}

absl::StatusOr<std::unique_ptr<ir::Module>> LowerQwen35(const gguf::GgufFile& file, const LowerOptions& options) {
  MEMRA_ASSIGN_OR_RETURN(Qwen35Hparams h, ReadQwen35Hparams(file));
  return LowerQwen35Trunk(file, h, options, DenseFfn(h.n_ff));
}

}  // namespace memra::frontends

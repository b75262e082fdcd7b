#include "frontends/step35/Step35Hparams.h"

#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "frontends/common/Embedding.h"
#include "frontends/common/KeyReader.h"
#include "frontends/common/ModelWeights.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

namespace {

// An f32 "value or per-layer array" key (llama.cpp's get_key_or_arr): absent -> `def` everywhere; an
// array needs at least n_layer entries (the first n_layer are taken). Every value finite and >= 0.
absl::StatusOr<std::vector<double>> PerLayerF32(const gguf::GgufFile& f, const KeyReader& r, absl::string_view k,
                                                int64_t n_layer, double def) {
  const std::string key = r.Key(k);
  const gguf::Value* v = f.Find(key);
  std::vector<double> out(static_cast<size_t>(n_layer), def);
  if (v == nullptr) return out;
  if (v->type == gguf::ValueType::kArray) {
    MEMRA_ASSIGN_OR_RETURN(std::vector<float> a, f.GetF32Array(key));
    if (static_cast<int64_t>(a.size()) != r.ArrayLength(n_layer))
      return Inconsistent(
          f, absl::StrCat(key, " has ", a.size(), " entries, expected one per layer (", r.ArrayLength(n_layer), ")"));
    for (int64_t il = 0; il < n_layer; ++il) out[il] = a[il];
  } else {
    MEMRA_ASSIGN_OR_RETURN(float one, f.GetF32(key));
    out.assign(static_cast<size_t>(n_layer), one);
  }
  for (int64_t il = 0; il < n_layer; ++il)
    if (!(out[il] >= 0) || !std::isfinite(out[il]))
      return Inconsistent(f, absl::StrCat(key, "[", il, "] = ", out[il], " must be finite and >= 0"));
  return out;
}

bool HasTensor(const gguf::GgufFile& f, int64_t il, absl::string_view name) {
  return f.FindTensor(absl::StrCat("blk.", il, ".", name)) != nullptr;
}

}  // namespace

absl::StatusOr<Step35Hparams> ReadStep35Hparams(const gguf::GgufFile& f) {
  MEMRA_ASSIGN_OR_RETURN(std::string arch, f.Architecture());
  if (arch != "step35")
    return absl::InvalidArgumentError(absl::StrCat(f.path(), ": architecture \"", arch, "\" is not step35"));
  Step35Hparams h;
  KeyReader r(f, arch);
  MEMRA_ASSIGN_OR_RETURN(h.n_ctx_train, r.Required("context_length"));
  MEMRA_ASSIGN_OR_RETURN(h.n_embd, r.Required("embedding_length"));
  MEMRA_ASSIGN_OR_RETURN(const int64_t n_blocks, r.Required("block_count"));
  if (h.n_embd <= 0) return Inconsistent(f, absl::StrCat(r.Key("embedding_length"), " = 0"));
  if (n_blocks <= 0) return Inconsistent(f, absl::StrCat(r.Key("block_count"), " = ", n_blocks));
  MEMRA_ASSIGN_OR_RETURN(h.n_layer_nextn, r.Optional("nextn_predict_layers", 0));
  if (h.n_layer_nextn < 0 || h.n_layer_nextn >= n_blocks)
    return Inconsistent(f, absl::StrCat(r.Key("nextn_predict_layers"), " (", h.n_layer_nextn, ") must be in [0, ",
                                        r.Key("block_count"), " (", n_blocks, "))"));
  h.n_layer = n_blocks - h.n_layer_nextn;
  MEMRA_RETURN_IF_ERROR(CheckLayerTensors(f, n_blocks, h.n_layer_nextn, r.Key("block_count")));
  r.set_block_count(n_blocks);
  MEMRA_ASSIGN_OR_RETURN(h.n_ff, r.PerLayer("feed_forward_length", h.n_layer, 0));
  MEMRA_ASSIGN_OR_RETURN(h.n_head, r.PerLayer("attention.head_count", h.n_layer, std::nullopt));
  if (f.Has(r.Key("attention.head_count_kv"))) {
    MEMRA_ASSIGN_OR_RETURN(h.n_head_kv, r.PerLayer("attention.head_count_kv", h.n_layer, std::nullopt));
  } else {
    h.n_head_kv = h.n_head;  // llama.cpp's default
  }
  for (int64_t il = 0; il < h.n_layer; ++il) {
    if (h.n_head[il] <= 0)
      return Inconsistent(f, absl::StrCat(r.Key("attention.head_count"), "[", il, "] = ", h.n_head[il]));
    if (h.n_head_kv[il] <= 0 || h.n_head[il] % h.n_head_kv[il] != 0)
      return Inconsistent(
          f, absl::StrCat("layer ", il, ": ", r.Key("attention.head_count"), " (", h.n_head[il],
                          ") must be a multiple of ", r.Key("attention.head_count_kv"), " (", h.n_head_kv[il], ")"));
  }
  MEMRA_ASSIGN_OR_RETURN(const int64_t k_len, r.Required("attention.key_length"));
  MEMRA_ASSIGN_OR_RETURN(const int64_t v_len, r.Required("attention.value_length"));
  if (k_len != v_len || k_len <= 0)
    return Inconsistent(f, absl::StrCat(r.Key("attention.key_length"), " (", k_len, ") and ",
                                        r.Key("attention.value_length"), " (", v_len, ") must be equal and > 0"));
  h.head_dim = k_len;
  MEMRA_ASSIGN_OR_RETURN(h.n_rot, r.Optional("rope.dimension_count", h.head_dim));
  MEMRA_ASSIGN_OR_RETURN(h.n_rot_swa, r.Optional("rope.dimension_count_swa", h.n_rot));
  // Full layers rotate half of rope.dimension_count in NEOX pairs: a multiple of 4.
  if (h.n_rot <= 0 || h.n_rot % 4 != 0 || h.n_rot > h.head_dim)
    return Inconsistent(f, absl::StrCat(r.Key("rope.dimension_count"), " (", h.n_rot,
                                        ") must be a multiple of 4 (full layers rotate half of it), > 0 and <= the "
                                        "head dim (",
                                        h.head_dim, ")"));
  if (h.n_rot_swa <= 0 || h.n_rot_swa % 2 != 0 || h.n_rot_swa > h.head_dim)
    return Inconsistent(f, absl::StrCat(r.Key("rope.dimension_count_swa"), " (", h.n_rot_swa,
                                        ") must be even, > 0 and <= the head dim (", h.head_dim, ")"));
  MEMRA_ASSIGN_OR_RETURN(h.rope_base, r.PositiveF32("rope.freq_base", 10000.0f));
  MEMRA_ASSIGN_OR_RETURN(h.rope_base_swa, r.PositiveF32("rope.freq_base_swa", static_cast<float>(h.rope_base)));
  MEMRA_RETURN_IF_ERROR(r.RejectRopeScaling());
  MEMRA_ASSIGN_OR_RETURN(h.rms_eps, r.PositiveF32("attention.layer_norm_rms_epsilon", std::nullopt));
  MEMRA_ASSIGN_OR_RETURN(h.n_swa, r.Required("attention.sliding_window"));
  if (h.n_swa <= 0) return Inconsistent(f, absl::StrCat(r.Key("attention.sliding_window"), " must be > 0"));
  MEMRA_ASSIGN_OR_RETURN(h.swa, r.LayerFlags("attention.sliding_window_pattern", h.n_layer));

  MEMRA_ASSIGN_OR_RETURN(VocabAndHead vh, ReadVocabAndHead(f, h.n_embd, r.Key("embedding_length")));
  h.n_vocab = vh.n_vocab;
  h.tied_output = vh.tied_output;

  // Dense or MoE per layer by tensor presence (llama.cpp's converter writes
  // leading_dense_block_count and moe_every_n_layers; the loader does not read them).
  bool any_moe = false;
  for (int64_t il = 0; il < h.n_layer; ++il) {
    const bool moe = HasTensor(f, il, "ffn_gate_inp.weight");
    h.moe_layer.push_back(moe);
    h.gated_layer.push_back(HasTensor(f, il, "attn_gate.weight"));
    any_moe |= moe;
    if (moe) {
      // Step 3.5 adds a shared expert on every MoE layer (llama.cpp builds it unconditionally).
      for (const char* t : {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
                            "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"})
        if (!HasTensor(f, il, t))
          return Inconsistent(f, absl::StrCat("layer ", il, " has ffn_gate_inp (a MoE layer) but no blk.", il, ".", t));
    } else if (!HasTensor(f, il, "ffn_gate.weight") || !HasTensor(f, il, "ffn_up.weight") ||
               !HasTensor(f, il, "ffn_down.weight")) {
      return Inconsistent(f, absl::StrCat("layer ", il,
                                          " has neither ffn_gate_inp (a MoE layer) nor ffn_gate / ffn_up / ffn_down "
                                          "(a dense one)"));
    } else if (h.n_ff[il] <= 0) {
      return Inconsistent(f, absl::StrCat(r.Key("feed_forward_length"), " is 0 at dense layer ", il));
    }
  }
  MEMRA_ASSIGN_OR_RETURN(h.n_ff_exp, r.Required("expert_feed_forward_length"));  // required, as llama.cpp
  MEMRA_ASSIGN_OR_RETURN(h.n_ff_shexp, r.Optional("expert_shared_feed_forward_length", 0));
  if (any_moe) {
    MEMRA_ASSIGN_OR_RETURN(h.n_expert, r.Required("expert_count"));
    MEMRA_ASSIGN_OR_RETURN(h.n_expert_used, r.Required("expert_used_count"));
    if (h.n_expert <= 0 || h.n_expert_used <= 0 || h.n_expert_used > h.n_expert || h.n_ff_exp <= 0)
      return Inconsistent(
          f, absl::StrCat(r.Key("expert_used_count"), " (", h.n_expert_used, ") must be in [1, ", r.Key("expert_count"),
                          " (", h.n_expert, ")] and ", r.Key("expert_feed_forward_length"), " (", h.n_ff_exp, ") > 0"));
    if (h.n_ff_shexp <= 0)
      return Inconsistent(f, absl::StrCat(r.Key("expert_shared_feed_forward_length"),
                                          " must be > 0: every MoE layer has a shared expert"));
  }
  MEMRA_ASSIGN_OR_RETURN(h.gating, r.Optional("expert_gating_func", 2));
  if (h.gating == 0) h.gating = 2;  // llama.cpp: none -> Step's sigmoid
  if (h.gating != 1 && h.gating != 2)
    return absl::UnimplementedError(absl::StrCat(f.path(), ": key \"", r.Key("expert_gating_func"), "\" = ", h.gating,
                                                 ": memra routes by softmax (1) or sigmoid (2)"));
  MEMRA_ASSIGN_OR_RETURN(float scale, f.GetF32Or(r.Key("expert_weights_scale"), 0.0f));
  if (!(scale >= 0) || !std::isfinite(scale))
    return Inconsistent(f, absl::StrCat(r.Key("expert_weights_scale"), " = ", scale, " must be finite and >= 0"));
  h.expert_weights_scale = scale;
  MEMRA_ASSIGN_OR_RETURN(h.expert_weights_norm, f.GetBoolOr(r.Key("expert_weights_norm"), false));
  MEMRA_ASSIGN_OR_RETURN(h.clamp_exp, PerLayerF32(f, r, "swiglu_clamp_exp", h.n_layer, 0.0));
  MEMRA_ASSIGN_OR_RETURN(h.clamp_shexp, PerLayerF32(f, r, "swiglu_clamp_shexp", h.n_layer, 0.0));
  // swiglu_clamp_exp clamps routed experts: on a layer without them it is an inconsistent file.
  // swiglu_clamp_shexp is what llama.cpp's build_ffn clamps with on every layer: the shared expert
  // of a MoE layer, the dense FFN of a dense one.
  for (int64_t il = 0; il < h.n_layer; ++il)
    if (h.clamp_exp[il] > 0 && !h.moe_layer[il])
      return Inconsistent(f, absl::StrCat(r.Key("swiglu_clamp_exp"), "[", il, "] = ", h.clamp_exp[il],
                                          " clamps routed experts, but layer ", il, " has no ffn_gate_inp"));
  return h;
}

ir::AttrDict Step35Attributes(const Step35Hparams& h) {
  ir::AttrDict a;
  a.Set("arch", std::string("step35"));
  a.Set("n_ctx_train", h.n_ctx_train);
  a.Set("n_embd", h.n_embd);
  a.Set("n_layer", h.n_layer);
  a.Set("n_layer_nextn", h.n_layer_nextn);
  a.Set("n_ff", h.n_ff);
  a.Set("n_head", h.n_head);
  a.Set("n_head_kv", h.n_head_kv);
  a.Set("head_dim", h.head_dim);
  a.Set("n_rot", h.n_rot);
  a.Set("n_rot_swa", h.n_rot_swa);
  a.Set("rope_base", h.rope_base);
  a.Set("rope_base_swa", h.rope_base_swa);
  a.Set("rms_eps", h.rms_eps);
  a.Set("n_swa", h.n_swa);
  std::vector<int64_t> swa, moe, gated;
  for (int64_t il = 0; il < h.n_layer; ++il) {
    swa.push_back(h.swa[il] ? 1 : 0);
    moe.push_back(h.moe_layer[il] ? 1 : 0);
    gated.push_back(h.gated_layer[il] ? 1 : 0);
  }
  a.Set("swa_layers", swa);
  a.Set("moe_layers", moe);
  a.Set("gated_layers", gated);
  a.Set("n_vocab", h.n_vocab);
  a.Set("tied_output", static_cast<int64_t>(h.tied_output));
  a.Set("n_expert", h.n_expert);
  a.Set("n_expert_used", h.n_expert_used);
  a.Set("n_ff_exp", h.n_ff_exp);
  a.Set("n_ff_shexp", h.n_ff_shexp);
  a.Set("expert_gating", std::string(h.gating == 1 ? "softmax" : "sigmoid"));
  a.Set("expert_weights_scale", h.expert_weights_scale);
  a.Set("expert_weights_norm", static_cast<int64_t>(h.expert_weights_norm));
  a.Set("swiglu_clamp_exp", h.clamp_exp);
  a.Set("swiglu_clamp_shexp", h.clamp_shexp);
  return a;
}

absl::StatusOr<ir::AttrDict> ReadStep35Attributes(const gguf::GgufFile& file) {
  MEMRA_ASSIGN_OR_RETURN(Step35Hparams h, ReadStep35Hparams(file));
  return Step35Attributes(h);
}

}  // namespace memra::frontends

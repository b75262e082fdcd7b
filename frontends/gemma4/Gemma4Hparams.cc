#include "frontends/gemma4/Gemma4Hparams.h"

#include <cmath>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "frontends/common/Embedding.h"
#include "frontends/common/KeyReader.h"
#include "frontends/common/ModelWeights.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

namespace {

// key_length == value_length, > 0 (llama.cpp throws otherwise).
absl::StatusOr<int64_t> HeadDim(const gguf::GgufFile& f, const KeyReader& r, absl::string_view key_k,
                                absl::string_view val_k) {
  MEMRA_ASSIGN_OR_RETURN(int64_t k, r.Required(key_k));
  MEMRA_ASSIGN_OR_RETURN(int64_t v, r.Required(val_k));
  if (k != v || k <= 0)
    return Inconsistent(
        f, absl::StrCat(r.Key(key_k), " (", k, ") and ", r.Key(val_k), " (", v, ") must be equal and > 0"));
  return k;
}

}  // namespace

absl::StatusOr<Gemma4Hparams> ReadGemma4Hparams(const gguf::GgufFile& f) {
  MEMRA_ASSIGN_OR_RETURN(std::string arch, f.Architecture());
  if (arch != "gemma4")
    return absl::InvalidArgumentError(absl::StrCat(f.path(), ": architecture \"", arch, "\" is not gemma4"));
  Gemma4Hparams h;
  KeyReader r(f, arch);
  MEMRA_ASSIGN_OR_RETURN(h.n_ctx_train, r.Required("context_length"));
  MEMRA_ASSIGN_OR_RETURN(h.n_embd, r.Required("embedding_length"));
  MEMRA_ASSIGN_OR_RETURN(h.n_layer, r.Required("block_count"));
  if (h.n_embd <= 0) return Inconsistent(f, absl::StrCat(r.Key("embedding_length"), " = 0"));
  if (h.n_layer <= 0) return Inconsistent(f, absl::StrCat(r.Key("block_count"), " = 0"));
  MEMRA_RETURN_IF_ERROR(CheckLayerTensors(f, h.n_layer, 0, r.Key("block_count")));
  r.set_block_count(h.n_layer);
  MEMRA_ASSIGN_OR_RETURN(h.n_ff, r.PerLayer("feed_forward_length", h.n_layer, std::nullopt));
  MEMRA_ASSIGN_OR_RETURN(h.n_head, r.PerLayer("attention.head_count", h.n_layer, std::nullopt));
  if (f.Has(r.Key("attention.head_count_kv"))) {
    MEMRA_ASSIGN_OR_RETURN(h.n_head_kv, r.PerLayer("attention.head_count_kv", h.n_layer, std::nullopt));
  } else {
    h.n_head_kv = h.n_head;  // llama.cpp's default
  }
  for (int64_t il = 0; il < h.n_layer; ++il) {
    if (h.n_head[il] <= 0)
      return Inconsistent(f, absl::StrCat(r.Key("attention.head_count"), " = ", h.n_head[il], " at layer ", il));
    if (h.n_head_kv[il] <= 0 || h.n_head[il] % h.n_head_kv[il] != 0)
      return Inconsistent(
          f, absl::StrCat("layer ", il, ": ", r.Key("attention.head_count"), " (", h.n_head[il],
                          ") must be a multiple of ", r.Key("attention.head_count_kv"), " (", h.n_head_kv[il], ")"));
  }
  MEMRA_ASSIGN_OR_RETURN(h.head_dim, HeadDim(f, r, "attention.key_length", "attention.value_length"));
  MEMRA_ASSIGN_OR_RETURN(h.head_dim_swa, HeadDim(f, r, "attention.key_length_swa", "attention.value_length_swa"));
  MEMRA_ASSIGN_OR_RETURN(h.n_rot, r.Optional("rope.dimension_count", h.head_dim));
  MEMRA_ASSIGN_OR_RETURN(h.n_rot_swa, r.Optional("rope.dimension_count_swa", h.n_rot));
  for (auto [k, rot, d] : {std::tuple<const char*, int64_t, int64_t>{"rope.dimension_count", h.n_rot, h.head_dim},
                           {"rope.dimension_count_swa", h.n_rot_swa, h.head_dim_swa}})
    if (rot <= 0 || rot % 2 != 0 || rot > d)
      return Inconsistent(f, absl::StrCat(r.Key(k), " (", rot, ") must be even, > 0 and <= the head dim (", d, ")"));
  MEMRA_ASSIGN_OR_RETURN(h.rope_base, r.PositiveF32("rope.freq_base", 10000.0f));
  MEMRA_ASSIGN_OR_RETURN(h.rope_base_swa, r.PositiveF32("rope.freq_base_swa", static_cast<float>(h.rope_base)));
  MEMRA_RETURN_IF_ERROR(r.RejectRopeScaling());
  MEMRA_ASSIGN_OR_RETURN(h.rms_eps, r.PositiveF32("attention.layer_norm_rms_epsilon", std::nullopt));
  MEMRA_ASSIGN_OR_RETURN(h.n_swa, r.Required("attention.sliding_window"));
  if (h.n_swa <= 0) return Inconsistent(f, absl::StrCat(r.Key("attention.sliding_window"), " must be > 0"));
  MEMRA_ASSIGN_OR_RETURN(h.swa, r.LayerFlags("attention.sliding_window_pattern", h.n_layer));
  MEMRA_ASSIGN_OR_RETURN(h.shared_kv_layers, r.Optional("attention.shared_kv_layers", 0));
  if (h.shared_kv_layers < 0 || h.shared_kv_layers >= h.n_layer)
    return Inconsistent(f, absl::StrCat(r.Key("attention.shared_kv_layers"), " (", h.shared_kv_layers,
                                        ") must be in [0, ", r.Key("block_count"), ")"));
  if (h.shared_kv_layers > 0) {
    // Each shared layer reads the last KV layer of its kind before the shared ones.
    for (int64_t il = h.FirstSharedLayer(); il < h.n_layer; ++il) {
      const int64_t src = h.KvLayer(il);
      if (src < 0)
        return Inconsistent(
            f, absl::StrCat(r.Key("attention.shared_kv_layers"), " (", h.shared_kv_layers, "): layer ", il,
                            " shares a KV cache, but no layer of its kind (",
                            h.swa[il] ? "sliding window" : "full attention", ") comes before the shared layers"));
      if (h.swa[src] != h.swa[il] || h.n_head_kv[src] != h.n_head_kv[il])
        return Inconsistent(f, absl::StrCat(r.Key("attention.shared_kv_layers"), " (", h.shared_kv_layers, "): layer ",
                                            il, " shares the KV cache of layer ", src,
                                            ", which is not a layer of the same kind (sliding window and KV heads)"));
    }
  }
  MEMRA_ASSIGN_OR_RETURN(h.n_embd_per_layer, r.Optional("embedding_length_per_layer_input", 0));
  // The E-variants' per-layer inputs are read only when the key is set; their tensors without it
  // would be ignored and the model run wrong (llama.cpp requires the key).
  if (h.n_embd_per_layer == 0)
    for (const char* t : {"per_layer_token_embd.weight", "per_layer_model_proj.weight", "blk.0.inp_gate.weight"})
      if (f.FindTensor(t) != nullptr)
        return Inconsistent(f, absl::StrCat("tensor \"", t, "\" holds per-layer inputs, but ",
                                            r.Key("embedding_length_per_layer_input"), " is ",
                                            f.Has(r.Key("embedding_length_per_layer_input")) ? "0" : "missing"));
  MEMRA_ASSIGN_OR_RETURN(float softcap, f.GetF32Or(r.Key("final_logit_softcapping"), 0.0f));
  if (softcap < 0 || !std::isfinite(softcap))
    return Inconsistent(f, absl::StrCat(r.Key("final_logit_softcapping"), " = ", softcap, " must be >= 0"));
  h.softcap = softcap;

  MEMRA_ASSIGN_OR_RETURN(VocabAndHead vh, ReadVocabAndHead(f, h.n_embd, r.Key("embedding_length")));
  h.n_vocab = vh.n_vocab;
  h.tied_output = vh.tied_output;
  h.moe_layer.assign(static_cast<size_t>(h.n_layer), false);
  for (int64_t il = 0; il < h.n_layer; ++il) {
    h.moe_layer[il] = f.FindTensor(absl::StrCat("blk.", il, ".ffn_gate_inp.weight")) != nullptr;
    h.moe = h.moe || h.moe_layer[il];
  }
  if (h.moe) {
    MEMRA_ASSIGN_OR_RETURN(h.n_expert, r.Required("expert_count"));
    MEMRA_ASSIGN_OR_RETURN(h.n_expert_used, r.Required("expert_used_count"));
    MEMRA_ASSIGN_OR_RETURN(h.n_ff_exp, r.Required("expert_feed_forward_length"));
    if (h.n_expert <= 0 || h.n_expert_used <= 0 || h.n_expert_used > h.n_expert || h.n_ff_exp <= 0)
      return Inconsistent(
          f, absl::StrCat(r.Key("expert_used_count"), " (", h.n_expert_used, ") must be in [1, ", r.Key("expert_count"),
                          " (", h.n_expert, ")] and ", r.Key("expert_feed_forward_length"), " (", h.n_ff_exp, ") > 0"));
  }
  return h;
}

ir::AttrDict Gemma4Attributes(const Gemma4Hparams& h) {
  ir::AttrDict a;
  a.Set("arch", std::string("gemma4"));
  a.Set("n_ctx_train", h.n_ctx_train);
  a.Set("n_embd", h.n_embd);
  a.Set("n_layer", h.n_layer);
  a.Set("n_ff", h.n_ff);
  a.Set("n_head", h.n_head);
  a.Set("n_head_kv", h.n_head_kv);
  a.Set("head_dim", h.head_dim);
  a.Set("head_dim_swa", h.head_dim_swa);
  a.Set("n_rot", h.n_rot);
  a.Set("n_rot_swa", h.n_rot_swa);
  a.Set("rope_base", h.rope_base);
  a.Set("rope_base_swa", h.rope_base_swa);
  a.Set("rms_eps", h.rms_eps);
  a.Set("n_swa", h.n_swa);
  std::vector<int64_t> swa;
  for (bool s : h.swa) swa.push_back(s ? 1 : 0);
  a.Set("swa_layers", swa);
  a.Set("shared_kv_layers", h.shared_kv_layers);
  a.Set("n_embd_per_layer", h.n_embd_per_layer);
  a.Set("final_logit_softcap", h.softcap);
  a.Set("n_vocab", h.n_vocab);
  a.Set("tied_output", static_cast<int64_t>(h.tied_output));
  a.Set("moe", static_cast<int64_t>(h.moe));
  if (h.moe) {
    std::vector<int64_t> moe_layers;
    for (bool m : h.moe_layer) moe_layers.push_back(m ? 1 : 0);
    a.Set("moe_layers", moe_layers);
    a.Set("n_expert", h.n_expert);
    a.Set("n_expert_used", h.n_expert_used);
    a.Set("n_ff_exp", h.n_ff_exp);
  }
  return a;
}

absl::StatusOr<ir::AttrDict> ReadGemma4Attributes(const gguf::GgufFile& file) {
  MEMRA_ASSIGN_OR_RETURN(Gemma4Hparams h, ReadGemma4Hparams(file));
  return Gemma4Attributes(h);
}

}  // namespace memra::frontends

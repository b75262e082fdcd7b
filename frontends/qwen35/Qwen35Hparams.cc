#include "frontends/qwen35/Qwen35Hparams.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontends/common/Embedding.h"
#include "frontends/common/KeyReader.h"
#include "frontends/common/ModelWeights.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

absl::StatusOr<Qwen35Hparams> ReadQwen35Hparams(const gguf::GgufFile& f) { return ReadQwen35TrunkHparams(f, "qwen35"); }

absl::StatusOr<Qwen35Hparams> ReadQwen35TrunkHparams(const gguf::GgufFile& f, absl::string_view expected_arch) {
  MEMRA_ASSIGN_OR_RETURN(std::string arch, f.Architecture());
  if (arch != expected_arch)
    return absl::InvalidArgumentError(absl::StrCat(f.path(), ": architecture \"", arch, "\" is not ", expected_arch));
  Qwen35Hparams h;
  h.arch = arch;
  KeyReader r(f, arch);
  MEMRA_ASSIGN_OR_RETURN(h.n_ctx_train, r.Required("context_length"));
  MEMRA_ASSIGN_OR_RETURN(h.n_embd, r.Required("embedding_length"));
  MEMRA_ASSIGN_OR_RETURN(h.n_layer_all, r.Required("block_count"));
  MEMRA_ASSIGN_OR_RETURN(h.n_nextn, r.Optional("nextn_predict_layers", 0));
  if (h.n_layer_all <= 0) return Inconsistent(f, absl::StrCat(r.Key("block_count"), " = 0"));
  if (h.n_nextn >= h.n_layer_all)
    return Inconsistent(f, absl::StrCat(r.Key("nextn_predict_layers"), " (", h.n_nextn, ") must be < ",
                                        r.Key("block_count"), " (", h.n_layer_all, ")"));
  h.n_layer = h.n_layer_all - h.n_nextn;
  MEMRA_RETURN_IF_ERROR(CheckLayerTensors(f, h.n_layer_all, h.n_nextn, r.Key("block_count")));
  r.set_block_count(h.n_layer_all);
  MEMRA_ASSIGN_OR_RETURN(h.n_ff, r.UniformPerLayer("feed_forward_length", h.n_layer, std::nullopt));
  MEMRA_ASSIGN_OR_RETURN(h.n_head, r.UniformPerLayer("attention.head_count", h.n_layer, std::nullopt));
  MEMRA_ASSIGN_OR_RETURN(h.n_head_kv, r.UniformPerLayer("attention.head_count_kv", h.n_layer, h.n_head));
  if (h.n_embd <= 0) return Inconsistent(f, absl::StrCat(r.Key("embedding_length"), " = 0"));
  if (h.n_head <= 0) return Inconsistent(f, absl::StrCat(r.Key("attention.head_count"), " = 0"));
  if (h.n_head_kv <= 0 || h.n_head % h.n_head_kv != 0)
    return Inconsistent(f, absl::StrCat(r.Key("attention.head_count"), " (", h.n_head, ") must be a multiple of ",
                                        r.Key("attention.head_count_kv"), " (", h.n_head_kv, ")"));
  MEMRA_ASSIGN_OR_RETURN(int64_t key_len, r.Optional("attention.key_length", h.n_embd / h.n_head));
  MEMRA_ASSIGN_OR_RETURN(int64_t val_len, r.Optional("attention.value_length", h.n_embd / h.n_head));
  if (key_len != val_len || key_len <= 0)
    return Inconsistent(f, absl::StrCat(r.Key("attention.key_length"), " (", key_len, ") and ",
                                        r.Key("attention.value_length"), " (", val_len, ") must be equal and > 0"));
  h.head_dim = key_len;
  MEMRA_ASSIGN_OR_RETURN(h.n_rot, r.Optional("rope.dimension_count", h.head_dim));
  if (h.n_rot <= 0 || h.n_rot % 2 != 0 || h.n_rot > h.head_dim)
    return Inconsistent(f, absl::StrCat(r.Key("rope.dimension_count"), " (", h.n_rot,
                                        ") must be even, > 0 and <= the head dim (", h.head_dim, ")"));
  MEMRA_ASSIGN_OR_RETURN(float base, f.GetF32Or(r.Key("rope.freq_base"), 10000.0f));
  if (!(base > 0) || !std::isfinite(base))
    return Inconsistent(f, absl::StrCat(r.Key("rope.freq_base"), " = ", base, " must be > 0"));
  h.rope_base = base;
  MEMRA_RETURN_IF_ERROR(r.RejectRopeScaling());
  MEMRA_ASSIGN_OR_RETURN(float eps, f.GetF32(r.Key("attention.layer_norm_rms_epsilon")));
  if (!(eps > 0) || !std::isfinite(eps))
    return Inconsistent(f, absl::StrCat(r.Key("attention.layer_norm_rms_epsilon"), " = ", eps, " must be > 0"));
  h.rms_eps = eps;

  // IMROPE sections: text-only positions are [p, p, p, 0]; memra's rope is NeoX on the first
  // n_rot dims, which equals IMROPE only when no rotary pair falls to the 4th (position 0) stream.
  MEMRA_ASSIGN_OR_RETURN(std::vector<int64_t> sec, f.GetIntArray(r.Key("rope.dimension_sections")));
  if (sec.size() != 4)
    return Inconsistent(f, absl::StrCat(r.Key("rope.dimension_sections"), " has ", sec.size(), " entries, expected 4"));
  for (int i = 0; i < 4; ++i) {
    if (sec[i] < 0) return Inconsistent(f, absl::StrCat(r.Key("rope.dimension_sections"), " has a negative entry"));
    h.rope_sections[i] = sec[i];
  }
  const int64_t sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
  if (sect_dims <= 0) return Inconsistent(f, absl::StrCat(r.Key("rope.dimension_sections"), " sum to 0"));
  for (int64_t s = 0; s < h.n_rot / 2; ++s) {
    const int64_t sector = s % sect_dims;
    const bool p_stream = (sector % 3 == 1 && sector < 3 * sec[1]) || (sector % 3 == 2 && sector < 3 * sec[2]) ||
                          (sector % 3 == 0 && sector < 3 * sec[0]);
    if (!p_stream)
      return absl::UnimplementedError(absl::StrCat(f.path(), ": ", r.Key("rope.dimension_sections"), " = [",
                                                   absl::StrJoin(sec, ", "), "] sends rotary pair ", s,
                                                   " to the 4th IMROPE stream; only text-only rope equal to "
                                                   "NeoX is supported"));
  }

  MEMRA_ASSIGN_OR_RETURN(h.d_conv, r.Required("ssm.conv_kernel"));
  MEMRA_ASSIGN_OR_RETURN(h.d_inner, r.Required("ssm.inner_size"));
  MEMRA_ASSIGN_OR_RETURN(h.d_state, r.Required("ssm.state_size"));
  MEMRA_ASSIGN_OR_RETURN(h.n_v_heads, r.Required("ssm.time_step_rank"));
  MEMRA_ASSIGN_OR_RETURN(h.n_k_heads, r.Required("ssm.group_count"));
  if (h.d_conv < 1) return Inconsistent(f, absl::StrCat(r.Key("ssm.conv_kernel"), " must be >= 1"));
  if (h.d_state <= 0 || h.n_v_heads <= 0 || h.n_k_heads <= 0)
    return Inconsistent(f, absl::StrCat(r.Key("ssm.state_size"), ", ", r.Key("ssm.time_step_rank"), " and ",
                                        r.Key("ssm.group_count"), " must be > 0"));
  if (h.d_inner != h.d_state * h.n_v_heads)
    return Inconsistent(f, absl::StrCat(r.Key("ssm.inner_size"), " (", h.d_inner, ") != ", r.Key("ssm.state_size"),
                                        " (", h.d_state, ") * ", r.Key("ssm.time_step_rank"), " (", h.n_v_heads, ")"));
  if (h.n_v_heads % h.n_k_heads != 0)
    return Inconsistent(f, absl::StrCat(r.Key("ssm.time_step_rank"), " (", h.n_v_heads, ") must be a multiple of ",
                                        r.Key("ssm.group_count"), " (", h.n_k_heads, ")"));

  MEMRA_ASSIGN_OR_RETURN(h.full_attention_interval, r.Optional("full_attention_interval", 4));
  h.recurrent.assign(h.n_layer, false);
  if (const gguf::Value* v = f.Find(r.Key("attention.recurrent_layers")); v != nullptr) {
    if (v->type != gguf::ValueType::kArray || v->elem_type != gguf::ValueType::kBool)
      return absl::InvalidArgumentError(
          absl::StrCat(f.path(), ": key \"", r.Key("attention.recurrent_layers"), "\" must be an array of bool"));
    if (static_cast<int64_t>(v->array.size()) < h.n_layer)
      return Inconsistent(f, absl::StrCat(r.Key("attention.recurrent_layers"), " has ", v->array.size(),
                                          " entries, expected ", h.n_layer_all));
    for (int64_t il = 0; il < h.n_layer; ++il) h.recurrent[il] = v->array[il].u != 0;
  } else {
    if (h.full_attention_interval <= 0)
      return Inconsistent(f, absl::StrCat(r.Key("full_attention_interval"), " must be > 0"));
    for (int64_t il = 0; il < h.n_layer; ++il) h.recurrent[il] = (il + 1) % h.full_attention_interval != 0;
  }

  // From the tensor table: vocabulary size and whether the head is tied.
  MEMRA_ASSIGN_OR_RETURN(VocabAndHead vh, ReadVocabAndHead(f, h.n_embd, r.Key("embedding_length")));
  h.n_vocab = vh.n_vocab;
  h.tied_output = vh.tied_output;
  return h;
}

ir::AttrDict Qwen35Attributes(const Qwen35Hparams& h) {
  ir::AttrDict a;
  a.Set("arch", h.arch);
  a.Set("n_ctx_train", h.n_ctx_train);
  a.Set("n_embd", h.n_embd);
  a.Set("n_layer", h.n_layer);
  a.Set("n_nextn", h.n_nextn);
  a.Set("n_ff", h.n_ff);
  a.Set("n_head", h.n_head);
  a.Set("n_head_kv", h.n_head_kv);
  a.Set("head_dim", h.head_dim);
  a.Set("n_rot", h.n_rot);
  a.Set("rope_base", h.rope_base);
  a.Set("rope_sections", std::vector<int64_t>(h.rope_sections.begin(), h.rope_sections.end()));
  a.Set("rms_eps", h.rms_eps);
  a.Set("ssm_d_conv", h.d_conv);
  a.Set("ssm_d_state", h.d_state);
  a.Set("ssm_n_k_heads", h.n_k_heads);
  a.Set("ssm_n_v_heads", h.n_v_heads);
  a.Set("ssm_d_inner", h.d_inner);
  a.Set("full_attention_interval", h.full_attention_interval);
  std::vector<int64_t> rec;
  for (bool r : h.recurrent) rec.push_back(r ? 1 : 0);
  a.Set("recurrent_layers", rec);
  a.Set("n_vocab", h.n_vocab);
  a.Set("tied_output", static_cast<int64_t>(h.tied_output));
  return a;
}

absl::StatusOr<ir::AttrDict> ReadQwen35Attributes(const gguf::GgufFile& file) {
  MEMRA_ASSIGN_OR_RETURN(Qwen35Hparams h, ReadQwen35Hparams(file));
  return Qwen35Attributes(h);
}

}  // namespace memra::frontends

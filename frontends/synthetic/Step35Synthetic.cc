#include "frontends/synthetic/Step35Synthetic.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontends/gguf/GgufWriter.h"
#include "frontends/synthetic/QuantMix.h"
#include "frontends/synthetic/SyntheticVocab.h"
#include "ir/StatusMacros.h"

namespace memra::synthetic {
namespace {

using formats::GgmlType;
using gguf::Value;

// Step's layer_types: a full-attention layer, then three sliding-window layers, repeated.
std::vector<bool> Pattern(uint32_t n_layer) {
  std::vector<bool> swa(n_layer);
  for (uint32_t il = 0; il < n_layer; ++il) swa[il] = il % 4 != 0;
  return swa;
}

// llama.cpp's converter (conversion/step3.py, generate_extra_tensors): Llama-3 factors over the
// full layers' rotated pairs, 1.0 for the rest of head_dim / 2 (the sliding layers stay unscaled).
std::vector<double> Llama3RopeFactors(const Step35Shape& s) {
  const int rotary = s.head_dim / 2;  // the full layers' rotated dims
  const double low_wavelen = s.rope_llama3_original_ctx / s.rope_llama3_low;
  const double high_wavelen = s.rope_llama3_original_ctx / s.rope_llama3_high;
  std::vector<double> f(s.head_dim / 2, 1.0);
  for (int i = 0; i < rotary / 2; ++i) {
    const double freq = 1.0 / std::pow(double(s.rope_base_full), 2.0 * i / rotary);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      f[i] = 1.0;
    } else if (wavelen > low_wavelen) {
      f[i] = s.rope_llama3_factor;
    } else {
      const double smooth =
          (s.rope_llama3_original_ctx / wavelen - s.rope_llama3_low) / (s.rope_llama3_high - s.rope_llama3_low);
      f[i] = 1.0 / ((1.0 - smooth) / s.rope_llama3_factor + smooth);
    }
  }
  return f;
}

// The tensors with every matrix in `dtype` (the source types llama-quantize sees). Inits as
// ../shared/fixtures/README.md §10.1: projections N(0, 1/sqrt(fan_in)) (attn_gate x1.2), the
// embedding N(0, 1), norms U(0.8, 1.2) (final multipliers: the converter's "+1" is in them), the
// selection bias N(0, 0.1); residual-branch outputs scaled by sqrt(4 / n_layer) in deep models so
// the stream stays O(1).
std::vector<TensorSpec> Step35Tensors(const Step35Shape& s, GgmlType dtype) {
  const int64_t E = s.n_embd, D = s.head_dim;
  const double out_gain = std::min(1.0, std::sqrt(4.0 / s.n_layer));
  auto mat = [&](std::string name, int64_t in, int64_t out, double gain = 1.0) {
    return Matrix(std::move(name), in, out, dtype, gain);
  };
  auto norm = [&](std::string name, int64_t n) { return NormWeight(std::move(name), n); };
  std::vector<TensorSpec> v;
  v.push_back({"token_embd.weight", {E, s.n_vocab}, dtype, {Init::kNormal, 0.0, 1.0}});
  if (s.rope_llama3_factor > 0) {
    Init values{Init::kValues};
    values.values = Llama3RopeFactors(s);
    v.push_back({"rope_freqs.weight", {D / 2}, GgmlType::kF32, values});
  }
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    const std::string p = absl::StrCat("blk.", il, ".");
    const int64_t H = s.Heads(il), Hkv = s.HeadsKv(il);
    v.push_back(norm(p + "attn_norm.weight", E));
    v.push_back(mat(p + "attn_q.weight", E, D * H));
    v.push_back(mat(p + "attn_k.weight", E, D * Hkv));
    v.push_back(mat(p + "attn_v.weight", E, D * Hkv));
    v.push_back(norm(p + "attn_q_norm.weight", D));
    v.push_back(norm(p + "attn_k_norm.weight", D));
    v.push_back(mat(p + "attn_output.weight", D * H, E, out_gain));
    v.push_back(mat(p + "attn_gate.weight", E, H, 1.2));
    v.push_back(norm(p + "ffn_norm.weight", E));
    if (!s.IsMoe(il)) {
      v.push_back(mat(p + "ffn_gate.weight", E, s.n_ff));
      v.push_back(mat(p + "ffn_up.weight", E, s.n_ff));
      v.push_back(mat(p + "ffn_down.weight", s.n_ff, E, out_gain));
      continue;
    }
    const int64_t X = s.n_expert, Fe = s.n_ff_exp, Fs = s.n_ff_shexp;
    // The router stays f32 (llama-quantize never quantizes ffn_gate_inp), the bias is 1-D.
    v.push_back({p + "ffn_gate_inp.weight", {E, X}, GgmlType::kF32, {Init::kNormal, 0.0, 1.0 / std::sqrt(double(E))}});
    v.push_back({p + "exp_probs_b.bias", {X}, GgmlType::kF32, {Init::kNormal, 0.0, 0.1}});
    v.push_back({p + "ffn_gate_exps.weight", {E, Fe, X}, dtype, {Init::kNormal, 0.0, 1.0 / std::sqrt(double(E))}});
    v.push_back({p + "ffn_up_exps.weight", {E, Fe, X}, dtype, {Init::kNormal, 0.0, 1.0 / std::sqrt(double(E))}});
    v.push_back(
        {p + "ffn_down_exps.weight", {Fe, E, X}, dtype, {Init::kNormal, 0.0, out_gain / std::sqrt(double(Fe))}});
    v.push_back(mat(p + "ffn_gate_shexp.weight", E, Fs));
    v.push_back(mat(p + "ffn_up_shexp.weight", E, Fs));
    v.push_back(mat(p + "ffn_down_shexp.weight", Fs, E, out_gain));
  }
  v.push_back(norm("output_norm.weight", E));
  v.push_back(mat("output.weight", E, s.n_vocab));
  return v;
}

absl::StatusOr<std::vector<TensorSpec>> TypedTensors(const Step35Shape& s, const QuantMix& mix) {
  std::vector<TensorSpec> v = Step35Tensors(s, GgmlType::kBF16);
  MixModel model;
  model.n_layer = s.n_layer;
  model.n_gqa = s.Heads(0) / s.HeadsKv(0);  // llama.cpp's n_gqa(0)
  model.n_expert = s.n_expert;
  MEMRA_RETURN_IF_ERROR(ApplyMix(mix, model, v));
  return v;
}

absl::Status Validate(const Step35Shape& s) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("step35 preset ", s.name, ": ", what));
  };
  if (s.swa.size() != s.n_layer || s.clamp_exp.size() != s.n_layer || s.clamp_shexp.size() != s.n_layer)
    return bad("per-layer arrays of the wrong length");
  if (s.n_head_kv_full == 0 || s.n_head_kv_swa == 0 || s.n_head_full % s.n_head_kv_full != 0 ||
      s.n_head_swa % s.n_head_kv_swa != 0)
    return bad("KV heads do not divide the heads");
  if (s.n_dense_lead >= s.n_layer || s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
    return bad("needs a MoE layer after the dense ones and 1 <= experts used <= experts");
  for (uint32_t il = 0; il < s.n_dense_lead; ++il)
    if (s.clamp_exp[il] != 0) return bad(absl::StrCat("routed-expert clamp on dense layer ", il));
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> Step35PresetNames() { return {"step35-tiny", "step35-flash-8l", "step35-flash"}; }

absl::StatusOr<Step35Shape> Step35Preset(absl::string_view name) {
  Step35Shape s;
  s.name = std::string(name);
  if (name == "step35-flash" || name == "step35-flash-8l") {
    // stepfun-ai/Step-3.5-Flash config.json: hidden_size 4096, 45 layers (+3 MTP, not written),
    // head_dim 128, full layers num_attention_heads 64 / num_attention_groups 8 with rope_theta 5e6
    // over half the head (partial_rotary_factor 0.5) and Llama-3 scaling (factor 2, low / high
    // frequency factors 1 / 32, original context 131072), sliding layers (attention_other_setting)
    // 96 heads / 8 groups with rope_theta 1e4 over the whole head, window 512, layer_types
    // full + 3 sliding repeated; intermediate_size 11264 in the 3 leading dense layers
    // (moe_layers_enum 3..44), 288 experts (moe_top_k 8) of 1280 and a shared expert of 1280,
    // sigmoid router with the selection bias, norm_expert_weight, moe_router_scaling_factor 3,
    // swiglu_limits 7 / swiglu_limits_shared 16 on the last two layers; rms eps 1e-5, vocab
    // 128896, 262144 context, untied head.
    s.n_embd = 4096;
    s.n_layer = name == "step35-flash" ? 45 : 8;
    s.head_dim = 128;
    s.n_head_full = 64;
    s.n_head_kv_full = 8;
    s.n_head_swa = 96;
    s.n_head_kv_swa = 8;
    s.swa = Pattern(s.n_layer);
    s.n_swa = 512;
    s.rope_llama3_factor = 2.0;
    s.rope_llama3_low = 1.0;
    s.rope_llama3_high = 32.0;
    s.rope_llama3_original_ctx = 131072;
    s.n_dense_lead = 3;
    s.n_ff = 11264;
    s.n_expert = 288;
    s.n_expert_used = 8;
    s.n_ff_exp = 1280;
    s.n_ff_shexp = 1280;
    s.expert_weights_scale = 3.0f;
    s.clamp_exp.assign(s.n_layer, 0.0f);
    s.clamp_shexp.assign(s.n_layer, 0.0f);
    for (uint32_t il = s.n_layer - 2; il < s.n_layer; ++il) {
      s.clamp_exp[il] = 7.0f;
      s.clamp_shexp[il] = 16.0f;
    }
    s.context_length = 262144;
    s.n_vocab = 128896;
  } else if (name == "step35-tiny") {
    // ../shared/fixtures' step35-tiny (README §10.1), with a byte-level BPE vocabulary of 1024 and
    // a ChatML template, so it chats.
    s.n_embd = 128;
    s.n_layer = 5;
    s.head_dim = 32;
    s.n_head_full = 4;
    s.n_head_kv_full = 2;
    s.n_head_swa = 8;
    s.n_head_kv_swa = 2;
    s.swa = Pattern(s.n_layer);
    s.n_swa = 16;
    s.n_dense_lead = 1;
    s.n_ff = 256;
    s.n_expert = 8;
    s.n_expert_used = 3;
    s.n_ff_exp = 64;
    s.n_ff_shexp = 128;
    s.expert_weights_scale = 2.0f;
    s.clamp_exp = {0.0f, 1.5f, 1.5f, 1.5f, 1.5f};
    s.clamp_shexp = {0.0f, 2.0f, 2.0f, 2.0f, 2.0f};
    s.context_length = 4096;
    s.n_vocab = 1024;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown step35 preset '", name, "' (known: ", absl::StrJoin(Step35PresetNames(), ", "), ")"));
  }
  MEMRA_RETURN_IF_ERROR(Validate(s));
  return s;
}

absl::StatusOr<std::vector<SyntheticTensorType>> Step35TensorTypes(const Step35Shape& s, absl::string_view dtype) {
  MEMRA_ASSIGN_OR_RETURN(QuantMix mix, LookupQuantMix(dtype));
  MEMRA_ASSIGN_OR_RETURN(std::vector<TensorSpec> specs, TypedTensors(s, mix));
  return TypesOf(specs);
}

absl::StatusOr<SyntheticStats> WriteSyntheticStep35(const Step35Shape& s, const SyntheticOptions& opt,
                                                    const std::string& path) {
  MEMRA_RETURN_IF_ERROR(Validate(s));
  MEMRA_ASSIGN_OR_RETURN(QuantMix mix, LookupQuantMix(opt.dtype));
  MEMRA_ASSIGN_OR_RETURN(std::vector<TensorSpec> specs, TypedTensors(s, mix));
  const std::string a = "step35.";
  gguf::GgufWriter w;
  MEMRA_RETURN_IF_ERROR(
      BeginSyntheticFile(w, "step35", absl::StrCat("memra synthetic ", s.name), mix, specs, opt, path));
  // Keys as llama.cpp's converter (conversion/step3.py, Step35Model) writes them.
  std::vector<int32_t> heads, heads_kv;
  std::vector<Value> pattern;
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    heads.push_back(static_cast<int32_t>(s.Heads(il)));
    heads_kv.push_back(static_cast<int32_t>(s.HeadsKv(il)));
    pattern.push_back(Value::Bool(s.swa[il]));
  }
  w.Set(a + "context_length", Value::U32(s.context_length));
  w.Set(a + "embedding_length", Value::U32(s.n_embd));
  w.Set(a + "block_count", Value::U32(s.n_layer));
  w.Set(a + "feed_forward_length", Value::U32(s.n_ff));
  w.Set(a + "attention.head_count", Value::I32Array(heads));
  w.Set(a + "attention.head_count_kv", Value::I32Array(heads_kv));
  w.Set(a + "attention.key_length", Value::U32(s.head_dim));
  w.Set(a + "attention.value_length", Value::U32(s.head_dim));
  w.Set(a + "rope.dimension_count", Value::U32(s.head_dim));  // llama.cpp halves it on full layers
  w.Set(a + "rope.freq_base", Value::F32(s.rope_base_full));
  w.Set(a + "rope.freq_base_swa", Value::F32(s.rope_base_swa));
  w.Set(a + "attention.layer_norm_rms_epsilon", Value::F32(s.rms_eps));
  w.Set(a + "attention.sliding_window", Value::U32(s.n_swa));
  w.Set(a + "attention.sliding_window_pattern", Value::Array(gguf::ValueType::kBool, std::move(pattern)));
  w.Set(a + "expert_count", Value::U32(s.n_expert));
  w.Set(a + "expert_used_count", Value::U32(s.n_expert_used));
  w.Set(a + "expert_feed_forward_length", Value::U32(s.n_ff_exp));
  w.Set(a + "expert_shared_feed_forward_length", Value::U32(s.n_ff_shexp));
  w.Set(a + "expert_weights_scale", Value::F32(s.expert_weights_scale));
  w.Set(a + "expert_weights_norm", Value::Bool(s.expert_weights_norm));
  w.Set(a + "swiglu_clamp_exp", Value::F32Array(s.clamp_exp));
  w.Set(a + "swiglu_clamp_shexp", Value::F32Array(s.clamp_shexp));
  w.Set(a + "leading_dense_block_count", Value::U32(s.n_dense_lead));
  w.Set(a + "moe_every_n_layers", Value::U32(1));
  AddSyntheticVocab(s.n_vocab, w);
  return WriteSynthetic(w, specs, opt, path);
}

}  // namespace memra::synthetic

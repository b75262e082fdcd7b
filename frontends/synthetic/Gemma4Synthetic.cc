#include "frontends/synthetic/Gemma4Synthetic.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontends/gguf/GgufWriter.h"
#include "frontends/synthetic/Gemma4SyntheticVocab.h"
#include "frontends/synthetic/QuantMix.h"
#include "ir/StatusMacros.h"

namespace memra::synthetic {
namespace {

using formats::GgmlType;
using gguf::Value;

// (n_sliding + 1 full) repeated: Gemma 4's layer_types.
std::vector<bool> Pattern(uint32_t n_layer, uint32_t n_sliding) {
  std::vector<bool> swa(n_layer);
  for (uint32_t il = 0; il < n_layer; ++il) swa[il] = (il + 1) % (n_sliding + 1) != 0;
  return swa;
}

// The tensors with every matrix in `dtype` (the source types llama-quantize sees). Inits as
// ../shared/fixtures/README.md §9.2: projections N(0, 1/sqrt(fan_in)); the embedding
// N(0, 0.3/sqrt(E)) (the graph scales it by sqrt(E)); output_norm ~6.7 so the tied head's logits
// have std ~1.8 under the soft cap; q/k norms 1.3/D^(1/4) so q.k has std ~1.7 at attention
// scale 1; plain-multiplier norms U(0.8, 1.2).
std::vector<TensorSpec> Gemma4Tensors(const Gemma4Shape& s, GgmlType dtype) {
  const int64_t E = s.n_embd, L = s.n_layer, H = s.n_head, Epl = s.n_embd_per_layer;
  auto mat = [&](std::string name, int64_t in, int64_t out) { return Matrix(std::move(name), in, out, dtype); };
  auto norm = [&](std::string name, int64_t n) { return NormWeight(std::move(name), n); };
  auto uniform = [](std::string name, std::vector<int64_t> ne, double lo, double hi) {
    return TensorSpec{std::move(name), std::move(ne), GgmlType::kF32, {Init::kUniform, lo, hi}};
  };
  std::vector<TensorSpec> v;
  v.push_back({"token_embd.weight", {E, s.n_vocab}, dtype, {Init::kNormal, 0.0, 0.3 / std::sqrt(double(E))}});
  // Proportional partial RoPE of the full layers: pairs past the rotated fraction get a factor
  // of 1e30, i.e. no rotation (the converter's rope_freqs).
  const int64_t pairs = s.head_dim_full / 2;
  const int64_t rotated = static_cast<int64_t>(s.head_dim_full * s.partial_rotary_full / 2);
  Init step{Init::kStep, 1.0, 1e30};
  step.split = rotated;
  v.push_back({"rope_freqs.weight", {pairs}, GgmlType::kF32, step});
  if (Epl > 0) {
    v.push_back({"per_layer_token_embd.weight",
                 {Epl * L, s.n_vocab},
                 dtype,
                 {Init::kNormal, 0.0, 1.0 / std::sqrt(double(Epl))}});
    v.push_back(mat("per_layer_model_proj.weight", E, Epl * L));  // llama-quantize keeps it f32
    v.push_back(norm("per_layer_proj_norm.weight", Epl));
  }
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    const std::string p = absl::StrCat("blk.", il, ".");
    const int64_t D = s.HeadDim(il), Hkv = s.HeadKv(il), F = s.n_ff[il];
    const double qk_gain = 1.3 / std::pow(double(D), 0.25);
    v.push_back(norm(p + "attn_norm.weight", E));
    v.push_back(mat(p + "attn_q.weight", E, D * H));
    if (s.HasKv(il)) {
      v.push_back(mat(p + "attn_k.weight", E, D * Hkv));
      if (s.swa[il] || !s.k_eq_v) v.push_back(mat(p + "attn_v.weight", E, D * Hkv));
      v.push_back(norm(p + "attn_k_norm.weight", D));
      v.back().init = {Init::kUniform, 0.8 * qk_gain, 1.2 * qk_gain};
    }
    v.push_back(norm(p + "attn_q_norm.weight", D));
    v.back().init = {Init::kUniform, 0.8 * qk_gain, 1.2 * qk_gain};
    v.push_back(mat(p + "attn_output.weight", D * H, E));
    v.push_back(norm(p + "post_attention_norm.weight", E));
    v.push_back(uniform(p + "layer_output_scale.weight", {1}, 0.6, 1.0));
    v.push_back(norm(p + "ffn_norm.weight", E));
    v.push_back(mat(p + "ffn_gate.weight", E, F));
    v.push_back(mat(p + "ffn_up.weight", E, F));
    v.push_back(mat(p + "ffn_down.weight", F, E));
    v.push_back(norm(p + "post_ffw_norm.weight", E));
    if (s.moe()) {
      const int64_t X = s.n_expert, Fe = s.n_ff_exp;
      // The router stays f32 (llama-quantize keeps ffn_gate_inp); its input is scaled per channel.
      v.push_back({p + "ffn_gate_inp.weight", {E, X}, GgmlType::kF32, {Init::kNormal, 0.0, 1.0}});
      v.push_back(uniform(p + "ffn_gate_inp.scale", {E}, 0.8, 1.2));
      v.push_back(norm(p + "pre_ffw_norm_2.weight", E));
      v.push_back(norm(p + "post_ffw_norm_1.weight", E));
      v.push_back(norm(p + "post_ffw_norm_2.weight", E));
      // Rows [0, Fe) gate, [Fe, 2 Fe) up.
      v.push_back(
          {p + "ffn_gate_up_exps.weight", {E, 2 * Fe, X}, dtype, {Init::kNormal, 0.0, 1.0 / std::sqrt(double(E))}});
      v.push_back({p + "ffn_down_exps.weight", {Fe, E, X}, dtype, {Init::kNormal, 0.0, 1.0 / std::sqrt(double(Fe))}});
      v.push_back(uniform(p + "ffn_down_exps.scale", {X}, 0.5, 1.5));
    }
    if (Epl > 0) {
      v.push_back(mat(p + "inp_gate.weight", E, Epl));
      v.push_back(mat(p + "proj.weight", Epl, E));
      v.push_back(norm(p + "post_norm.weight", E));
    }
  }
  v.push_back(norm("output_norm.weight", E));
  v.back().init = {Init::kUniform, 0.8 * 6.7, 1.2 * 6.7};
  return v;  // tied head: no output.weight
}

absl::StatusOr<std::vector<TensorSpec>> TypedTensors(const Gemma4Shape& s, const QuantMix& mix) {
  std::vector<TensorSpec> v = Gemma4Tensors(s, GgmlType::kBF16);
  MixModel model;
  model.n_layer = s.n_layer;
  model.n_gqa = s.n_head / s.HeadKv(0);  // llama.cpp's n_gqa(0)
  model.n_expert = s.n_expert;
  MEMRA_RETURN_IF_ERROR(ApplyMix(mix, model, v));
  return v;
}

absl::Status Validate(const Gemma4Shape& s) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("gemma4 preset ", s.name, ": ", what));
  };
  if (s.swa.size() != s.n_layer || s.n_ff.size() != s.n_layer) return bad("per-layer arrays of the wrong length");
  if (s.n_head % s.n_head_kv_swa != 0 || s.n_head % s.n_head_kv_full != 0) return bad("KV heads do not divide");
  if (s.shared_kv_layers > 0) {
    const uint32_t first = s.FirstSharedLayer();
    if (first < 2 || !s.swa[first - 2] || s.swa[first - 1])
      return bad("KV-sharing layers must follow a sliding-window layer and a full layer");
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> Gemma4PresetNames() {
  return {"gemma4-tiny", "gemma4-e2b", "gemma4-e4b", "gemma4-26b-a4b", "gemma4-31b"};
}

absl::StatusOr<Gemma4Shape> Gemma4Preset(absl::string_view name) {
  // Published configs (google/gemma-4-*-it config.json, text_config): vocab 262144, rms eps 1e-6,
  // final logit soft cap 30, tied embeddings, sliding layers head_dim 256 with RoPE theta 1e4
  // over the whole head, full layers global_head_dim 512 with theta 1e6 and proportional RoPE
  // over a quarter of it, no RoPE scaling.
  Gemma4Shape s;
  s.name = std::string(name);
  if (name == "gemma4-31b") {
    // hidden 5376, 60 layers, intermediate 21504, 32 heads, 16 KV heads (sliding) / 4 global,
    // attention_k_eq_v (global layers have no v_proj), window 1024, 5 sliding : 1 full, 256k ctx.
    s.n_embd = 5376;
    s.n_layer = 60;
    s.n_head = 32;
    s.n_ff.assign(s.n_layer, 21504);
    s.n_head_kv_swa = 16;
    s.n_head_kv_full = 4;
    s.n_swa = 1024;
    s.swa = Pattern(s.n_layer, 5);
    s.k_eq_v = true;
    s.context_length = 262144;
  } else if (name == "gemma4-26b-a4b") {
    // hidden 2816, 30 layers, a dense MLP of 2112 beside 128 experts (top 8) of 704 in every
    // layer, 16 heads, 8 KV heads (sliding) / 2 global, attention_k_eq_v, window 1024, 256k ctx.
    s.n_embd = 2816;
    s.n_layer = 30;
    s.n_head = 16;
    s.n_ff.assign(s.n_layer, 2112);
    s.n_head_kv_swa = 8;
    s.n_head_kv_full = 2;
    s.n_swa = 1024;
    s.swa = Pattern(s.n_layer, 5);
    s.k_eq_v = true;
    s.context_length = 262144;
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.n_ff_exp = 704;
  } else if (name == "gemma4-e4b") {
    // hidden 2560, 42 layers, intermediate 10240, 8 heads, 2 KV heads everywhere, window 512,
    // 5 sliding : 1 full, per-layer inputs of 256, the last 18 layers share KV, 128k ctx.
    s.n_embd = 2560;
    s.n_layer = 42;
    s.n_head = 8;
    s.n_ff.assign(s.n_layer, 10240);
    s.n_head_kv_swa = s.n_head_kv_full = 2;
    s.n_swa = 512;
    s.swa = Pattern(s.n_layer, 5);
    s.shared_kv_layers = 18;
    s.n_embd_per_layer = 256;
    s.context_length = 131072;
  } else if (name == "gemma4-e2b") {
    // hidden 1536, 35 layers, intermediate 6144 (double wide, 12288, in the 20 KV-sharing
    // layers), 8 heads, 1 KV head, window 512, 4 sliding : 1 full, per-layer inputs of 256.
    s.n_embd = 1536;
    s.n_layer = 35;
    s.n_head = 8;
    s.shared_kv_layers = 20;
    s.n_ff.assign(s.n_layer, 6144);
    for (uint32_t il = s.n_layer - s.shared_kv_layers; il < s.n_layer; ++il) s.n_ff[il] = 12288;
    s.n_head_kv_swa = s.n_head_kv_full = 1;
    s.n_swa = 512;
    s.swa = Pattern(s.n_layer, 4);
    s.n_embd_per_layer = 256;
    s.context_length = 131072;
  } else if (name == "gemma4-tiny") {
    // ../shared/fixtures' gemma4-tiny shapes (README §9.2), with a Gemma vocabulary.
    s.n_embd = 256;
    s.n_layer = 6;
    s.n_head = 4;
    s.n_ff.assign(s.n_layer, 256);
    s.n_head_kv_swa = 2;
    s.n_head_kv_full = 1;
    s.head_dim_swa = 32;
    s.head_dim_full = 64;
    s.n_swa = 16;
    s.swa = {true, true, true, false, true, false};
    s.shared_kv_layers = 2;
    s.softcap = 6.0f;
    s.context_length = 4096;
    s.n_vocab = 2048;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown gemma4 preset '", name, "' (known: ", absl::StrJoin(Gemma4PresetNames(), ", "), ")"));
  }
  MEMRA_RETURN_IF_ERROR(Validate(s));
  return s;
}

absl::StatusOr<std::vector<SyntheticTensorType>> Gemma4TensorTypes(const Gemma4Shape& s, absl::string_view dtype) {
  MEMRA_ASSIGN_OR_RETURN(QuantMix mix, LookupQuantMix(dtype));
  MEMRA_ASSIGN_OR_RETURN(std::vector<TensorSpec> specs, TypedTensors(s, mix));
  return TypesOf(specs);
}

absl::StatusOr<SyntheticStats> WriteSyntheticGemma4(const Gemma4Shape& s, const SyntheticOptions& opt,
                                                    const std::string& path) {
  MEMRA_RETURN_IF_ERROR(Validate(s));
  MEMRA_ASSIGN_OR_RETURN(QuantMix mix, LookupQuantMix(opt.dtype));
  MEMRA_ASSIGN_OR_RETURN(std::vector<TensorSpec> specs, TypedTensors(s, mix));
  const std::string a = "gemma4.";
  gguf::GgufWriter w;
  MEMRA_RETURN_IF_ERROR(
      BeginSyntheticFile(w, "gemma4", absl::StrCat("memra synthetic ", s.name), mix, specs, opt, path));
  // Keys as llama.cpp's converter (conversion/gemma.py, Gemma4Model) writes them.
  w.Set(a + "context_length", Value::U32(s.context_length));
  w.Set(a + "embedding_length", Value::U32(s.n_embd));
  w.Set(a + "block_count", Value::U32(s.n_layer));
  bool ff_uniform = true;
  for (uint32_t f : s.n_ff) ff_uniform = ff_uniform && f == s.n_ff[0];
  if (ff_uniform) {
    w.Set(a + "feed_forward_length", Value::U32(s.n_ff[0]));
  } else {
    w.Set(a + "feed_forward_length", Value::I32Array(std::vector<int32_t>(s.n_ff.begin(), s.n_ff.end())));
  }
  w.Set(a + "attention.head_count", Value::U32(s.n_head));
  if (s.n_head_kv_swa == s.n_head_kv_full) {
    w.Set(a + "attention.head_count_kv", Value::U32(s.n_head_kv_swa));
  } else {
    std::vector<int32_t> kv;
    for (uint32_t il = 0; il < s.n_layer; ++il) kv.push_back(static_cast<int32_t>(s.HeadKv(il)));
    w.Set(a + "attention.head_count_kv", Value::I32Array(kv));
  }
  w.Set(a + "attention.layer_norm_rms_epsilon", Value::F32(s.rms_eps));
  w.Set(a + "attention.key_length", Value::U32(s.head_dim_full));
  w.Set(a + "attention.value_length", Value::U32(s.head_dim_full));
  w.Set(a + "attention.key_length_swa", Value::U32(s.head_dim_swa));
  w.Set(a + "attention.value_length_swa", Value::U32(s.head_dim_swa));
  w.Set(a + "rope.freq_base", Value::F32(s.rope_base_full));
  w.Set(a + "rope.freq_base_swa", Value::F32(s.rope_base_swa));
  w.Set(a + "rope.dimension_count", Value::U32(s.head_dim_full));  // rotation limited by rope_freqs
  w.Set(a + "rope.dimension_count_swa", Value::U32(s.head_dim_swa));
  w.Set(a + "final_logit_softcapping", Value::F32(s.softcap));
  w.Set(a + "attention.sliding_window", Value::U32(s.n_swa));
  std::vector<Value> pattern;
  for (bool b : s.swa) pattern.push_back(Value::Bool(b));
  w.Set(a + "attention.sliding_window_pattern", Value::Array(gguf::ValueType::kBool, std::move(pattern)));
  w.Set(a + "attention.shared_kv_layers", Value::U32(s.shared_kv_layers));
  w.Set(a + "embedding_length_per_layer_input", Value::U32(s.n_embd_per_layer));
  if (s.moe()) {
    w.Set(a + "expert_count", Value::U32(s.n_expert));
    w.Set(a + "expert_used_count", Value::U32(s.n_expert_used));
    w.Set(a + "expert_feed_forward_length", Value::U32(s.n_ff_exp));
  }
  AddGemma4Tokenizer(s.n_vocab, w);
  return WriteSynthetic(w, specs, opt, path);
}

}  // namespace memra::synthetic

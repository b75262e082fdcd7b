#include "frontends/synthetic/Qwen35Synthetic.h"

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

// The tensors with every matrix in `dtype` (the source types llama-quantize sees; AssignTypes
// then gives each tensor its type of the mix).
std::vector<TensorSpec> Qwen35Tensors(const Qwen35Shape& s, GgmlType dtype) {
  const int64_t E = s.n_embd;
  const int64_t key_dim = int64_t(s.ssm_d_state) * s.ssm_n_k_heads;
  const int64_t value_dim = s.d_inner();
  const int64_t conv_dim = 2 * key_dim + value_dim;
  const int64_t q_dim = int64_t(s.n_head) * s.head_dim, kv_dim = int64_t(s.n_head_kv) * s.head_dim;
  // Residual-branch outputs get a smaller scale in deep models so the stream stays O(1).
  const double out_gain = std::min(1.0, std::sqrt(4.0 / s.n_layer));
  auto mat = [&](std::string name, int64_t in, int64_t out, double gain = 1.0) {
    return Matrix(std::move(name), in, out, dtype, gain);
  };
  auto norm = [&](std::string name, int64_t n) { return NormWeight(std::move(name), n); };
  std::vector<TensorSpec> v;
  v.push_back({"token_embd.weight", {E, s.n_vocab}, dtype, {Init::kNormal, 0.0, 1.0}});
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    const std::string p = absl::StrCat("blk.", il, ".");
    v.push_back(norm(p + "attn_norm.weight", E));
    if (s.IsAttentionLayer(il)) {
      v.push_back(mat(p + "attn_q.weight", E, 2 * q_dim));  // per head [q_h | gate_h]
      v.push_back(mat(p + "attn_k.weight", E, kv_dim));
      v.push_back(mat(p + "attn_v.weight", E, kv_dim));
      v.push_back(mat(p + "attn_output.weight", q_dim, E, out_gain));
      v.push_back(norm(p + "attn_q_norm.weight", s.head_dim));
      v.push_back(norm(p + "attn_k_norm.weight", s.head_dim));
    } else {
      v.push_back(mat(p + "attn_qkv.weight", E, conv_dim));
      v.push_back(mat(p + "attn_gate.weight", E, value_dim));
      v.push_back({p + "ssm_conv1d.weight", {s.ssm_d_conv, conv_dim}, GgmlType::kF32, {Init::kNormal, 0.0, 0.5}});
      v.push_back({p + "ssm_dt.bias", {s.ssm_n_v_heads}, GgmlType::kF32, {Init::kNormal, -2.5, 0.5}});
      v.push_back({p + "ssm_a", {s.ssm_n_v_heads}, GgmlType::kF32, {Init::kNegExpUniform, 0.0, std::log(16.0)}});
      v.push_back(mat(p + "ssm_beta.weight", E, s.ssm_n_v_heads));
      v.push_back(mat(p + "ssm_alpha.weight", E, s.ssm_n_v_heads));
      v.push_back(norm(p + "ssm_norm.weight", s.ssm_d_state));
      v.push_back(mat(p + "ssm_out.weight", value_dim, E, out_gain));
    }
    v.push_back(norm(p + "post_attention_norm.weight", E));
    if (s.moe()) {
      const int64_t X = s.n_expert, F = s.n_ff_exp, Fs = s.n_ff_shexp;
      // The router and the shared expert's gate stay f32 (as converted; llama-quantize keeps them).
      v.push_back(
          {p + "ffn_gate_inp.weight", {E, X}, GgmlType::kF32, {Init::kNormal, 0.0, 1.0 / std::sqrt(double(E))}});
      v.push_back({p + "ffn_gate_exps.weight", {E, F, X}, dtype, {Init::kNormal, 0.0, 1.0 / std::sqrt(double(E))}});
      v.push_back({p + "ffn_up_exps.weight", {E, F, X}, dtype, {Init::kNormal, 0.0, 1.0 / std::sqrt(double(E))}});
      v.push_back(
          {p + "ffn_down_exps.weight", {F, E, X}, dtype, {Init::kNormal, 0.0, out_gain / std::sqrt(double(F))}});
      v.push_back(
          {p + "ffn_gate_inp_shexp.weight", {E}, GgmlType::kF32, {Init::kNormal, 0.0, 1.0 / std::sqrt(double(E))}});
      v.push_back(mat(p + "ffn_gate_shexp.weight", E, Fs));
      v.push_back(mat(p + "ffn_up_shexp.weight", E, Fs));
      v.push_back(mat(p + "ffn_down_shexp.weight", Fs, E, out_gain));
    } else {
      v.push_back(mat(p + "ffn_gate.weight", E, s.n_ff));
      v.push_back(mat(p + "ffn_up.weight", E, s.n_ff));
      v.push_back(mat(p + "ffn_down.weight", s.n_ff, E, out_gain));
    }
  }
  v.push_back(norm("output_norm.weight", E));
  if (!s.tied_output) v.push_back(mat("output.weight", E, s.n_vocab));
  return v;
}

// The tensors of `dtype`'s file: the matrices drawn as bf16, then typed as llama-quantize would.
absl::StatusOr<std::vector<TensorSpec>> TypedTensors(const Qwen35Shape& s, const QuantMix& mix) {
  std::vector<TensorSpec> v = Qwen35Tensors(s, GgmlType::kBF16);
  MixModel model;
  model.n_layer = s.n_layer;
  // llama.cpp's n_gqa(0): qwen35 reads head_count_kv for every layer, recurrent ones included.
  model.n_gqa = s.n_head_kv ? s.n_head / s.n_head_kv : 0;
  model.n_expert = s.n_expert;
  MEMRA_RETURN_IF_ERROR(ApplyMix(mix, model, v));
  return v;
}

}  // namespace

std::vector<std::string> Qwen35PresetNames() {
  return {"tiny", "0.8b", "2b", "4b", "9b", "27b", "moe-tiny", "35b-a3b"};
}

absl::StatusOr<Qwen35Shape> Qwen35Preset(absl::string_view name) {
  Qwen35Shape s;
  s.name = std::string(name);
  if (name == "moe-tiny") {  // the shapes of ../shared/fixtures' qwen35moe-tiny
    MEMRA_ASSIGN_OR_RETURN(s, Qwen35Preset("tiny"));
    s.name = std::string(name);
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_exp = 128;
    s.n_ff_shexp = 256;
    return s;
  }
  if (name == "35b-a3b") {
    // Qwen/Qwen3.5-35B-A3B's text model (HF config: hidden_size 2048, num_hidden_layers 40 with
    // full_attention_interval 4, num_attention_heads 16, num_key_value_heads 2, head_dim 256,
    // partial_rotary_factor 0.25, linear_num_key_heads 16, linear_num_value_heads 32, linear key /
    // value head dim 128, num_experts 256, num_experts_per_tok 8, moe_intermediate_size 512,
    // shared_expert_intermediate_size 512, vocab 248320, untied head, rope_theta 1e7, 262144 ctx).
    MEMRA_ASSIGN_OR_RETURN(s, Qwen35Preset("9b"));  // the shared real-shape fields
    s.name = std::string(name);
    s.n_embd = 2048;
    s.n_layer = 40;
    s.n_head = 16;
    s.n_head_kv = 2;
    s.ssm_n_v_heads = 32;
    s.n_expert = 256;
    s.n_expert_used = 8;
    s.n_ff_exp = 512;
    s.n_ff_shexp = 512;
    s.n_ff = 512;  // feed_forward_length: written, unused by the MoE layers
    s.tied_output = false;
    return s;
  }
  if (name == "tiny") {  // the shapes of ../shared/fixtures' qwen35-tiny
    s.n_embd = 256;
    s.n_layer = 4;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 64;
    s.n_rot = 16;
    s.rope_sections = {3, 3, 2, 0};
    s.context_length = 4096;
    s.ssm_d_state = 32;
    s.ssm_n_k_heads = 2;
    s.ssm_n_v_heads = 4;
    s.n_ff = 512;
    s.n_vocab = 259;
    s.tied_output = false;
    return s;
  }
  // Real Qwen3.5 text-model shapes: head_dim 256, 16 linear key heads of dim 128, rope 64 dims.
  s.head_dim = 256;
  s.n_rot = 64;
  s.rope_sections = {11, 11, 10, 0};
  s.context_length = 262144;
  s.ssm_d_state = 128;
  s.ssm_n_k_heads = 16;
  s.n_vocab = 248320;
  struct Row {
    const char* name;
    uint32_t embd, layers, heads, kv, v_heads, ff;
    bool tied;
  };
  static const Row rows[] = {
      {"0.8b", 1024, 24, 8, 2, 16, 3584, true},   {"2b", 2048, 24, 8, 2, 16, 6144, true},
      {"4b", 2560, 32, 16, 4, 32, 9216, true},    {"9b", 4096, 32, 16, 4, 32, 12288, false},
      {"27b", 5120, 64, 24, 4, 48, 17408, false},
  };
  for (const Row& r : rows) {
    if (name != r.name) continue;
    s.n_embd = r.embd;
    s.n_layer = r.layers;
    s.n_head = r.heads;
    s.n_head_kv = r.kv;
    s.ssm_n_v_heads = r.v_heads;
    s.n_ff = r.ff;
    s.tied_output = r.tied;
    return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown qwen35 preset '", name, "' (known: ", absl::StrJoin(Qwen35PresetNames(), ", "), ")"));
}

absl::StatusOr<std::vector<SyntheticTensorType>> Qwen35TensorTypes(const Qwen35Shape& s, absl::string_view dtype) {
  MEMRA_ASSIGN_OR_RETURN(QuantMix mix, LookupQuantMix(dtype));
  MEMRA_ASSIGN_OR_RETURN(std::vector<TensorSpec> specs, TypedTensors(s, mix));
  return TypesOf(specs);
}

absl::StatusOr<SyntheticStats> WriteSyntheticQwen35(const Qwen35Shape& s, const SyntheticOptions& opt,
                                                    const std::string& path) {
  MEMRA_ASSIGN_OR_RETURN(QuantMix mix, LookupQuantMix(opt.dtype));
  MEMRA_ASSIGN_OR_RETURN(std::vector<TensorSpec> specs, TypedTensors(s, mix));
  const std::string a = s.arch() + ".";
  gguf::GgufWriter w;
  MEMRA_RETURN_IF_ERROR(
      BeginSyntheticFile(w, s.arch(), absl::StrCat("memra synthetic ", s.arch(), " ", s.name), mix, specs, opt, path));
  w.Set(a + "context_length", Value::U32(s.context_length));
  w.Set(a + "embedding_length", Value::U32(s.n_embd));
  w.Set(a + "block_count", Value::U32(s.n_layer));
  w.Set(a + "feed_forward_length", Value::U32(s.n_ff));
  w.Set(a + "attention.head_count", Value::U32(s.n_head));
  w.Set(a + "attention.head_count_kv", Value::U32(s.n_head_kv));
  w.Set(a + "attention.key_length", Value::U32(s.head_dim));
  w.Set(a + "attention.value_length", Value::U32(s.head_dim));
  w.Set(a + "rope.freq_base", Value::F32(s.rope_freq_base));
  w.Set(a + "attention.layer_norm_rms_epsilon", Value::F32(s.rms_eps));
  w.Set(a + "rope.dimension_count", Value::U32(s.n_rot));
  w.Set(a + "rope.dimension_sections",
        Value::I32Array({s.rope_sections[0], s.rope_sections[1], s.rope_sections[2], s.rope_sections[3]}));
  w.Set(a + "ssm.conv_kernel", Value::U32(s.ssm_d_conv));
  w.Set(a + "ssm.state_size", Value::U32(s.ssm_d_state));
  w.Set(a + "ssm.group_count", Value::U32(s.ssm_n_k_heads));
  w.Set(a + "ssm.time_step_rank", Value::U32(s.ssm_n_v_heads));
  w.Set(a + "ssm.inner_size", Value::U32(s.d_inner()));
  w.Set(a + "full_attention_interval", Value::U32(s.full_attention_interval));
  w.Set(a + "nextn_predict_layers", Value::U32(0));
  if (s.moe()) {
    w.Set(a + "expert_count", Value::U32(s.n_expert));
    w.Set(a + "expert_used_count", Value::U32(s.n_expert_used));
    w.Set(a + "expert_feed_forward_length", Value::U32(s.n_ff_exp));
    w.Set(a + "expert_shared_feed_forward_length", Value::U32(s.n_ff_shexp));
  }
  AddSyntheticVocab(s.n_vocab, w);

  return WriteSynthetic(w, specs, opt, path);
}

}  // namespace memra::synthetic

#include "frontends/synthetic/QuantMix.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memra::synthetic {
namespace {

using formats::GgmlType;

// LLAMA_FTYPE_* (llama.h, b10573).
enum Ftype : uint32_t {
  kAllF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ4_NL = 25,
  kIQ4_XS = 30,
  kBF16 = 32,
  kMXFP4_MOE = 38,
};

// `mxfp4` is llama-quantize --pure MXFP4_MOE: every quantizable matrix in mxfp4 (the MXFP4_MOE
// mix itself puts only 3-D expert tensors in mxfp4 and everything else in q8_0, so on a dense
// model it is `mxfp4_moe`, all q8_0).
constexpr QuantMix kMixes[] = {
    {"f32", kAllF32, GgmlType::kF32},
    {"f16", kF16, GgmlType::kF16},
    {"bf16", kBF16, GgmlType::kBF16},
    {"q8_0", kQ8_0, GgmlType::kQ8_0},
    {"q6_k", kQ6_K, GgmlType::kQ6_K},
    {"q5_k_m", kQ5_K_M, GgmlType::kQ5_K},
    {"q5_k_s", kQ5_K_S, GgmlType::kQ5_K},
    {"q4_k_m", kQ4_K_M, GgmlType::kQ4_K},
    {"q4_k_s", kQ4_K_S, GgmlType::kQ4_K},
    {"q3_k_l", kQ3_K_L, GgmlType::kQ3_K},
    {"q3_k_m", kQ3_K_M, GgmlType::kQ3_K},
    {"q3_k_s", kQ3_K_S, GgmlType::kQ3_K},
    {"q2_k", kQ2_K, GgmlType::kQ2_K},
    {"q5_1", kQ5_1, GgmlType::kQ5_1},
    {"q5_0", kQ5_0, GgmlType::kQ5_0},
    {"q4_1", kQ4_1, GgmlType::kQ4_1},
    {"q4_0", kQ4_0, GgmlType::kQ4_0},
    {"iq4_nl", kIQ4_NL, GgmlType::kIQ4_NL},
    {"iq4_xs", kIQ4_XS, GgmlType::kIQ4_XS},
    {"mxfp4", kMXFP4_MOE, GgmlType::kMXFP4, /*pure=*/true},
    {"mxfp4_moe", kMXFP4_MOE, GgmlType::kMXFP4},
};

// tensor_category of llama-quant.cpp.
enum class Category {
  kTokenEmbd,
  kAttnQ,
  kAttnV,
  kAttnK,
  kAttnQkv,
  kAttnKvB,
  kAttnOutput,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOutput,
  kOther
};

Category CategoryOf(const std::string& n) {
  auto has = [&](absl::string_view s) { return absl::StrContains(n, s); };
  if (n == "output.weight") return Category::kOutput;
  if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Category::kTokenEmbd;
  if (has("attn_qkv.weight")) return Category::kAttnQkv;
  if (has("attn_kv_b.weight")) return Category::kAttnKvB;
  if (has("attn_v.weight")) return Category::kAttnV;
  if (has("attn_k.weight")) return Category::kAttnK;
  if (has("attn_q.weight")) return Category::kAttnQ;
  if (has("attn_output.weight")) return Category::kAttnOutput;
  if (has("ffn_up")) return Category::kFfnUp;
  if (has("ffn_gate")) return Category::kFfnGate;
  if (has("ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

// attn_v-like tensors (attn_v, attn_qkv, attn_kv_b) share one position counter.
bool IsAttnVLike(Category c) { return c == Category::kAttnV || c == Category::kAttnQkv || c == Category::kAttnKvB; }

// ggml_n_dims: 1 + the index of the last dimension larger than 1.
int NDims(const std::vector<int64_t>& ne) {
  for (int i = static_cast<int>(ne.size()) - 1; i >= 1; --i)
    if (ne[i] > 1) return i + 1;
  return 1;
}

// tensor_allows_quantization (without the options llama-quantize leaves off).
bool AllowsQuantization(const MixTensor& t) {
  if (NDims(t.ne) < 2) return false;
  const std::string& n = t.name;
  bool q = absl::EndsWith(n, "weight");
  for (absl::string_view never : {"_norm.weight",
                                  "ffn_gate_inp.weight",
                                  "ffn_gate_tid2eid.weight",
                                  "altup",
                                  "laurel",
                                  "per_layer_model_proj",
                                  "ssm_conv1d",
                                  "shortconv.conv.weight",
                                  "indexer.k_proj.weight",
                                  "indexer.q_proj.weight",
                                  "time_mix_first.weight",
                                  "time_mix_w0.weight",
                                  "time_mix_w1.weight",
                                  "time_mix_w2.weight",
                                  "time_mix_v0.weight",
                                  "time_mix_v1.weight",
                                  "time_mix_v2.weight",
                                  "time_mix_a0.weight",
                                  "time_mix_a1.weight",
                                  "time_mix_a2.weight",
                                  "time_mix_g1.weight",
                                  "time_mix_g2.weight",
                                  "time_mix_decay_w1.weight",
                                  "time_mix_decay_w2.weight",
                                  "time_mix_lerp_fused.weight",
                                  "attn_rel_b.weight",
                                  ".position_embd",
                                  "sam.pos_embd",
                                  "sam.neck.",
                                  "sam.net_",
                                  ".rel_pos",
                                  ".patch_embd",
                                  ".patch_merger",
                                  "a.rvq.codebook",
                                  "mm.a.code_embd"})
    q = q && !absl::StrContains(n, never);
  q = q && n != "position_embd.weight" && n != "token_types.weight";
  return q;
}

int LayerOf(const std::string& name) {  // weight_name_comparer: sscanf "blk.%d.", -1 otherwise
  int il = -1;
  std::sscanf(name.c_str(), "blk.%d.", &il);
  return il;
}

bool UseMoreBits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

uint32_t BlockElems(GgmlType t) { return formats::TraitsOf(t).block_elems; }

struct State {
  int n_attention_wv = 0, i_attention_wv = 0;
  int n_ffn_down = 0, i_ffn_down = 0;
  bool tied = false;
  uint32_t n_gqa = 0;
  uint32_t n_expert = 0;
};

// llama_tensor_get_type_impl for a model that is not falcon, not 70B, no imatrix. The branches for
// the IQ1/IQ2/IQ3 file types are left out (memra offers none of them). With experts (n_expert > 1)
// ffn_down (routed and shared) takes its layer from its name, and the 8-expert rules apply.
GgmlType MixRule(State& qs, GgmlType t, const MixTensor& tensor, uint32_t ftype, Category cat) {
  if (cat == Category::kOutput || (qs.tied && cat == Category::kTokenEmbd)) {
    if (ftype == kMXFP4_MOE || tensor.ne[0] % BlockElems(t) != 0) return GgmlType::kQ8_0;
    return t != GgmlType::kQ8_0 ? GgmlType::kQ6_K : t;
  }
  if (ftype == kMXFP4_MOE) {  // experts (3-D) in mxfp4, all else q8_0
    return tensor.ne.size() > 2 && tensor.ne[2] > 1 ? GgmlType::kMXFP4 : GgmlType::kQ8_0;
  }
  if (cat == Category::kTokenEmbd) return t;  // only IQ1/IQ2/IQ3 rules
  if (IsAttnVLike(cat)) {
    // (attn_qkv is attn_v-like: the later ATTENTION_QKV branch of llama-quant.cpp is never reached.)
    if (ftype == kQ2_K)
      t = qs.n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    else if (ftype == kQ3_K_M)
      t = qs.i_attention_wv < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    else if (ftype == kQ3_K_L)
      t = GgmlType::kQ5_K;
    else if ((ftype == kIQ4_NL || ftype == kIQ4_XS) && qs.n_gqa >= 4)
      t = GgmlType::kQ5_K;
    else if ((ftype == kQ4_K_M || ftype == kQ5_K_M) && UseMoreBits(qs.i_attention_wv, qs.n_attention_wv))
      t = GgmlType::kQ6_K;
    else if (ftype == kQ4_K_S && qs.i_attention_wv < 4)
      t = GgmlType::kQ5_K;
    if (qs.n_expert == 8) t = GgmlType::kQ8_0;  // "for the 8-expert model, bumping this to Q8_0"
    ++qs.i_attention_wv;
    return t;
  }
  if (cat == Category::kAttnK && qs.n_expert == 8) return GgmlType::kQ8_0;
  if (cat == Category::kFfnDown) {
    // Without experts the layer is the position among the ffn_down tensors, of n_layer; with
    // experts (layer_info) the layer in the tensor's name.
    const int i_layer = qs.n_expert > 1 ? LayerOf(tensor.name) : qs.i_ffn_down, n_layer = qs.n_ffn_down;
    if (ftype == kQ2_K)
      t = GgmlType::kQ3_K;
    else if (ftype == kQ3_K_M)
      t = i_layer < n_layer / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    else if (ftype == kQ3_K_L)
      t = GgmlType::kQ5_K;
    else if (ftype == kQ4_K_M) {
      if (UseMoreBits(i_layer, n_layer)) t = GgmlType::kQ6_K;
    } else if (i_layer < n_layer / 8 && (ftype == kIQ4_NL || ftype == kIQ4_XS))
      t = GgmlType::kQ5_K;
    else if (ftype == kQ5_K_M && UseMoreBits(i_layer, n_layer))
      t = GgmlType::kQ6_K;
    else if (ftype == kQ4_K_S && i_layer < n_layer / 8)
      t = GgmlType::kQ5_K;
    ++qs.i_ffn_down;
    return t;
  }
  if (cat == Category::kAttnOutput && qs.n_expert == 8) {
    for (uint32_t f : {kQ2_K, kQ3_K_S, kQ3_K_M, kQ4_K_S, kQ4_K_M, kIQ4_XS})
      if (ftype == f) return GgmlType::kQ5_K;
    return t;
  }
  if (cat == Category::kAttnOutput) {
    if (ftype == kQ2_K) return GgmlType::kQ3_K;
    if (ftype == kQ3_K_M) return GgmlType::kQ4_K;
    if (ftype == kQ3_K_L) return GgmlType::kQ5_K;
  }
  return t;  // attn_q, attn_k, ffn_gate, ffn_up: only IQ3 rules; other tensors: the base type
}

}  // namespace

absl::StatusOr<GgmlType> FallbackType(GgmlType t, int64_t ncols) {
  if (ncols % BlockElems(t) == 0) return t;
  GgmlType r;
  switch (t) {
    case GgmlType::kIQ4_XS:
      r = GgmlType::kIQ4_NL;
      break;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      r = GgmlType::kQ4_0;
      break;
    case GgmlType::kQ4_K:
      r = GgmlType::kQ5_0;
      break;
    case GgmlType::kQ5_K:
      r = GgmlType::kQ5_1;
      break;
    case GgmlType::kQ6_K:
      r = GgmlType::kQ8_0;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("row length ", ncols, " is not a multiple of ", BlockElems(t),
                                                     " and no fallback is defined for ", formats::GgmlTypeName(t)));
  }
  return ncols % BlockElems(r) == 0 ? r : GgmlType::kF16;
}

namespace {

// tensor_type_fallback for one tensor (its row length ne[0]); the error names the tensor.
absl::StatusOr<GgmlType> Fallback(const MixTensor& tensor, GgmlType t) {
  absl::StatusOr<GgmlType> r = FallbackType(t, tensor.ne[0]);
  if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat(tensor.name, ": ", r.status().message()));
  return r;
}

}  // namespace

std::vector<std::string> QuantMixNames() {
  std::vector<std::string> v;
  for (const QuantMix& m : kMixes) v.emplace_back(m.name);
  return v;
}

absl::StatusOr<QuantMix> LookupQuantMix(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const QuantMix& m : kMixes)
    if (m.name == lower) return m;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown weight dtype '", name, "' (known: ", absl::StrJoin(QuantMixNames(), ", "), ")"));
}

absl::StatusOr<std::vector<GgmlType>> AssignMixTypes(const QuantMix& mix, const MixModel& model,
                                                     absl::Span<const MixTensor> tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = LayerOf(tensors[a].name), lb = LayerOf(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  State qs;
  qs.tied = true;  // until output.weight shows up
  qs.n_gqa = model.n_gqa;
  qs.n_expert = model.n_expert;
  qs.n_ffn_down = static_cast<int>(model.n_layer);
  for (const MixTensor& t : tensors) {
    const Category c = CategoryOf(t.name);
    if (IsAttnVLike(c)) ++qs.n_attention_wv;
    if (c == Category::kOutput) qs.tied = false;
  }
  const bool quantized = formats::TraitsOf(mix.base_type).quantized;
  std::vector<GgmlType> out(tensors.size());
  for (size_t i : order) {
    const MixTensor& t = tensors[i];
    if (!AllowsQuantization(t)) {
      out[i] = t.source_type;
      continue;
    }
    GgmlType type = mix.base_type;
    if (quantized) {
      if (!mix.pure) type = MixRule(qs, type, t, mix.file_type, CategoryOf(t.name));
      auto fb = Fallback(t, type);
      if (!fb.ok()) return fb.status();
      type = *fb;
    }
    out[i] = type;
  }
  return out;
}

}  // namespace memra::synthetic

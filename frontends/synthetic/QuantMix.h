// llama.cpp's tensor-type mixes ("Q4_K_M keeps attn_v and ffn_down of some layers in q6_K, ..."):
// which ggml type each tensor of a model gets when `llama-quantize` writes a given file type.
// A port of llama_tensor_get_type / tensor_type_fallback / tensor_allows_quantization of
// llama.cpp b10573 (src/llama-quant.cpp, commit 3f545bec) for models without experts and without
// an imatrix, the way llama-quantize runs on a qwen35 model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/formats/GgmlType.h"

namespace memra::synthetic {

// One llama.cpp file type (LLAMA_FTYPE_*), named as `memra gen --dtype` takes it.
struct QuantMix {
  absl::string_view name;       // "q4_k_m"
  uint32_t file_type;           // LLAMA_FTYPE_MOSTLY_Q4_K_M = 15, written to general.file_type
  formats::GgmlType base_type;  // llama_ftype_get_default_type
  bool pure = false;            // llama-quantize --pure: no per-tensor rules, only the fallbacks
};

// The --dtype names, in the order `memra gen --help` lists them.
std::vector<std::string> QuantMixNames();
// The mix of a --dtype name (case-insensitive); InvalidArgument for an unknown name.
absl::StatusOr<QuantMix> LookupQuantMix(absl::string_view name);

// A tensor as llama-quantize sees it: name, ggml ne (ne[0] = row length), type in the source file.
struct MixTensor {
  std::string name;
  std::vector<int64_t> ne;
  formats::GgmlType source_type;
};

struct MixModel {
  uint32_t n_layer = 0;   // hparams.n_layer_all (no nextn layers here)
  uint32_t n_gqa = 0;     // hparams.n_gqa(0): n_head / n_head_kv of layer 0 (0 when it has no kv heads)
  uint32_t n_expert = 0;  // hparams.n_expert (0: dense). > 1: ffn_down's layer is read from its name;
                          // exactly 8 bumps attn_v / attn_k to q8_0 and attn_output to q5_K (k-quants)
};

// tensor_type_fallback: the type llama-quantize writes instead of `t` for rows of `ncols` values
// that are not a multiple of t's block (q4_K -> q5_0, q6_K -> q8_0, ...; f16 when the fallback's
// block does not divide them either); `t` itself when they are. Error when no fallback is defined.
absl::StatusOr<formats::GgmlType> FallbackType(formats::GgmlType t, int64_t ncols);

// The type llama-quantize writes for each tensor (same order as `tensors`). Tensors it does not
// quantize (1-D, norms, ssm_conv1d, names not ending in "weight") keep their source type. The
// position counters of the attn_v / ffn_down rules run over the tensors in llama.cpp's order
// (by layer, then by name), whatever the order given. Without an output.weight, token_embd is
// the tied output and gets the output's rule. Error (as llama-quantize's) when a row
// length fits neither the type nor its fallback's block size and no fallback is defined.
absl::StatusOr<std::vector<formats::GgmlType>> AssignMixTypes(const QuantMix& mix, const MixModel& model,
                                                              absl::Span<const MixTensor> tensors);

}  // namespace memra::synthetic

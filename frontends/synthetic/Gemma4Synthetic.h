// Synthetic-weight `gemma4` models (dense, MoE, E-variants with per-layer inputs and KV-sharing
// layers): every metadata key llama.cpp's gemma4 loader reads, written as its converter writes
// them, a Gemma 4-style tokenizer (Gemma4SyntheticVocab.h), and deterministic random weights
// drawn as ../shared/fixtures/README.md §9.2 draws the gemma4 fixtures' (scale-free, so the
// activations stay O(1) at any width and depth). For benchmarking the published Gemma 4 shapes
// without the weights, and for tests (preset gemma4-tiny).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/synthetic/SyntheticTensors.h"

namespace memra::synthetic {

struct Gemma4Shape {
  std::string name;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  std::vector<uint32_t> n_ff;  // per layer (the converter writes an array only when they differ)
  uint32_t n_head_kv_swa = 0;
  uint32_t n_head_kv_full = 0;  // written as a per-layer array when it differs from the SWA count
  uint32_t head_dim_swa = 256;
  uint32_t head_dim_full = 512;
  double partial_rotary_full = 0.25;  // rotated fraction of the full layers' head (rope_freqs)
  float rope_base_swa = 1e4f;
  float rope_base_full = 1e6f;
  uint32_t n_swa = 0;     // sliding window
  std::vector<bool> swa;  // per layer, true = sliding window
  uint32_t shared_kv_layers = 0;
  uint32_t n_embd_per_layer = 0;  // per-layer input width (E-variants), 0 = none
  bool k_eq_v = false;            // full layers have no attn_v (V = the K projection)
  float softcap = 30.0f;
  float rms_eps = 1e-6f;
  uint32_t context_length = 0;
  uint32_t n_vocab = 262144;
  // MoE: every layer has the dense MLP (n_ff) beside n_expert routed GELU experts of n_ff_exp.
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;

  bool moe() const { return n_expert > 0; }
  uint32_t FirstSharedLayer() const { return n_layer - shared_kv_layers; }
  bool HasKv(uint32_t il) const { return il < FirstSharedLayer(); }
  uint32_t HeadDim(uint32_t il) const { return swa[il] ? head_dim_swa : head_dim_full; }
  uint32_t HeadKv(uint32_t il) const { return swa[il] ? n_head_kv_swa : n_head_kv_full; }
};

// gemma4-31b, gemma4-26b-a4b, gemma4-e4b, gemma4-e2b (the published configs), gemma4-tiny (the
// shapes of ../shared/fixtures' gemma4-tiny with a Gemma vocabulary of 2048 tokens).
absl::StatusOr<Gemma4Shape> Gemma4Preset(absl::string_view name);
std::vector<std::string> Gemma4PresetNames();

absl::StatusOr<std::vector<SyntheticTensorType>> Gemma4TensorTypes(const Gemma4Shape& shape, absl::string_view dtype);

// Writes the model to `path` streaming, one tensor at a time.
absl::StatusOr<SyntheticStats> WriteSyntheticGemma4(const Gemma4Shape& shape, const SyntheticOptions& options,
                                                    const std::string& path);

}  // namespace memra::synthetic

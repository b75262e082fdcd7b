// Synthetic-weight `step35` models (Step 3.5: sliding-window and full attention layers of different
// head counts with a head-wise output gate, leading dense layers then sigmoid-routed MoE layers
// with a selection bias, a shared expert and per-layer SwiGLU clamps): every metadata key
// llama.cpp's step35 loader reads, written as its converter (conversion/step3.py) writes them, a
// byte-level BPE vocabulary, and deterministic random weights drawn as ../shared/fixtures/README.md
// §10.1 draws the step35 fixtures'. For benchmarking Step 3.5 Flash's shapes without the weights,
// and for tests (preset step35-tiny). The MTP blocks (nextn) are not written: llama.cpp's converter
// leaves them out with --no-mtp, and nothing runs them yet.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/synthetic/SyntheticTensors.h"

namespace memra::synthetic {

struct Step35Shape {
  std::string name;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t head_dim = 0;
  uint32_t n_head_full = 0, n_head_kv_full = 0;  // full-attention layers (num_attention_heads / groups)
  uint32_t n_head_swa = 0, n_head_kv_swa = 0;    // sliding layers (attention_other_setting)
  std::vector<bool> swa;                         // per layer, true = sliding window
  uint32_t n_swa = 0;                            // sliding window
  float rope_base_full = 5e6f;                   // full layers rotate head_dim / 2 dims
  float rope_base_swa = 1e4f;                    // sliding layers rotate the whole head
  // Llama-3 RoPE scaling of the full layers (rope_freqs.weight), factor 0 = none.
  double rope_llama3_factor = 0, rope_llama3_low = 1, rope_llama3_high = 4;
  uint32_t rope_llama3_original_ctx = 0;
  uint32_t n_dense_lead = 0;  // leading dense layers (moe_layers_enum starts here)
  uint32_t n_ff = 0;          // the dense layers' SwiGLU FFN
  uint32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
  float expert_weights_scale = 1.0f;  // moe_router_scaling_factor
  bool expert_weights_norm = true;    // norm_expert_weight
  std::vector<float> clamp_exp;       // swiglu_limits per layer (0 = off)
  std::vector<float> clamp_shexp;     // swiglu_limits_shared per layer
  float rms_eps = 1e-5f;
  uint32_t context_length = 0;
  uint32_t n_vocab = 0;

  bool IsMoe(uint32_t il) const { return il >= n_dense_lead; }
  uint32_t Heads(uint32_t il) const { return swa[il] ? n_head_swa : n_head_full; }
  uint32_t HeadsKv(uint32_t il) const { return swa[il] ? n_head_kv_swa : n_head_kv_full; }
};

// step35-flash (the published config), step35-flash-8l (the same layer pattern, head geometry,
// router and experts in 8 layers: ~25 B parameters, ~15 GB at q4_k_m, one H200), step35-tiny (the
// shapes of ../shared/fixtures' step35-tiny, a chat vocabulary of 1024 tokens).
absl::StatusOr<Step35Shape> Step35Preset(absl::string_view name);
std::vector<std::string> Step35PresetNames();

absl::StatusOr<std::vector<SyntheticTensorType>> Step35TensorTypes(const Step35Shape& shape, absl::string_view dtype);

// Writes the model to `path` streaming, one tensor at a time.
absl::StatusOr<SyntheticStats> WriteSyntheticStep35(const Step35Shape& shape, const SyntheticOptions& options,
                                                    const std::string& path);

}  // namespace memra::synthetic

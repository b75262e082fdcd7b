// Synthetic-weight `qwen35` (dense) and `qwen35moe` models: every metadata key llama.cpp's loader of
// the family reads, a tokenizer, and deterministic random weights drawn so activations stay O(1)
// across layers.
// Used for tests (preset `tiny`) and for benchmarking the real Qwen3.5 shapes without the weights.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/synthetic/SyntheticTensors.h"
#include "kernels/formats/GgmlType.h"

namespace memra::synthetic {

struct Qwen35Shape {
  std::string name;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t n_rot = 0;
  std::array<int32_t, 4> rope_sections{};
  float rope_freq_base = 1e7f;
  float rms_eps = 1e-6f;
  uint32_t context_length = 0;
  uint32_t full_attention_interval = 4;
  uint32_t ssm_d_conv = 4;
  uint32_t ssm_d_state = 0;    // head dim of linear-attention keys and values
  uint32_t ssm_n_k_heads = 0;  // ssm.group_count
  uint32_t ssm_n_v_heads = 0;  // ssm.time_step_rank
  uint32_t n_ff = 0;
  uint32_t n_vocab = 0;
  bool tied_output = false;
  // MoE (qwen35moe) when n_expert > 0: every layer's FFN is n_expert routed SwiGLU experts of
  // n_ff_exp (top n_expert_used, softmax routed) plus a shared expert of n_ff_shexp with its sigmoid
  // gate; n_ff is written as feed_forward_length but unused.
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;
  uint32_t n_ff_shexp = 0;

  bool moe() const { return n_expert > 0; }
  std::string arch() const { return moe() ? "qwen35moe" : "qwen35"; }

  uint32_t d_inner() const { return ssm_d_state * ssm_n_v_heads; }
  bool IsAttentionLayer(uint32_t il) const { return (il + 1) % full_attention_interval == 0; }
};

// Preset names: tiny, 0.8b, 2b, 4b, 9b, 27b (qwen35); moe-tiny, 35b-a3b (qwen35moe).
absl::StatusOr<Qwen35Shape> Qwen35Preset(absl::string_view name);
std::vector<std::string> Qwen35PresetNames();

absl::StatusOr<std::vector<SyntheticTensorType>> Qwen35TensorTypes(const Qwen35Shape& shape, absl::string_view dtype);

// Writes the model to `path` streaming, one tensor at a time.
absl::StatusOr<SyntheticStats> WriteSyntheticQwen35(const Qwen35Shape& shape, const SyntheticOptions& options,
                                                    const std::string& path);

}  // namespace memra::synthetic

// Hyperparameters of a `gemma4` GGUF (Gemma 4: sliding-window and full attention layers, GELU FFN,
// KV sharing across the last layers, a final logit soft cap), read as llama.cpp's gemma4 loader
// reads them (keys `gemma4.*`), per layer where the file has arrays, and checked for consistency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/Attribute.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct Gemma4Hparams {
  int64_t n_ctx_train = 0;         // context_length
  int64_t n_embd = 0;              // embedding_length
  int64_t n_layer = 0;             // block_count
  std::vector<int64_t> n_ff;       // feed_forward_length (u32 or per layer)
  std::vector<int64_t> n_head;     // attention.head_count (u32 or per layer)
  std::vector<int64_t> n_head_kv;  // attention.head_count_kv (u32 or per layer; default n_head)
  int64_t head_dim = 0;            // attention.key_length == value_length (full layers)
  int64_t head_dim_swa = 0;        // attention.key_length_swa == value_length_swa
  int64_t n_rot = 0;               // rope.dimension_count (full layers)
  int64_t n_rot_swa = 0;           // rope.dimension_count_swa (default n_rot)
  double rope_base = 10000.0;      // rope.freq_base
  double rope_base_swa = 10000.0;  // rope.freq_base_swa (default rope_base)
  double rms_eps = 0;              // attention.layer_norm_rms_epsilon
  int64_t n_swa = 0;               // attention.sliding_window
  std::vector<bool> swa;           // attention.sliding_window_pattern, per layer
  int64_t shared_kv_layers = 0;    // attention.shared_kv_layers: the last ones reuse earlier K/V
  int64_t n_embd_per_layer = 0;    // embedding_length_per_layer_input (E-variants)
  double softcap = 0;              // final_logit_softcapping (0: none)
  int64_t n_vocab = 0;             // rows of token_embd.weight
  bool tied_output = false;        // output.weight absent
  bool moe = false;                // some layer has ffn_gate_inp (the MoE variant)
  std::vector<bool> moe_layer;     // per layer: ffn_gate_inp present (a dense MLP beside routed experts)
  int64_t n_expert = 0;            // expert_count (MoE)
  int64_t n_expert_used = 0;       // expert_used_count (MoE)
  int64_t n_ff_exp = 0;            // expert_feed_forward_length (MoE)

  bool IsSwa(int64_t il) const { return swa[il]; }
  int64_t HeadDim(int64_t il) const { return swa[il] ? head_dim_swa : head_dim; }
  int64_t Rot(int64_t il) const { return swa[il] ? n_rot_swa : n_rot; }
  double RopeBase(int64_t il) const { return swa[il] ? rope_base_swa : rope_base; }
  // The first layer whose K/V come from an earlier one (n_layer - shared_kv_layers).
  int64_t FirstSharedLayer() const { return n_layer - shared_kv_layers; }
  // The layer whose KV cache layer il attends: itself, or (a shared layer) the last layer before
  // the shared ones of the same kind (llama.cpp's n_layer_kv_from_start - 2 for SWA, - 1 full).
  int64_t KvLayer(int64_t il) const {
    const int64_t first = FirstSharedLayer();
    if (il < first) return il;
    return swa[il] ? first - 2 : first - 1;
  }
};

// Reads and validates the hyperparameters (vocabulary size, tied head and MoE from the tensor
// table). A missing required key is NotFound, a wrong type or inconsistent value InvalidArgument,
// each naming the key.
absl::StatusOr<Gemma4Hparams> ReadGemma4Hparams(const gguf::GgufFile& file);
ir::AttrDict Gemma4Attributes(const Gemma4Hparams& h);
absl::StatusOr<ir::AttrDict> ReadGemma4Attributes(const gguf::GgufFile& file);

}  // namespace memra::frontends

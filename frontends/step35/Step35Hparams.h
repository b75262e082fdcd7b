// Hyperparameters of a `step35` GGUF (Step 3.5: sliding-window and full attention layers of
// different widths with a head-wise output gate, leading dense layers then sigmoid-routed MoE
// layers with SwiGLU clamps), read as llama.cpp's step35 loader reads them (keys `step35.*`, per
// layer where the file has arrays) and checked for consistency before anything is lowered.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/Attribute.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct Step35Hparams {
  int64_t n_ctx_train = 0;           // context_length
  int64_t n_embd = 0;                // embedding_length
  int64_t n_layer = 0;               // block_count - nextn_predict_layers (the trunk)
  int64_t n_layer_nextn = 0;         // nextn_predict_layers: MTP blocks after the trunk (kept, not run)
  std::vector<int64_t> n_ff;         // feed_forward_length (u32 or per layer): the dense layers' FFN
  std::vector<int64_t> n_head;       // attention.head_count, per layer
  std::vector<int64_t> n_head_kv;    // attention.head_count_kv, per layer (default n_head)
  int64_t head_dim = 0;              // attention.key_length == value_length
  int64_t n_rot = 0;                 // rope.dimension_count: full layers rotate n_rot / 2 (llama.cpp)
  int64_t n_rot_swa = 0;             // rope.dimension_count_swa (default n_rot): sliding layers
  double rope_base = 10000.0;        // rope.freq_base (full layers)
  double rope_base_swa = 10000.0;    // rope.freq_base_swa (default rope_base)
  double rms_eps = 0;                // attention.layer_norm_rms_epsilon
  int64_t n_swa = 0;                 // attention.sliding_window
  std::vector<bool> swa;             // attention.sliding_window_pattern, per layer
  int64_t n_vocab = 0;               // rows of token_embd.weight
  bool tied_output = false;          // output.weight absent
  std::vector<bool> moe_layer;       // per layer: ffn_gate_inp present (else the dense SwiGLU FFN)
  std::vector<bool> gated_layer;     // per layer: attn_gate present (the head-wise output gate)
  int64_t n_expert = 0;              // expert_count
  int64_t n_expert_used = 0;         // expert_used_count
  int64_t n_ff_exp = 0;              // expert_feed_forward_length (required, as llama.cpp)
  int64_t n_ff_shexp = 0;            // expert_shared_feed_forward_length (0: no shared expert)
  int64_t gating = 2;                // expert_gating_func: 1 softmax, 2 sigmoid (Step's default)
  double expert_weights_scale = 0;   // expert_weights_scale (0: no scaling, as llama.cpp)
  bool expert_weights_norm = false;  // expert_weights_norm: the chosen weights renormalized
  std::vector<double> clamp_exp;     // swiglu_clamp_exp per layer (0: off): up in [-L, L], silu(gate) <= L
  std::vector<double> clamp_shexp;   // swiglu_clamp_shexp per layer, the shared expert's

  bool IsSwa(int64_t il) const { return swa[il]; }
  // Rotated dims: sliding layers n_rot_swa, full layers half of rope.dimension_count.
  int64_t Rot(int64_t il) const { return swa[il] ? n_rot_swa : n_rot / 2; }
  double RopeBase(int64_t il) const { return swa[il] ? rope_base_swa : rope_base; }
};

// Reads and validates the hyperparameters (vocabulary, tied head, dense / MoE layers and the
// head-wise gate from the tensor table). A missing required key is NotFound, a wrong type or an
// inconsistent value InvalidArgument, each naming the key (and the layer).
absl::StatusOr<Step35Hparams> ReadStep35Hparams(const gguf::GgufFile& file);
ir::AttrDict Step35Attributes(const Step35Hparams& h);
absl::StatusOr<ir::AttrDict> ReadStep35Attributes(const gguf::GgufFile& file);

}  // namespace memra::frontends

// Hyperparameters of a `qwen35` (Qwen3.5 dense hybrid) GGUF, read as llama.cpp's qwen35 loader
// reads them (keys `qwen35.*`; defaults where llama.cpp has one), and checked for consistency.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Attribute.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct Qwen35Hparams {
  std::string arch = "qwen35";
  int64_t n_ctx_train = 0;                 // context_length
  int64_t n_embd = 0;                      // embedding_length
  int64_t n_layer_all = 0;                 // block_count (trunk + MTP layers)
  int64_t n_nextn = 0;                     // nextn_predict_layers (MTP blocks, not run)
  int64_t n_layer = 0;                     // trunk layers = n_layer_all - n_nextn
  int64_t n_ff = 0;                        // feed_forward_length
  int64_t n_head = 0;                      // attention.head_count
  int64_t n_head_kv = 0;                   // attention.head_count_kv (default n_head)
  int64_t head_dim = 0;                    // attention.key_length == value_length (default n_embd / n_head)
  int64_t n_rot = 0;                       // rope.dimension_count (default head_dim)
  double rope_base = 10000.0;              // rope.freq_base
  std::array<int64_t, 4> rope_sections{};  // rope.dimension_sections (IMROPE)
  double rms_eps = 0;                      // attention.layer_norm_rms_epsilon (also the GDN L2-norm eps)
  int64_t d_conv = 0;                      // ssm.conv_kernel
  int64_t d_state = 0;                     // ssm.state_size (= linear k and v head dim)
  int64_t n_k_heads = 0;                   // ssm.group_count
  int64_t n_v_heads = 0;                   // ssm.time_step_rank
  int64_t d_inner = 0;                     // ssm.inner_size = d_state * n_v_heads
  int64_t full_attention_interval = 4;
  std::vector<bool> recurrent;  // per trunk layer: Gated DeltaNet (true) or full attention
  int64_t n_vocab = 0;          // rows of token_embd.weight
  bool tied_output = false;     // output.weight absent: the head reuses token_embd.weight

  bool IsRecurrent(int64_t il) const { return recurrent[il]; }
  int64_t KeyDim() const { return d_state * n_k_heads; }
  int64_t ConvDim() const { return 2 * KeyDim() + d_inner; }
};

// Reads and validates the hyperparameters (and the vocabulary size / tied head from the tensor
// table). Errors name the key: a missing required key is NotFound, a wrong type or an
// inconsistent value InvalidArgument, a feature memra does not implement Unimplemented.
// `general.architecture` other than qwen35 is InvalidArgument (the registry,
// frontends/ModelFamily.h, picks the family and words the unsupported-architecture errors).
absl::StatusOr<Qwen35Hparams> ReadQwen35Hparams(const gguf::GgufFile& file);
// The same for any Qwen3.5 hybrid family (qwen35, qwen35moe: keys `<expected_arch>.*`): the trunk's
// hyperparameters, which both share. `general.architecture` other than expected_arch is
// InvalidArgument.
absl::StatusOr<Qwen35Hparams> ReadQwen35TrunkHparams(const gguf::GgufFile& file, absl::string_view expected_arch);

// The hyperparameters as module attributes (arch, n_embd, n_layer, ..., recurrent_layers,
// n_vocab, tied_output): what the lowered module records besides its options (n_ctx,
// prefill_logits).
ir::AttrDict Qwen35Attributes(const Qwen35Hparams& h);
// ReadQwen35Hparams + Qwen35Attributes: the qwen35 family's hyperparameter reader.
absl::StatusOr<ir::AttrDict> ReadQwen35Attributes(const gguf::GgufFile& file);

}  // namespace memra::frontends

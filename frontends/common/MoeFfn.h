// The MoE FFN of a layer with a gated shared expert, as llama.cpp's build_moe_ffn (softmax gating,
// top-k, weights renormalized over the k chosen, SwiGLU experts) plus the qwen35moe / qwen3next
// shared expert gated by sigmoid(ffn_gate_inp_shexp · y):
//
//   ffn_moe_logits-N          = y · ffn_gate_inp            matmul       [T, E]
//   ffn_moe_weights_norm-N,
//   ffn_moe_topk-N            = route(logits, k)             moe_route    [T, k] f32, i32
//   ffn_moe_out-N             = Σ_i w_i expert_{id_i}(y)     moe_experts  [T, n_embd]
//   ffn_shexp-N               = down_shexp · swiglu(gate_shexp · y, up_shexp · y)
//   shared_expert_gate-N      = y · ffn_gate_inp_shexp       matmul       [T, 1]
//   ffn_out-N                 = moe + ffn_shexp · sigmoid(gate)   gated_add
//
// (fuse-moe-ffn later folds the last five into one moe_ffn op.) Tensors, ggml ne: ffn_gate_inp
// {n_embd, E}; ffn_gate_exps / ffn_up_exps {n_embd, F, E} or the fused ffn_gate_up_exps
// {n_embd, 2F, E}; ffn_down_exps {F, n_embd, E}; ffn_gate_shexp / ffn_up_shexp {n_embd, Fs};
// ffn_down_shexp {Fs, n_embd}; ffn_gate_inp_shexp {n_embd} (declared as the matrix [1, n_embd]).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "frontends/common/LayerContext.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct MoeFfnParams {
  int64_t n_expert = 0;       // E
  int64_t n_expert_used = 0;  // k
  int64_t n_ff_exp = 0;       // F
  int64_t n_ff_shexp = 0;     // Fs
  // The metadata keys the values come from, for errors ("qwen35moe.expert_count", ...).
  std::string key_expert_count, key_ff_exp, key_ff_shexp;
};

// Declares the layer's MoE tensors (the fused gate_up form when blk.N.ffn_gate_up_exps exists,
// else the separate gate and up experts). Errors name the tensor and, for a shape that disagrees
// with the metadata, the keys it was expected from; a missing shared expert or its gate is
// NotFound naming the tensor; fused and separate gate/up experts together are refused.
absl::Status DeclareMoeFfn(const gguf::GgufFile& file, ir::Module& m, int64_t layer, int64_t n_embd,
                           const MoeFfnParams& p);
ir::Value* BuildMoeFfn(const LayerContext& c, ir::Value* y, const MoeFfnParams& p);

}  // namespace memra::frontends

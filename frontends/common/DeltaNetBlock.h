// The Gated DeltaNet (linear attention) block of Qwen3.5 / qwen35moe, as llama.cpp reads it:
//
//   qkv = attn_qkv · h, z = attn_gate · h, beta/alpha = ssm_beta/ssm_alpha · h
//   (beta, g) = delta_net_gates(beta, alpha, ssm_dt.bias, ssm_a)
//   c = silu(conv1d_causal(qkv, ssm_conv1d, conv ring)) split into q, k [T, Hk, Ds], v [T, Hv, Ds]
//   o = gated_delta_scan(l2_norm(q), l2_norm(k), v, g, beta, delta state, 1/sqrt(Ds))
//   out = ssm_out · gated_rms_norm(o, z, ssm_norm)         h [T, n_embd] -> [T, n_embd]
//
// Tensors blk.N.{attn_qkv, attn_gate, ssm_conv1d, ssm_beta, ssm_alpha, ssm_norm, ssm_out}.weight,
// blk.N.ssm_dt.bias, blk.N.ssm_a; states blk.N.conv_state (conv, [conv_dim, d_conv-1]) and
// blk.N.delta_state (delta, [Hv, Ds, Ds]), attribute layer = N. Nodes carry llama.cpp's names
// (qkv_mixed-N, z-N, beta-N, alpha-N, beta_sigmoid-N, gate-N, conv_output-N, ...).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "frontends/common/LayerContext.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct DeltaNetParams {
  int64_t n_k_heads = 0;  // Hk (ssm.group_count)
  int64_t n_v_heads = 0;  // Hv (ssm.time_step_rank), a multiple of Hk
  int64_t d_state = 0;    // Ds: key and value head dim (ssm.state_size)
  int64_t d_conv = 0;     // conv kernel (ssm.conv_kernel)
  double eps = 0;         // of the q/k L2 norms and the gated norm

  int64_t KeyDim() const { return d_state * n_k_heads; }
  int64_t ValueDim() const { return d_state * n_v_heads; }  // ssm.inner_size
  int64_t ConvDim() const { return 2 * KeyDim() + ValueDim(); }
};

absl::Status DeclareDeltaNetWeights(const gguf::GgufFile& file, ir::Module& m, int64_t layer, int64_t n_embd,
                                    const DeltaNetParams& p);
// Adds blk.N.conv_state and blk.N.delta_state.
// slots > 0: one conv ring and delta state per slot ([S, ...], a module lowered with slots).
void DeclareDeltaNetState(ir::Module& m, int64_t layer, const DeltaNetParams& p, int64_t slots = 0);
// h: the normed input [T, n_embd]. Updates the layer's conv ring and delta state.
ir::Value* BuildGatedDeltaNet(const LayerContext& c, ir::Value* h, const DeltaNetParams& p);

}  // namespace memra::frontends

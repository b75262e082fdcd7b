// Gated DeltaNet (qwen35 linear-attention layer) kernels: the causal depthwise conv with its
// carried state, the gates, and the exact sequential gated delta-rule scan.
#pragma once

#include <cstdint>

#include "kernels/cpu/ThreadPool.h"

namespace memra::kernels::cpu {

// Causal depthwise conv over time, then (apply_silu) SiLU, as llama.cpp's ssm_conv + silu.
//   x      [T][channels]          pre-conv inputs (the fused qkv projection)
//   weight [channels][d_conv]     ssm_conv1d.weight (ne {d_conv, channels}), no bias
//   state  [channels][d_conv-1]   in: the d_conv-1 inputs preceding x (oldest first, zeros for a
//                                 fresh sequence); out: the last d_conv-1 inputs of
//                                 concat(state, x) — the fixture's conv_state_update layout,
//                                 element ch*(d_conv-1) + i.
//   out    [T][channels]          out[t][ch] = act(Σ_{i<d_conv} weight[ch][i] · ext[t+i][ch]),
//                                 ext = concat(state, x) along time.
// out must not overlap x or state. Threads split the channels.
void Conv1dCausal(const float* x, int64_t T, int64_t channels, const float* weight, int64_t d_conv, float* state,
                  float* out, bool apply_silu = true, ThreadPool* pool = nullptr);

// Delta-net gates per (token, value head), all [T][n_v_heads]:
//   beta[t][h] = sigmoid(b[t][h])
//   g[t][h]    = ssm_a[h] · softplus(alpha[t][h] + dt_bias[h])   (log-decay; ssm_a = -exp(A_log))
void DeltaNetGates(const float* b, const float* alpha, int64_t T, int64_t n_v_heads, const float* dt_bias,
                   const float* ssm_a, float* beta, float* g);

// The gated delta rule, token by token, per value head h with key head kh = h % n_k_heads
// (ggml's tiled broadcast; GGUF stores v heads in that order):
//   S ← exp(g_t) · S
//   d_j = beta_t · (v_t[j] − Σ_i S[i][j] · k_t[i])
//   S[i][j] ← S[i][j] + k_t[i] · d_j
//   o_t[j] = scale · Σ_i S[i][j] · q_t[i]          (read after the update)
// with S ∈ R^{d_k × d_v}. Shapes: q, k [T][n_k_heads * d_k] (already L2-normalized),
// v [T][n_v_heads * d_v], g, beta [T][n_v_heads], out [T][n_v_heads * d_v].
// state [n_v_heads][d_v][d_k] (in/out): element h*d_v*d_k + j*d_k + i = S[i][j] — ggml's
// transposed layout, as the fixture's cache_s_l dump stores it. qwen35: scale = 1/sqrt(d_k).
// Threads split the value heads; f32 math.
void GatedDeltaScan(const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t T,
                    int64_t n_k_heads, int64_t n_v_heads, int64_t d_k, int64_t d_v, float scale, float* state,
                    float* out, ThreadPool* pool = nullptr);

}  // namespace memra::kernels::cpu

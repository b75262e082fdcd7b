// The gated delta rule in chunked (WY) form: the algorithm of the tensor-core prefill kernel that
// issue 17 puts on the GPU, here in plain f32 loops as its reference and as the place its
// numerics are studied (docs/design/chunked-delta-rule.md). Same inputs, layout and result as
// GatedDeltaScan (kernels/cpu/DeltaNet.h), up to rounding.
//
// Per value head, a chunk of n <= C tokens from state S0 (S[i][j], i < d_k, j < d_v), with
// gamma_t = g_1 + ... + g_t (cumulative log decay inside the chunk):
//   A[t][s] = beta_t exp(gamma_t - gamma_s) (k_t . k_s)             s < t (strictly lower)
//   (I + A) U = B,   B_t = beta_t (v_t - exp(gamma_t) S0^T k_t)       (forward substitution)
//   o_t = scale (exp(gamma_t) S0^T q_t + sum_{s<=t} exp(gamma_t - gamma_s) (q_t . k_s) u_s)
//   S_n = exp(gamma_n) S0 + sum_s exp(gamma_n - gamma_s) k_s u_s^T
// which unrolls the sequential rule S <- e^g S; u = beta (v - S^T k); S <- S + k u^T exactly.
// Every exponent is <= 0 (g <= 0), so nothing overflows. Chunks start at multiples of `chunk`
// from the call's first token: a call split at a multiple of `chunk` gives the same bits as one
// call (the grid law the scheduler's prefill chunks rely on).
#pragma once

#include <cstdint>

#include "kernels/cpu/ThreadPool.h"

namespace memra::kernels::cpu {

// As GatedDeltaScan; chunk >= 1 (64 on the GPU).
void GatedDeltaScanChunked(const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t T,
                           int64_t n_k_heads, int64_t n_v_heads, int64_t d_k, int64_t d_v, float scale, float* state,
                           float* out, int64_t chunk = 64, ThreadPool* pool = nullptr);

}  // namespace memra::kernels::cpu

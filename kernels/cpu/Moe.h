// Mixture-of-experts kernels (ir/Ops.def moe_route, moe_experts, gated_add): softmax top-k routing
// with renormalized weights, and the routed SwiGLU experts with their weighted sum, reading the
// expert weights per row in their stored format (no f32 copy of the experts).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Weight.h"

namespace memra::kernels::cpu {

// Per token t of logits [T][E]: p = softmax (as Softmax), ids[t][0..k) the k largest p descending
// (ties: lower id), weights[t][i] = p[ids[t][i]] / max(sum_j p[ids[t][j]], 6.103515625e-5).
// weights and ids are [T][k]; 0 < k <= E.
// expert_scale (or null): weights[t][i] *= expert_scale[ids[t][i]] after the renormalization.
void MoeRoute(const float* logits, int64_t T, int64_t E, int64_t k, float* weights, int32_t* ids,
              const float* expert_scale = nullptr);

// Per token t of logits [T][E] (ir/Ops.def moe_route_sigmoid): p = sigmoid(logits) (as Sigmoid),
// ids[t][0..k) the k largest p + bias descending (ties: lower id; bias may be null), weights =
// p[ids]; norm: divided by max(their sum, 6.103515625e-5); then times scale unless it is 0 or 1.
void MoeRouteSigmoid(const float* logits, int64_t T, int64_t E, int64_t k, const float* bias, bool norm, float scale,
                     float* weights, int32_t* ids);

// The expert matrices of one layer, each a stack (WeightView::FromStack) of n_expert matrices.
struct MoeExpertWeights {
  int64_t n_expert = 0;  // E
  int64_t n_ff = 0;      // F
  WeightView down;       // E stacks of [K][F]: rows E*K, cols F
  WeightView gate;       // E stacks of [F][K], or of [2F][K] gate-then-up rows when `fused`
  WeightView up;         // E stacks of [F][K] (unused when fused)
  bool fused = false;
  bool gelu = false;   // GELU (tanh form) experts instead of SiLU (Gemma 4)
  float clamp = 0.0f;  // > 0: the clamped SwiGLU (Step 3.5's swiglu_clamp_exp)
  // Expert parallelism (ir/Ops.def moe_experts expert_parts): the stacks hold experts
  // [first_expert, first_expert + n_expert) of the router's n_routed; a slot selecting another
  // expert adds 0. n_routed 0: n_expert (all of them here).
  int64_t first_expert = 0;
  int64_t n_routed = 0;
};

// y[t] = sum_{i<k} weights[t][i] * down_e . (silu(gate_e . x[t]) * (up_e . x[t])), e = ids[t][i],
// products as Matmul computes them (Dot), the sum in i order in f32. x is [T][K], y [T][K] (must
// not alias x). Tokens are grouped by expert, so each selected expert's rows are decoded once
// per call; threads split the rows of the experts in use, so the result does not depend on the
// thread count. Errors: an id outside [0, E), shapes that disagree, an undecodable type.
absl::Status MoeExperts(const float* x, int64_t T, int64_t K, const float* weights, const int32_t* ids, int64_t k,
                        const MoeExpertWeights& w, float* y, ThreadPool* pool = nullptr);

// y[r][n] = a[r][n] + b[r][n] * sigmoid(g[r]) for rows x n (one gate per row).
void GatedAdd(const float* a, const float* b, const float* g, int64_t rows, int64_t n, float* y);

}  // namespace memra::kernels::cpu

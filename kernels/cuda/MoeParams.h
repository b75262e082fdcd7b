// Parameters of kernels/cuda/Moe.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// moe_route: logits [n_tok, MR_E] f32 -> weights [n_tok, MR_K] f32, ids [n_tok, MR_K] i32.
struct MoeRouteParams {
  MEMRA_DPTR(const float) logits;
  MEMRA_DPTR(float) weights;
  MEMRA_DPTR(int) ids;
  // moe_route: the per-expert output scales [E] or 0; moe_route_sigmoid: the selection bias [E] or 0.
  MEMRA_DPTR(const float) expert_scale;
  int n_tok;
  float scale;  // moe_route_sigmoid: the weights' scale (1: none)
};
MEMRA_PARAMS_SIZE(MoeRouteParams, 40);
MEMRA_PARAMS_OFFSET(MoeRouteParams, ids, 16);
MEMRA_PARAMS_OFFSET(MoeRouteParams, expert_scale, 24);
MEMRA_PARAMS_OFFSET(MoeRouteParams, n_tok, 32);

// moe_combine: y[t, c] = sum_{i < k} weights[t, i] * o[t * k + i, c] (i ascending), then, when ys
// is set, + ys[t, c] * sigmoid(x[t] . g) (g: n f32/f16/bf16 values, MC_G storage code; g null: + ys[t, c],
// moe_ffn_ungated's shared expert).
// o [n_tok * k, n], ys [n_tok, n], x [n_tok, n], y [n_tok, n], all f32. A token with an id outside
// [0, n_routed) in ids [n_tok, k] gets a NaN row (its slot's products were skipped); a choice of
// another rank's expert (expert parallelism: ids - first_expert outside [0, n_experts)) adds
// nothing (its o rows were not written). n_routed 0: n_experts (no expert parallelism).
struct MoeCombineParams {
  MEMRA_DPTR(const float) o;
  MEMRA_DPTR(const float) weights;
  MEMRA_DPTR(const float) ys;  // null: no shared expert
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(const void) g;
  MEMRA_DPTR(float) y;
  MEMRA_DPTR(const int) ids;
  int n_tok, n, k, n_experts;
  int first_expert, n_routed;
};
MEMRA_PARAMS_SIZE(MoeCombineParams, 80);
MEMRA_PARAMS_OFFSET(MoeCombineParams, y, 40);
MEMRA_PARAMS_OFFSET(MoeCombineParams, ids, 48);
MEMRA_PARAMS_OFFSET(MoeCombineParams, n_tok, 56);
MEMRA_PARAMS_OFFSET(MoeCombineParams, first_expert, 72);

// gated_add_f32: y[r, c] = a[r, c] + b[r, c] * sigmoid(g[r]) over rows x n.
struct GatedAddParams {
  MEMRA_DPTR(const float) a;
  MEMRA_DPTR(const float) b;
  MEMRA_DPTR(const float) g;
  MEMRA_DPTR(float) y;
  long long rows, n;
};
MEMRA_PARAMS_SIZE(GatedAddParams, 48);
MEMRA_PARAMS_OFFSET(GatedAddParams, y, 24);
MEMRA_PARAMS_OFFSET(GatedAddParams, rows, 32);

MEMRA_PARAMS_END

// Parameters of kernels/cuda/GemvQuant.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// One weight in its GGUF blocks (row r of the [n_rows, K] matrix at w + r * row_bytes) and its
// output y [n_tok, n_rows] (f32). gemv_q_swiglu: w[0] is the gate (its y the output), w[1] the up
// projection (its y unused).
struct GemvQuantWeight {
  MEMRA_DPTR(const void) w;
  MEMRA_DPTR(float) y;
  int n_rows;
  int unused;
};
MEMRA_PARAMS_SIZE(GemvQuantWeight, 24);
MEMRA_PARAMS_OFFSET(GemvQuantWeight, y, 8);
MEMRA_PARAMS_OFFSET(GemvQuantWeight, n_rows, 16);

// gemv_q: y_i = W_i x for the n_w weights (a matmul: 1; a matmul_group: up to 4 of one format);
// gemv_q_swiglu: y = silu(W_gate x) * (W_up x). x [n_tok, K] f32 (n_tok <= GQ_T); xq: the q8
// activations gemv_q_quantize_x wrote (GQ_XQ = 1), else unused.
#define MEMRA_GEMV_QUANT_MAX 4
struct GemvQuantParams {
  GemvQuantWeight w[MEMRA_GEMV_QUANT_MAX];
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(const void) xq;
  int n_tok;
  int n_w;
};
MEMRA_PARAMS_SIZE(GemvQuantParams, 120);
MEMRA_PARAMS_OFFSET(GemvQuantParams, x, 96);
MEMRA_PARAMS_OFFSET(GemvQuantParams, xq, 104);
MEMRA_PARAMS_OFFSET(GemvQuantParams, n_tok, 112);
MEMRA_PARAMS_OFFSET(GemvQuantParams, n_w, 116);

// gemv_q_quantize_x: x [n_tok, K] f32 -> xq (GemvQuant.cu: int8 [GQ_T, K], then f32 scales
// [GQ_T, K / 32], then f32 sums [GQ_T, K / 16]).
struct GemvQuantXParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(void) xq;
  int n_tok;
  int unused;
};
MEMRA_PARAMS_SIZE(GemvQuantXParams, 24);
MEMRA_PARAMS_OFFSET(GemvQuantXParams, xq, 8);
MEMRA_PARAMS_OFFSET(GemvQuantXParams, n_tok, 16);

MEMRA_PARAMS_END

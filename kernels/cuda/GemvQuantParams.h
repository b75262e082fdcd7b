// Parameters of kernels/cuda/GemvQuant.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"
#include "NormParams.h"

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
// activations gemv_q_quantize_x wrote (GQ_XQ = 1), else unused. GQ_STREAM = 1 (the chunks spread
// evenly over the warps, a tile's parts summed by the last of its warps): part holds two records
// of 32 floats per warp (its first and last tile's partial sums), count one arrival counter per
// tile, zero before the launch (gemv_q_quantize_x zeroes them) and zero again after it; else unused.
#define MEMRA_GEMV_QUANT_MAX 4
struct GemvQuantParams {
  GemvQuantWeight w[MEMRA_GEMV_QUANT_MAX];
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(const void) xq;
  int n_tok;
  int n_w;
  MEMRA_DPTR(float) part;
  MEMRA_DPTR(unsigned) count;
};
MEMRA_PARAMS_SIZE(GemvQuantParams, 136);
MEMRA_PARAMS_OFFSET(GemvQuantParams, x, 96);
MEMRA_PARAMS_OFFSET(GemvQuantParams, xq, 104);
MEMRA_PARAMS_OFFSET(GemvQuantParams, n_tok, 112);
MEMRA_PARAMS_OFFSET(GemvQuantParams, n_w, 116);
MEMRA_PARAMS_OFFSET(GemvQuantParams, part, 120);
MEMRA_PARAMS_OFFSET(GemvQuantParams, count, 128);

// gemv_q_add_norm (matmul_add_rms_norm, one token): gemv_q's product into q.w[0].y (the op's
// sum), then the launch's last block adds norm.b and normalizes the row (AddNormTail.cuh).
struct GemvQuantAddNormParams {
  GemvQuantParams q;
  AddNormTailParams norm;
};
MEMRA_PARAMS_SIZE(GemvQuantAddNormParams, 176);
MEMRA_PARAMS_OFFSET(GemvQuantAddNormParams, norm, 136);

// gemv_q_quantize_x: x [n_tok, K] f32 -> xq (GemvQuant.cu: int8 [GQ_XROWS, K], then f32 scales
// [GQ_XROWS, K / 32], then f32 sums [GQ_XROWS, K / 16]; GQ_XROWS = GQ_T unless the module sets it);
// and zero[0, n_zero) = 0 (the arrival counters of the GQ_STREAM products after it; null: none).
struct GemvQuantXParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(void) xq;
  int n_tok;
  int n_zero;
  MEMRA_DPTR(unsigned) zero;
};
MEMRA_PARAMS_SIZE(GemvQuantXParams, 32);
MEMRA_PARAMS_OFFSET(GemvQuantXParams, xq, 8);
MEMRA_PARAMS_OFFSET(GemvQuantXParams, n_tok, 16);
MEMRA_PARAMS_OFFSET(GemvQuantXParams, n_zero, 20);
MEMRA_PARAMS_OFFSET(GemvQuantXParams, zero, 24);

// gemv_q_moe / gemv_q_moe_swiglu (GQ_MOE = 1): the routed experts' products of a MoE layer for
// n_slots (token, choice) slots plus, optionally, a dense "shared" weight over n_tok rows, in one
// launch. Routed slot s uses expert e = ids[s] - first_expert of the n_experts the weights hold,
// its matrix [n, K] at w + e * expert_bytes, x row s / k, and writes y row s ([n_slots, n]); a
// slot whose e is outside [0, n_experts) (another rank's expert under expert parallelism, or an id
// not from moe_route) reads and writes nothing; shared row u < n_tok uses s0 (and s1), x row xs0 + u, and writes ys row
// u
// ([n_tok, ns]). swiglu: w0/s0 the gates, w1/s1 the ups; with g set it also writes gate[t] =
// sigmoid(x[t] . g) (g: K f32 values, the shared expert's gate; x the f32 rows). x rows are q8 rows
// (GQ_XQ = 1: xq in gemv_q_quantize_x's layout for GQ_XROWS rows) or f32 rows of x.
// gemv_q_moe_down (GQ_MOE = 2): the down products and the weighted sum in one launch: a tile is
// (token t, GQ_R output rows) and runs over the token's k choices (expert ids[t k + j], x row
// t k + j) and then, with s0, the shared down (x row xs0 + t): y[t] = sum_j wts[t, j] o_j + gate[t]
// o_shared (gate null: + o_shared, moe_ffn_ungated), each lane's partial sums scaled by its choice's weight and reduced
// once (f32, not the CPU's order of terms); y [n_tok, n], ys unused. A choice of another rank's expert (ids in [0,
// n_routed) outside this rank's) adds nothing; an id outside [0, n_routed) makes the token's row NaN (n_routed 0:
// n_experts, no expert parallelism).
struct GemvQuantMoeParams {
  MEMRA_DPTR(const void) w0;
  MEMRA_DPTR(const void) w1;
  MEMRA_DPTR(const void) s0;  // null: no shared weight
  MEMRA_DPTR(const void) s1;
  MEMRA_DPTR(float) y;
  MEMRA_DPTR(float) ys;
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(const void) xq;
  MEMRA_DPTR(const int) ids;
  MEMRA_DPTR(const float) wts;  // GQ_MOE = 2: the routing weights [n_tok, k]
  MEMRA_DPTR(float) gate;       // swiglu with g: written; GQ_MOE = 2 with s0: read ([n_tok]) or null (weight 1)
  MEMRA_DPTR(const float) g;    // swiglu: the shared gate vector (K f32) or null
  long long expert_bytes;
  int n, ns, n_slots, k, n_tok, n_experts, xs0, first_expert;
  int n_routed, unused;
};
MEMRA_PARAMS_SIZE(GemvQuantMoeParams, 144);
MEMRA_PARAMS_OFFSET(GemvQuantMoeParams, ids, 64);
MEMRA_PARAMS_OFFSET(GemvQuantMoeParams, wts, 72);
MEMRA_PARAMS_OFFSET(GemvQuantMoeParams, g, 88);
MEMRA_PARAMS_OFFSET(GemvQuantMoeParams, expert_bytes, 96);
MEMRA_PARAMS_OFFSET(GemvQuantMoeParams, n, 104);
MEMRA_PARAMS_OFFSET(GemvQuantMoeParams, xs0, 128);
MEMRA_PARAMS_OFFSET(GemvQuantMoeParams, n_routed, 136);

MEMRA_PARAMS_END

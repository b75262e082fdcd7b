// Parameters of kernels/cuda/Norm.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// rms_norm: y = x / sqrt(mean(x^2) + eps) * w; l2_norm ignores w; gated_rms_norm multiplies by
// silu(z); add_rms_norm normalizes sum = x + z (written to `sum`).
struct NormParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(const float) z;  // gated: the gate; add: the second addend; else unused
  MEMRA_DPTR(const float) w;
  MEMRA_DPTR(float) sum;  // add_rms_norm only
  MEMRA_DPTR(float) y;
  long long n_rows;
  float eps;
};
MEMRA_PARAMS_SIZE(NormParams, 56);
MEMRA_PARAMS_OFFSET(NormParams, z, 8);
MEMRA_PARAMS_OFFSET(NormParams, w, 16);
MEMRA_PARAMS_OFFSET(NormParams, sum, 24);
MEMRA_PARAMS_OFFSET(NormParams, y, 32);
MEMRA_PARAMS_OFFSET(NormParams, n_rows, 40);
MEMRA_PARAMS_OFFSET(NormParams, eps, 48);

// softmax (y f32) and argmax (y i32) over rows.
struct RowParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(void) y;
  long long n_rows;
};
MEMRA_PARAMS_SIZE(RowParams, 24);
MEMRA_PARAMS_OFFSET(RowParams, y, 8);
MEMRA_PARAMS_OFFSET(RowParams, n_rows, 16);

// greedy_next: the device decode loop's pick (argmax -> token slot + token ring), and the first
// step of the chunk with non-finite logits (bad: [step + 1 or 0, vocabulary id, value bits]).
struct GreedyNextParams {
  MEMRA_DPTR(const float) logits;
  MEMRA_DPTR(int) token;
  MEMRA_DPTR(int) ring;
  MEMRA_DPTR(int) ring_pos;
  MEMRA_DPTR(int) bad;
  MEMRA_DPTR(int) part;         // 3 ints per block: best value bits, its index, first non-finite
  MEMRA_DPTR(unsigned) ticket;  // blocks done (0 between calls: the last block resets it)
  int ring_cap;
  int unused;
};
MEMRA_PARAMS_SIZE(GreedyNextParams, 64);
MEMRA_PARAMS_OFFSET(GreedyNextParams, ring_pos, 24);
MEMRA_PARAMS_OFFSET(GreedyNextParams, bad, 32);
MEMRA_PARAMS_OFFSET(GreedyNextParams, part, 40);
MEMRA_PARAMS_OFFSET(GreedyNextParams, ticket, 48);
MEMRA_PARAMS_OFFSET(GreedyNextParams, ring_cap, 56);

// The norm after a one-token product as the product launch's tail (matmul_add_rms_norm,
// AddNormTail.cuh): the residual b, the norm's weight w, the normalized row y, the op's ticket word
// (zero between launches) and eps; the product and then the sum go to the product's own output.
struct AddNormTailParams {
  MEMRA_DPTR(const float) b;
  MEMRA_DPTR(const float) w;
  MEMRA_DPTR(float) y;
  MEMRA_DPTR(unsigned) ticket;
  float eps;
  int pad_;
};
MEMRA_PARAMS_SIZE(AddNormTailParams, 40);
MEMRA_PARAMS_OFFSET(AddNormTailParams, ticket, 24);
MEMRA_PARAMS_OFFSET(AddNormTailParams, eps, 32);

MEMRA_PARAMS_END

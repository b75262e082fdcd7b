// Parameters of kernels/cuda/Rope.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

struct RopeParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(float) y;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(const float) freq_factors;  // [>= n_rot / 2], or 0: all 1
  int n_tok;
  float theta_scale;  // base^(-2 / n_rot)
};
MEMRA_PARAMS_SIZE(RopeParams, 40);
MEMRA_PARAMS_OFFSET(RopeParams, pos, 16);
MEMRA_PARAMS_OFFSET(RopeParams, freq_factors, 24);
MEMRA_PARAMS_OFFSET(RopeParams, n_tok, 32);
MEMRA_PARAMS_OFFSET(RopeParams, theta_scale, 36);

// qk_norm_rope_rows: y = rope(rms_norm(x) * w) over n_rows = n_tok * ROPE_HEADS rows.
struct QkNormRopeParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(const float) w;
  MEMRA_DPTR(float) y;
  MEMRA_DPTR(const int) pos;
  long long n_rows;
  float eps;
  float theta_scale;
};
MEMRA_PARAMS_SIZE(QkNormRopeParams, 48);
MEMRA_PARAMS_OFFSET(QkNormRopeParams, y, 16);
MEMRA_PARAMS_OFFSET(QkNormRopeParams, pos, 24);
MEMRA_PARAMS_OFFSET(QkNormRopeParams, n_rows, 32);
MEMRA_PARAMS_OFFSET(QkNormRopeParams, eps, 40);
MEMRA_PARAMS_OFFSET(QkNormRopeParams, theta_scale, 44);

// qk_norm_rope_pair: qk_norm_rope_rows over q's n_q rows (ROPE_HEADS a token), then k's n_k rows
// (ROPE_HEADS_K a token), in one launch.
struct QkNormRopePairParams {
  MEMRA_DPTR(const float) qx;
  MEMRA_DPTR(const float) kx;
  MEMRA_DPTR(const float) qw;
  MEMRA_DPTR(const float) kw;
  MEMRA_DPTR(float) qy;
  MEMRA_DPTR(float) ky;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(const float) freq_factors;  // [>= n_rot / 2], or 0: all 1 (rope_neox's)
  long long n_q;
  long long n_k;
  float eps;
  float theta_scale;
};
MEMRA_PARAMS_SIZE(QkNormRopePairParams, 88);
MEMRA_PARAMS_OFFSET(QkNormRopePairParams, pos, 48);
MEMRA_PARAMS_OFFSET(QkNormRopePairParams, freq_factors, 56);
MEMRA_PARAMS_OFFSET(QkNormRopePairParams, n_q, 64);
MEMRA_PARAMS_OFFSET(QkNormRopePairParams, n_k, 72);
MEMRA_PARAMS_OFFSET(QkNormRopePairParams, eps, 80);
MEMRA_PARAMS_OFFSET(QkNormRopePairParams, theta_scale, 84);

// qk_norm_rope_append: q's n_q rows (ROPE_HEADS a token) normed and rotated into qy; k's n_k rows
// (ROPE_HEADS_K a token) normed, rotated and stored into k_cache at their token's row (KV_KT
// elements); v's n_k rows (optionally normed without a weight, v_norm_eps >= 0) stored into
// v_cache (KV_VT). Cache rows of ROPE_HEADS_K * ROPE_DIM elements; a ring (KV_RING > 0) at pos %
// KV_RING.
struct QkNormRopeAppendParams {
  MEMRA_DPTR(const float) qx;
  MEMRA_DPTR(const float) kx;
  MEMRA_DPTR(const float) vx;
  MEMRA_DPTR(const float) qw;
  MEMRA_DPTR(const float) kw;
  MEMRA_DPTR(float) qy;
  MEMRA_DPTR(void) k_cache;
  MEMRA_DPTR(void) v_cache;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(const float) freq_factors;  // [>= n_rot / 2], or 0: all 1
  long long n_q;
  long long n_k;
  float eps;
  float theta_scale;
  float v_norm_eps;  // < 0: v stored as it is
  int pad;
};
MEMRA_PARAMS_SIZE(QkNormRopeAppendParams, 112);
MEMRA_PARAMS_OFFSET(QkNormRopeAppendParams, pos, 64);
MEMRA_PARAMS_OFFSET(QkNormRopeAppendParams, freq_factors, 72);
MEMRA_PARAMS_OFFSET(QkNormRopeAppendParams, n_q, 80);
MEMRA_PARAMS_OFFSET(QkNormRopeAppendParams, n_k, 88);
MEMRA_PARAMS_OFFSET(QkNormRopeAppendParams, eps, 96);
MEMRA_PARAMS_OFFSET(QkNormRopeAppendParams, theta_scale, 100);
MEMRA_PARAMS_OFFSET(QkNormRopeAppendParams, v_norm_eps, 104);

MEMRA_PARAMS_END

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

MEMRA_PARAMS_END

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

MEMRA_PARAMS_END

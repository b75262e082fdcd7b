// Parameters of kernels/cuda/DeltaNet.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// conv1d_causal (state read and updated), conv1d_causal_tokens (state read; y written) and
// conv1d_state_update (state replaced; w, y unused).
struct Conv1dParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(const float) w;
  MEMRA_DPTR(float) state;
  MEMRA_DPTR(float) y;
  int n_tok;
};
MEMRA_PARAMS_SIZE(Conv1dParams, 40);
MEMRA_PARAMS_OFFSET(Conv1dParams, state, 16);
MEMRA_PARAMS_OFFSET(Conv1dParams, y, 24);
MEMRA_PARAMS_OFFSET(Conv1dParams, n_tok, 32);

struct GatedDeltaScanParams {
  MEMRA_DPTR(const float) q;
  MEMRA_DPTR(const float) k;
  MEMRA_DPTR(const float) v;
  MEMRA_DPTR(const float) g;
  MEMRA_DPTR(const float) beta;
  MEMRA_DPTR(float) state;
  MEMRA_DPTR(float) o;
  int n_tok;
  float scale;
  float qk_eps;  // GDN_L2: the l2 norms' eps
};
MEMRA_PARAMS_SIZE(GatedDeltaScanParams, 72);
MEMRA_PARAMS_OFFSET(GatedDeltaScanParams, state, 40);
MEMRA_PARAMS_OFFSET(GatedDeltaScanParams, o, 48);
MEMRA_PARAMS_OFFSET(GatedDeltaScanParams, n_tok, 56);
MEMRA_PARAMS_OFFSET(GatedDeltaScanParams, scale, 60);
MEMRA_PARAMS_OFFSET(GatedDeltaScanParams, qk_eps, 64);

MEMRA_PARAMS_END

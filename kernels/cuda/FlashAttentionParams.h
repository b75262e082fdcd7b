// Parameters of kernels/cuda/FlashAttention.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// flash_attention: q [n_tok, Hq, D], the caches [rows, Hkv, D], pos [n_tok], o [n_tok, Hq, D];
// gate (attention_gated, [n_tok, Hq, D]) or 0; window 0 (causal) or the sliding window in keys.
struct FlashAttentionParams {
  MEMRA_DPTR(const float) q;
  MEMRA_DPTR(const float) k_cache;
  MEMRA_DPTR(const float) v_cache;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(const float) gate;
  MEMRA_DPTR(float) o;
  int n_tok;
  float scale;
  int window;
  int pad_;
};
MEMRA_PARAMS_SIZE(FlashAttentionParams, 64);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, gate, 32);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, o, 40);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, n_tok, 48);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, scale, 52);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, window, 56);

MEMRA_PARAMS_END

// Parameters of kernels/cuda/FlashAttention.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// flash_kv_bf16 and flash_attention: q [n_tok, Hq, D], the caches [kv_rows, Hkv, D], pos [n_tok],
// o [n_tok, Hq, D]; gate (attention_gated, [n_tok, Hq, D]) or 0; window 0 (causal) or the sliding
// window in keys; kv16 (the step's scratch): the bf16 copy of the caches, K then V.
struct FlashAttentionParams {
  MEMRA_DPTR(const float) q;
  MEMRA_DPTR(const float) k_cache;
  MEMRA_DPTR(const float) v_cache;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(const float) gate;
  MEMRA_DPTR(float) o;
  MEMRA_DPTR(unsigned short) kv16;
  int n_tok;
  float scale;
  int window;
  int kv_rows;
};
MEMRA_PARAMS_SIZE(FlashAttentionParams, 72);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, gate, 32);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, o, 40);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, kv16, 48);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, n_tok, 56);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, scale, 60);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, window, 64);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, kv_rows, 68);

MEMRA_PARAMS_END

// Parameters of kernels/cuda/FlashAttention.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// flash_kv_bf16 and flash_attention: q [n_tok, Hq, D], the caches [kv_rows, Hkv, D] (FA_KT /
// FA_VT elements), pos [n_tok], o [n_tok, Hq, D]; gate (attention_gated, [n_tok, Hq, D], or [n_tok, Hq, 1] with
// FA_HEAD_GATE) or 0; window 0 (causal) or the sliding window in keys; k16 / v16: the bf16 keys and values the
// attention reads (a bf16 cache itself, or its copy in the step's scratch).
struct FlashAttentionParams {
  MEMRA_DPTR(const float) q;
  MEMRA_DPTR(const void) k_cache;
  MEMRA_DPTR(const void) v_cache;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(const float) gate;
  MEMRA_DPTR(float) o;
  MEMRA_DPTR(unsigned short) k16;
  MEMRA_DPTR(unsigned short) v16;
  int n_tok;
  float scale;
  int window;
  int kv_rows;
};
MEMRA_PARAMS_SIZE(FlashAttentionParams, 80);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, gate, 32);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, o, 40);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, k16, 48);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, v16, 56);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, n_tok, 64);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, scale, 68);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, window, 72);
MEMRA_PARAMS_OFFSET(FlashAttentionParams, kv_rows, 76);

MEMRA_PARAMS_END

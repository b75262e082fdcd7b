// Parameters of kernels/cuda/Attention.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// attention, attention_group (o: [n_tok, Hq, D]) and attention_split (o = the per-range
// partials, [Hq, ATT_SPLITS, D + 4]; n_tok unused: one token). The caches' elements are of the
// module's storage types ATT_KT / ATT_VT.
struct AttentionParams {
  MEMRA_DPTR(const float) q;
  MEMRA_DPTR(const void) k_cache;
  MEMRA_DPTR(const void) v_cache;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(float) o;
  int n_tok;
  float scale;
  int window;  // attention_split: 0 (causal) or the sliding window in keys; the others refuse one
  int pad_;
};
MEMRA_PARAMS_SIZE(AttentionParams, 56);
MEMRA_PARAMS_OFFSET(AttentionParams, pos, 24);
MEMRA_PARAMS_OFFSET(AttentionParams, o, 32);
MEMRA_PARAMS_OFFSET(AttentionParams, n_tok, 40);
MEMRA_PARAMS_OFFSET(AttentionParams, scale, 44);
MEMRA_PARAMS_OFFSET(AttentionParams, window, 48);

// attention_combine: merges attention_split's partials into o [Hq, D].
struct AttentionCombineParams {
  MEMRA_DPTR(const float) part;
  MEMRA_DPTR(float) o;
};
MEMRA_PARAMS_SIZE(AttentionCombineParams, 16);
MEMRA_PARAMS_OFFSET(AttentionCombineParams, o, 8);

MEMRA_PARAMS_END

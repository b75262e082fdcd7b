// Parameters of kernels/cuda/Attention.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// attention, attention_group (o: [n_tok, Hq, D]) and attention_split (one token: the per-range
// partials in `part`, [Hq, ATT_SPLITS, D + 4]; with ATT_MERGE the split's last blocks also merge
// them into o, applying `gate` as attention_combine does, and keep `tickets` (one a head chunk)
// zero between launches). The caches' elements are of the module's storage types ATT_KT / ATT_VT.
struct AttentionParams {
  MEMRA_DPTR(const float) q;
  MEMRA_DPTR(const void) k_cache;
  MEMRA_DPTR(const void) v_cache;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(float) o;
  int n_tok;
  float scale;
  int window;  // attention_split: 0 (causal) or the sliding window in keys; the others refuse one
  int gate_stride;
  MEMRA_DPTR(float) part;
  MEMRA_DPTR(const float) gate;
  MEMRA_DPTR(unsigned) tickets;
};
MEMRA_PARAMS_SIZE(AttentionParams, 80);
MEMRA_PARAMS_OFFSET(AttentionParams, pos, 24);
MEMRA_PARAMS_OFFSET(AttentionParams, o, 32);
MEMRA_PARAMS_OFFSET(AttentionParams, n_tok, 40);
MEMRA_PARAMS_OFFSET(AttentionParams, scale, 44);
MEMRA_PARAMS_OFFSET(AttentionParams, window, 48);
MEMRA_PARAMS_OFFSET(AttentionParams, gate_stride, 52);
MEMRA_PARAMS_OFFSET(AttentionParams, part, 56);
MEMRA_PARAMS_OFFSET(AttentionParams, gate, 64);
MEMRA_PARAMS_OFFSET(AttentionParams, tickets, 72);

// attention_combine: merges attention_split's partials into o [Hq, D]; with a gate (not null),
// o[h, d] *= sigmoid(gate[h * gate_stride + d]).
struct AttentionCombineParams {
  MEMRA_DPTR(const float) part;
  MEMRA_DPTR(float) o;
  MEMRA_DPTR(const float) gate;
  MEMRA_DPTR(const int) pos;  // the split's positions and window: which ranges hold keys
  int gate_stride;
  int window;
};
MEMRA_PARAMS_SIZE(AttentionCombineParams, 40);
MEMRA_PARAMS_OFFSET(AttentionCombineParams, o, 8);
MEMRA_PARAMS_OFFSET(AttentionCombineParams, gate, 16);
MEMRA_PARAMS_OFFSET(AttentionCombineParams, pos, 24);
MEMRA_PARAMS_OFFSET(AttentionCombineParams, gate_stride, 32);

// attention_step_split (gated_attention_step, one token): the op's operands, the per-range
// partials (attention_split's layout), qk_norm_rope's eps and theta step, and with ATT_MERGE the
// output and the head chunks' tickets (attention_split's).
struct AttentionStepParams {
  MEMRA_DPTR(const float) qg;
  MEMRA_DPTR(const float) k;
  MEMRA_DPTR(const float) v;
  MEMRA_DPTR(const float) q_w;
  MEMRA_DPTR(const float) k_w;
  MEMRA_DPTR(void) k_cache;
  MEMRA_DPTR(void) v_cache;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(float) part;
  float scale;
  int window;  // 0 (causal) or the sliding window in keys
  float eps;
  float theta_scale;  // base^(-2 / n_rot)
  MEMRA_DPTR(float) o;
  MEMRA_DPTR(unsigned) tickets;
};
MEMRA_PARAMS_SIZE(AttentionStepParams, 104);
MEMRA_PARAMS_OFFSET(AttentionStepParams, pos, 56);
MEMRA_PARAMS_OFFSET(AttentionStepParams, part, 64);
MEMRA_PARAMS_OFFSET(AttentionStepParams, scale, 72);
MEMRA_PARAMS_OFFSET(AttentionStepParams, window, 76);
MEMRA_PARAMS_OFFSET(AttentionStepParams, eps, 80);
MEMRA_PARAMS_OFFSET(AttentionStepParams, theta_scale, 84);
MEMRA_PARAMS_OFFSET(AttentionStepParams, o, 88);
MEMRA_PARAMS_OFFSET(AttentionStepParams, tickets, 96);

MEMRA_PARAMS_END

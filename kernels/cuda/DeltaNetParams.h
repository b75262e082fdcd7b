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

// delta_net_step (one token: conv + silu, q/k l2 norms, gates, the delta rule, gated rms norm).
struct DeltaNetStepParams {
  MEMRA_DPTR(const float) x;        // [C] the conv input, C = 2 HK DK + HV DV
  MEMRA_DPTR(const float) conv_w;   // [C, K]
  MEMRA_DPTR(const float) b;        // [HV]
  MEMRA_DPTR(const float) a;        // [HV]
  MEMRA_DPTR(const float) dt_bias;  // [HV]
  MEMRA_DPTR(const float) ssm_a;    // [HV]
  MEMRA_DPTR(const float) z;        // [HV, DV]
  MEMRA_DPTR(const float) norm_w;   // [DV]
  MEMRA_DPTR(float) conv_state;     // [C, K-1]
  MEMRA_DPTR(float) delta_state;    // [HV, DV, DK]
  MEMRA_DPTR(float) y;              // [HV, DV]
  float scale;
  float qk_eps;
  float eps;
};
MEMRA_PARAMS_SIZE(DeltaNetStepParams, 104);
MEMRA_PARAMS_OFFSET(DeltaNetStepParams, conv_state, 64);
MEMRA_PARAMS_OFFSET(DeltaNetStepParams, y, 80);
MEMRA_PARAMS_OFFSET(DeltaNetStepParams, scale, 88);
MEMRA_PARAMS_OFFSET(DeltaNetStepParams, eps, 96);

// seq_conv1d_causal: per entry b < n_seq, rows seq_start[b] .. seq_start[b+1]-1 with the ring of
// slot seq_slot[b] (state [S, C, K-1]); rows seq_start[n_seq] .. n_tok-1 get zeros.
struct SeqConv1dParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(const float) w;
  MEMRA_DPTR(float) state;
  MEMRA_DPTR(float) y;
  MEMRA_DPTR(const int) seq_slot;
  MEMRA_DPTR(const int) seq_start;
  int n_seq;
  int n_tok;
};
MEMRA_PARAMS_SIZE(SeqConv1dParams, 56);
MEMRA_PARAMS_OFFSET(SeqConv1dParams, seq_slot, 32);
MEMRA_PARAMS_OFFSET(SeqConv1dParams, seq_start, 40);
MEMRA_PARAMS_OFFSET(SeqConv1dParams, n_seq, 48);
MEMRA_PARAMS_OFFSET(SeqConv1dParams, n_tok, 52);

// seq_gated_delta_scan: gated_delta_scan per entry (state [S, HV, DV, DK]).
struct SeqGatedDeltaScanParams {
  MEMRA_DPTR(const float) q;
  MEMRA_DPTR(const float) k;
  MEMRA_DPTR(const float) v;
  MEMRA_DPTR(const float) g;
  MEMRA_DPTR(const float) beta;
  MEMRA_DPTR(float) state;
  MEMRA_DPTR(float) o;
  MEMRA_DPTR(const int) seq_slot;
  MEMRA_DPTR(const int) seq_start;
  int n_seq;
  int n_tok;
  float scale;
  float qk_eps;
};
MEMRA_PARAMS_SIZE(SeqGatedDeltaScanParams, 88);
MEMRA_PARAMS_OFFSET(SeqGatedDeltaScanParams, seq_slot, 56);
MEMRA_PARAMS_OFFSET(SeqGatedDeltaScanParams, seq_start, 64);
MEMRA_PARAMS_OFFSET(SeqGatedDeltaScanParams, n_seq, 72);
MEMRA_PARAMS_OFFSET(SeqGatedDeltaScanParams, n_tok, 76);
MEMRA_PARAMS_OFFSET(SeqGatedDeltaScanParams, scale, 80);
MEMRA_PARAMS_OFFSET(SeqGatedDeltaScanParams, qk_eps, 84);

// gdn_chunk_prep and gdn_chunk_scan (DeltaNetChunked.cu): gated_delta_scan's operands plus the
// per-(head, chunk) scratch the first writes and the second reads.
struct GdnChunkParams {
  MEMRA_DPTR(const float) q;
  MEMRA_DPTR(const float) k;
  MEMRA_DPTR(const float) v;
  MEMRA_DPTR(const float) g;
  MEMRA_DPTR(const float) beta;
  MEMRA_DPTR(float) state;
  MEMRA_DPTR(float) o;
  MEMRA_DPTR(float) scratch;
  int n_tok;
  float scale;
  float qk_eps;  // GDN_L2: the l2 norms' eps
  int pad_;
};
MEMRA_PARAMS_SIZE(GdnChunkParams, 80);
MEMRA_PARAMS_OFFSET(GdnChunkParams, scratch, 56);
MEMRA_PARAMS_OFFSET(GdnChunkParams, n_tok, 64);
MEMRA_PARAMS_OFFSET(GdnChunkParams, scale, 68);
MEMRA_PARAMS_OFFSET(GdnChunkParams, qk_eps, 72);

MEMRA_PARAMS_END

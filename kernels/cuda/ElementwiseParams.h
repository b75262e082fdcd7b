// Parameters of kernels/cuda/Elementwise.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// y = f(x) over n elements: sigmoid_f32, silu_f32, softplus_f32, exp_f32, cast_*.
struct UnaryParams {
  MEMRA_DPTR(const void) x;
  MEMRA_DPTR(void) y;
  long long n;
};
MEMRA_PARAMS_SIZE(UnaryParams, 24);
MEMRA_PARAMS_OFFSET(UnaryParams, y, 8);
MEMRA_PARAMS_OFFSET(UnaryParams, n, 16);

// y = a op b[i % nb] (b broadcast over a's leading dims): add_f32, mul_f32.
struct BroadcastParams {
  MEMRA_DPTR(const float) a;
  MEMRA_DPTR(const float) b;
  MEMRA_DPTR(float) y;
  long long n, nb;
};
MEMRA_PARAMS_SIZE(BroadcastParams, 40);
MEMRA_PARAMS_OFFSET(BroadcastParams, b, 8);
MEMRA_PARAMS_OFFSET(BroadcastParams, y, 16);
MEMRA_PARAMS_OFFSET(BroadcastParams, n, 24);
MEMRA_PARAMS_OFFSET(BroadcastParams, nb, 32);

// y = f(a, b) elementwise over n: swiglu_f32 (a = gate, b = up), mul_sigmoid_f32 (b = gate).
struct PairParams {
  MEMRA_DPTR(const float) a;
  MEMRA_DPTR(const float) b;
  MEMRA_DPTR(float) y;
  long long n;
};
MEMRA_PARAMS_SIZE(PairParams, 32);
MEMRA_PARAMS_OFFSET(PairParams, b, 8);
MEMRA_PARAMS_OFFSET(PairParams, y, 16);
MEMRA_PARAMS_OFFSET(PairParams, n, 24);

struct ScaleParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(float) y;
  long long n;
  float factor;
};
MEMRA_PARAMS_SIZE(ScaleParams, 32);
MEMRA_PARAMS_OFFSET(ScaleParams, n, 16);
MEMRA_PARAMS_OFFSET(ScaleParams, factor, 24);

// fill_f32 / fill_i32: y[i] = value (the bits of a float or an int).
struct FillParams {
  MEMRA_DPTR(void) y;
  long long n;
  float f32_value;
  int i32_value;
};
MEMRA_PARAMS_SIZE(FillParams, 24);
MEMRA_PARAMS_OFFSET(FillParams, n, 8);
MEMRA_PARAMS_OFFSET(FillParams, f32_value, 16);
MEMRA_PARAMS_OFFSET(FillParams, i32_value, 20);

// copy_axis_32: dst[o, dst_off + j, :] = src[o, src_off + j, :] for j < len.
struct CopyAxisParams {
  MEMRA_DPTR(const float) src;
  MEMRA_DPTR(float) dst;
  long long outer, src_dim, src_off, dst_dim, dst_off, len, inner;
};
MEMRA_PARAMS_SIZE(CopyAxisParams, 72);
MEMRA_PARAMS_OFFSET(CopyAxisParams, outer, 16);
MEMRA_PARAMS_OFFSET(CopyAxisParams, src_dim, 24);
MEMRA_PARAMS_OFFSET(CopyAxisParams, src_off, 32);
MEMRA_PARAMS_OFFSET(CopyAxisParams, dst_dim, 40);
MEMRA_PARAMS_OFFSET(CopyAxisParams, dst_off, 48);
MEMRA_PARAMS_OFFSET(CopyAxisParams, len, 56);
MEMRA_PARAMS_OFFSET(CopyAxisParams, inner, 64);

// positions: pos[t] = counter + t; advance_positions: counter += n_tok (pos unused).
struct PositionsParams {
  MEMRA_DPTR(int) counter;
  MEMRA_DPTR(int) pos;
  int n_tok;
};
MEMRA_PARAMS_SIZE(PositionsParams, 24);
MEMRA_PARAMS_OFFSET(PositionsParams, pos, 8);
MEMRA_PARAMS_OFFSET(PositionsParams, n_tok, 16);

struct QGateSplitParams {
  MEMRA_DPTR(const float) qg;
  MEMRA_DPTR(float) q;
  MEMRA_DPTR(float) gate;
  int n_tok;
};
MEMRA_PARAMS_SIZE(QGateSplitParams, 32);
MEMRA_PARAMS_OFFSET(QGateSplitParams, gate, 16);
MEMRA_PARAMS_OFFSET(QGateSplitParams, n_tok, 24);

struct DeltaNetGatesParams {
  MEMRA_DPTR(const float) b;
  MEMRA_DPTR(const float) a;
  MEMRA_DPTR(const float) dt_bias;
  MEMRA_DPTR(const float) ssm_a;
  MEMRA_DPTR(float) beta;
  MEMRA_DPTR(float) g;
  int n_tok;
};
MEMRA_PARAMS_SIZE(DeltaNetGatesParams, 56);
MEMRA_PARAMS_OFFSET(DeltaNetGatesParams, ssm_a, 24);
MEMRA_PARAMS_OFFSET(DeltaNetGatesParams, g, 40);
MEMRA_PARAMS_OFFSET(DeltaNetGatesParams, n_tok, 48);

struct EmbedParams {
  MEMRA_DPTR(const int) ids;
  MEMRA_DPTR(const void) table;
  MEMRA_DPTR(float) y;
  int n_tok;
};
MEMRA_PARAMS_SIZE(EmbedParams, 32);
MEMRA_PARAMS_OFFSET(EmbedParams, y, 16);
MEMRA_PARAMS_OFFSET(EmbedParams, n_tok, 24);

struct KvAppendParams {
  MEMRA_DPTR(const float) k;
  MEMRA_DPTR(const float) v;
  MEMRA_DPTR(void) k_cache;  // KV_KT elements
  MEMRA_DPTR(void) v_cache;  // KV_VT elements
  MEMRA_DPTR(const int) pos;
  int n_tok;
  float v_norm_eps;  // kv_append_vnorm only
};
MEMRA_PARAMS_SIZE(KvAppendParams, 48);
MEMRA_PARAMS_OFFSET(KvAppendParams, v_cache, 24);
MEMRA_PARAMS_OFFSET(KvAppendParams, pos, 32);
MEMRA_PARAMS_OFFSET(KvAppendParams, n_tok, 40);
MEMRA_PARAMS_OFFSET(KvAppendParams, v_norm_eps, 44);

MEMRA_PARAMS_END

// NeoX rotary embedding on the first ROPE_NROT dims of each head (partial rope). x, y:
// [n_tok, ROPE_HEADS, ROPE_DIM]; pos: i32[n_tok]. theta_i is formed as ggml / the CPU reference
// do: theta_0 = p, theta_{i+1} = theta_i * s with s = base^(-2/n_rot) in f32; with freq_factors
// (ggml_rope_ext's) pair i turns by theta_i / freq_factors[i].
#include "Common.cuh"
#include "RopeParams.h"

__device__ __forceinline__ void rope_neox_body(const float* x, float* y, const int* pos, const float* ff, int n_tok,
                                               float theta_scale) {
  const int half = ROPE_NROT / 2;
  const i64 n = (i64)n_tok * ROPE_HEADS * ROPE_DIM;
  MEMRA_GRID_STRIDE(idx, n) {
    const int d = (int)(idx % ROPE_DIM);
    const i64 th = idx / ROPE_DIM;
    const i64 t = th / ROPE_HEADS;
    const float* xr = x + th * ROPE_DIM;
    if (d >= ROPE_NROT) {
      y[idx] = xr[d];
      continue;
    }
    const int i = d < half ? d : d - half;
    float theta = (float)pos[t];
    for (int k = 0; k < i; ++k) theta *= theta_scale;
    if (ff != nullptr) theta = theta / ff[i];
    const float c = cosf(theta), s = sinf(theta);
    const float x0 = xr[i], x1 = xr[i + half];
    y[idx] = d < half ? x0 * c - x1 * s : x0 * s + x1 * c;
  }
}

extern "C" __global__ void rope_neox(const RopeParams p) {
  memra_grid_dependency();
  rope_neox_body(p.x, p.y, p.pos, p.freq_factors, p.n_tok, p.theta_scale);
}

#if defined(ROPE_DIM) && ROPE_DIM % 32 == 0 && (ROPE_NROT / 2) % 32 == 0
// qk_norm_rope in one pass, one warp per head row (eight a block): Norm.cu's rms_norm (warp rows,
// the same sums), then the rotation of pairs (i, i + n_rot / 2), which lie in one lane because
// n_rot / 2 is a multiple of 32; theta formed per pair as rope_neox forms it, so the results
// equal the two-launch path's. Each row is read once and written once (that path wrote and read
// the normed rows through the scratch and formed theta per element: 25 % of the bandwidth).
// The head row at xr normed with the lane's weights wv and rotated to position P, into v (element
// lane + 32 k in v[k]); ff: rope_neox's freq_factors (pair i turns by theta_i / ff[i]), or null.
template <int kPer>
__device__ __forceinline__ void norm_rope_values(const float* xr, const float (&wv)[kPer], float (&v)[kPer], float P,
                                                 float eps, float theta_scale, const float* ff, int lane) {
  constexpr int kPairs = ROPE_NROT / 64;  // rotated pairs per lane
  const float s = warp_row_rms_scale(xr, v, eps);
#pragma unroll
  for (int k = 0; k < kPer; ++k) v[k] = (v[k] * s) * wv[k];
#pragma unroll
  for (int m = 0; m < kPairs; ++m) {
    float theta = rope_theta(P, lane + 32 * m, theta_scale);
    if (ff != nullptr) theta = theta / ff[lane + 32 * m];
    const float c = cosf(theta), sn = sinf(theta);
    const float x0 = v[m], x1 = v[m + kPairs];
    v[m] = x0 * c - x1 * sn;
    v[m + kPairs] = x0 * sn + x1 * c;
  }
}
// One head row r of x (heads a token): normed with the lane's weights wv, rotated, into y.
template <int kPer>
__device__ __forceinline__ void qk_norm_rope_row(const float* x, const float (&wv)[kPer], float* y, const int* pos,
                                                 i64 r, int heads, float eps, float theta_scale, const float* ff,
                                                 int lane) {
  float v[kPer];
  norm_rope_values(x + r * ROPE_DIM, wv, v, (float)pos[r / heads], eps, theta_scale, ff, lane);
  float* yr = y + r * ROPE_DIM;
#pragma unroll
  for (int k = 0; k < kPer; ++k) yr[lane + 32 * k] = v[k];
}

extern "C" __global__ void __launch_bounds__(256) qk_norm_rope_rows(const QkNormRopeParams p) {
  memra_grid_dependency();
  constexpr int kPer = ROPE_DIM / 32;  // per lane: elements
  const int lane = threadIdx.x & 31;
  float wv[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) wv[k] = p.w[lane + 32 * k];
  for (i64 r = (i64)blockIdx.x * 8 + (threadIdx.x >> 5); r < p.n_rows; r += (i64)gridDim.x * 8)
    qk_norm_rope_row(p.x, wv, p.y, p.pos, r, ROPE_HEADS, p.eps, p.theta_scale, nullptr, lane);
}

#ifdef ROPE_HEADS_K
// q's rows, then k's, in one launch (the decode step's qk_norm_rope was two launches of ~2 us):
// each warp a row of either, the same arithmetic as qk_norm_rope_rows on each.
extern "C" __global__ void __launch_bounds__(256) qk_norm_rope_pair(const QkNormRopePairParams p) {
  memra_grid_dependency();
  constexpr int kPer = ROPE_DIM / 32;
  const int lane = threadIdx.x & 31;
  float wq[kPer], wk[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) wq[k] = p.qw[lane + 32 * k], wk[k] = p.kw[lane + 32 * k];
  for (i64 r = (i64)blockIdx.x * 8 + (threadIdx.x >> 5); r < p.n_q + p.n_k; r += (i64)gridDim.x * 8) {
    if (r < p.n_q) {
      qk_norm_rope_row(p.qx, wq, p.qy, p.pos, r, ROPE_HEADS, p.eps, p.theta_scale, p.freq_factors, lane);
    } else {
      qk_norm_rope_row(p.kx, wk, p.ky, p.pos, r - p.n_q, ROPE_HEADS_K, p.eps, p.theta_scale, p.freq_factors, lane);
    }
  }
}

#if defined(ROPE_HEADS_K) && defined(KV_KT)
#ifndef KV_RING
#define KV_RING 0
#endif
// qk_norm_rope_append (fuse-qk-norm-rope-append): qk_norm_rope_pair's rows, k's stored into its
// cache row instead of a result, then v's rows (normed without a weight as kv_append_vnorm does
// when v_norm_eps >= 0) into theirs: each warp a head row of q, k or v, the arithmetic of the two
// launches it replaces (kv_store_warp rounds to the caches' types; q8_0 blocks are a warp's 32
// lanes of one row, ROPE_DIM a multiple of 32).
extern "C" __global__ void __launch_bounds__(256) qk_norm_rope_append(const QkNormRopeAppendParams p) {
  memra_grid_dependency();
  constexpr int kPer = ROPE_DIM / 32;
  constexpr i64 kWidth = (i64)ROPE_HEADS_K * ROPE_DIM;  // a cache row
  const int lane = threadIdx.x & 31;
  float wq[kPer], wk[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) wq[k] = p.qw[lane + 32 * k], wk[k] = p.kw[lane + 32 * k];
  for (i64 r = (i64)blockIdx.x * 8 + (threadIdx.x >> 5); r < p.n_q + 2 * p.n_k; r += (i64)gridDim.x * 8) {
    if (r < p.n_q) {
      qk_norm_rope_row(p.qx, wq, p.qy, p.pos, r, ROPE_HEADS, p.eps, p.theta_scale, p.freq_factors, lane);
      continue;
    }
    const bool is_k = r < p.n_q + p.n_k;
    const i64 kr = r - p.n_q - (is_k ? 0 : p.n_k);  // the (token, head) row of k or v
    const i64 t = kr / ROPE_HEADS_K, h = kr % ROPE_HEADS_K;
    const i64 row = KV_RING > 0 ? (i64)(p.pos[t] % KV_RING) : (i64)p.pos[t];
    const i64 dst = row * kWidth + h * ROPE_DIM + lane;
    float v[kPer];
    if (is_k) {
      norm_rope_values(p.kx + kr * ROPE_DIM, wk, v, (float)p.pos[t], p.eps, p.theta_scale, p.freq_factors, lane);
#pragma unroll
      for (int k = 0; k < kPer; ++k) kv_store_warp<KV_KT>(p.k_cache, dst + 32 * k, v[k]);
    } else if (p.v_norm_eps >= 0.0f) {
      const float s = warp_row_rms_scale(p.vx + kr * ROPE_DIM, v, p.v_norm_eps);
#pragma unroll
      for (int k = 0; k < kPer; ++k) kv_store_warp<KV_VT>(p.v_cache, dst + 32 * k, (v[k] * s) * 1.0f);
    } else {
#pragma unroll
      for (int k = 0; k < kPer; ++k) kv_store_warp<KV_VT>(p.v_cache, dst + 32 * k, p.vx[kr * ROPE_DIM + lane + 32 * k]);
    }
  }
}
#endif
#endif
#endif

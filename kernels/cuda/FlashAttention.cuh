// What the two prefill attention kernels share (FlashAttention.cu: mma.sync; FlashAttentionWgmma.cu:
// Hopper wgmma): the quad reductions of the accumulator rows, a query's first key, the cache row of
// a key in a sliding-window ring, a block's key range, a Q row's values as bf16 and the gated
// store of the output. Rows of a block are (token, query head of the kv head's group) pairs.
#pragma once
#include "Common.cuh"
#include "FlashAttentionParams.h"
#include "Mma.cuh"

#ifndef FA_HEAD_GATE
#define FA_HEAD_GATE 0  // 1: attention_gated's gate is one per head ([n_tok, Hq, 1])
#endif

__device__ __forceinline__ float fa_quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float fa_quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The first key a query at position p sees (kernels/cpu/Attention.cc's FirstKey).
__device__ __forceinline__ int fa_first_key(int p, int window) { return window > 0 ? max(0, p - window + 1) : 0; }

// The cache row of key j: j, or j % FA_RING in a sliding-window ring of FA_RING rows (ir/Ops.def
// kv_append ring; the call's keys span at most FA_RING rows, so none alias).
#ifndef FA_RING
#define FA_RING 0
#endif
__device__ __forceinline__ i64 fa_row(int j) { return FA_RING > 0 ? (i64)(j % FA_RING) : (i64)j; }

// 2^x by the hardware's approximation (ex2.approx.ftz: 2 ulp, 2^-inf = 0), without exp2f's range
// tests: the wgmma kernel's softmax, whose probabilities are rounded to bf16 next.
__device__ __forceinline__ float fa_exp2(float x) {
#if defined(MEMRA_HOST_EMULATION)
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

// The keys tokens [t0, t0 + tb) of the call see: [lo, hi], from the smallest first key to the
// largest position (hi = -1: no token).
__device__ __forceinline__ void fa_block_range(const FlashAttentionParams& p, int t0, int tb, int* lo, int* hi) {
  int l = 0x7fffffff, h = -1;
  for (int i = 0; i < tb && t0 + i < p.n_tok; ++i) {
    const int P = p.pos[t0 + i];
    h = max(h, P);
    l = min(l, fa_first_key(P, p.window));
  }
  *lo = l;
  *hi = h;
}

// Columns [c, c + 4) of query head `head` of token t as four bf16 (zeros for a token past n_tok).
__device__ __forceinline__ uint2 fa_q4_bf16(const FlashAttentionParams& p, int t, int head, int c) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (t < p.n_tok) v = *reinterpret_cast<const float4*>(p.q + ((i64)t * FA_HQ + head) * FA_D + c);
  uint2 w;
  w.x = mma_pack_bf16(v.x, v.y);
  w.y = mma_pack_bf16(v.z, v.w);
  return w;
}

// Output columns d, d + 1 of the row at element offset `row` ((token * Hq + head) * D), gated
// (attention_gated: per element, or per head with FA_HEAD_GATE).
__device__ __forceinline__ void fa_store2(const FlashAttentionParams& p, i64 row, int d, float x, float y) {
  if (p.gate != nullptr) {
#if FA_HEAD_GATE
    const float sg = sigmoidf_(p.gate[row / FA_D]);
    x *= sg;
    y *= sg;
#else
    x *= sigmoidf_(p.gate[row + d]);
    y *= sigmoidf_(p.gate[row + d + 1]);
#endif
  }
  *reinterpret_cast<float2*>(p.o + row + d) = make_float2(x, y);
}

// The epilogue of a thread's two accumulator rows A and B (tokens tA / tB, heads hA / hB; pos < 0:
// a row past n_tok, not written): the quads' partial sums of l added, O normalized, gated and
// stored. acc holds mma.sync's C fragments of n-blocks of 8 columns from c0 (4n..4n+3: row A
// columns 2tq, 2tq + 1, then row B's).
template <int kCols>
__device__ __forceinline__ void fa_store_rows(const FlashAttentionParams& p, const float* acc, float lA, float lB,
                                              int tA, int hA, int posA, int tB, int hB, int posB, int c0, int tq) {
  lA = fa_quad_sum(lA);
  lB = fa_quad_sum(lB);
  const float invA = lA > 0.0f ? 1.0f / lA : 0.0f, invB = lB > 0.0f ? 1.0f / lB : 0.0f;
  const i64 rowA = ((i64)tA * FA_HQ + hA) * FA_D, rowB = ((i64)tB * FA_HQ + hB) * FA_D;
#pragma unroll
  for (int n = 0; n < kCols / 8; ++n) {
    const int d = c0 + n * 8 + 2 * tq;
    if (posA >= 0) fa_store2(p, rowA, d, acc[4 * n + 0] * invA, acc[4 * n + 1] * invA);
    if (posB >= 0) fa_store2(p, rowB, d, acc[4 * n + 2] * invB, acc[4 * n + 3] * invB);
  }
}

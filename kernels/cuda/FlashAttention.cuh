// What the two prefill attention kernels share (FlashAttention.cu: mma.sync; FlashAttentionWgmma.cu:
// Hopper wgmma): the quad reductions of the accumulator rows, a query's first key, and the cache
// row of a key in a sliding-window ring.
#pragma once
#include "Common.cuh"

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

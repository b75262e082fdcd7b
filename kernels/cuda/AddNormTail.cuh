// The tail of a product launch that carries the norm after it (matmul_add_rms_norm): the
// launch's last block to finish, found by an arrival ticket, adds the residual to the product row
// the blocks wrote and normalizes it as Norm.cu's add_rms_norm does. Included by Gemv.cu and
// GemvQuant.cu.
#pragma once
#include "Common.cuh"
#include "NormParams.h"

// Every thread of the block calls it after its last store of the launch's output: true in the
// launch's last block to arrive (the other blocks' stores are then visible to it), which has set
// the ticket to zero again for the next launch. `ticket` is zero before the launch (the
// selection's ticket_words, kept zero by this).
__device__ __forceinline__ bool last_block_to_arrive(unsigned* ticket) {
  __shared__ unsigned s_arrived;
  __threadfence();  // this thread's stores before the block's arrival
  __syncthreads();
  if (threadIdx.x == 0) s_arrived = atomicAdd(ticket, 1u);
  __syncthreads();
  if (s_arrived != gridDim.x - 1) return false;
  __threadfence();  // the other blocks' stores after their arrivals
  if (threadIdx.x == 0) *ticket = 0u;
  return true;
}

// One row of add_rms_norm, sum = p + b and y = rms_norm(sum) * w at kCols columns, by a block of
// kThreads threads (a multiple of 32), with Norm.cu's arithmetic for a row of kCols: up to 512
// columns a warp row (warp 0 here; lane l the columns l + 32 k), longer rows the block of 256
// threads (thread t the columns t + 256 k), here thread u taking the columns of Norm.cu's threads
// u, u + kThreads, ... below 256 (whole warps of them). Each sum of squares, its warp's shuffle
// tree and the tree over the 8 warps' partials are Norm.cu's, so the bits are add_rms_norm's. With
// MEMRA_Q8X_OFF (kernels/cuda/Q8Companion.h) y's q8 companion too, as Norm.cu writes it: each warp
// holds 32 consecutive columns at every step (kCols % 32 == 0 then), so a group is one warp's
// amax. p is other blocks' stores (read through L2); sum may be p (each thread reads its columns
// before it writes them). Every thread of the block calls it.
template <int kCols, int kThreads>
__device__ __forceinline__ void add_rms_norm_row(const float* p, const float* b, const float* w, float* sum, float* y,
                                                 float eps) {
  static_assert(kThreads >= 32 && kThreads % 32 == 0, "whole warps");
#ifdef MEMRA_Q8X_OFF
  static_assert(kCols % 32 == 0 && MEMRA_Q8X_ELEMS == kCols, "a companion of the one row, in whole groups");
#endif
  const int lane = threadIdx.x & 31;
  if constexpr (kCols <= 512) {
    constexpr int kPer = (kCols + 31) / 32;
    if (threadIdx.x >= 32) return;
    float wv[kPer], v[kPer], ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = lane + 32 * k;
      wv[k] = c < kCols ? w[c] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = lane + 32 * k;
      v[k] = c < kCols ? __ldcg(p + c) + b[c] : 0.0f;
      ss += v[k] * v[k];
    }
    ss = warp_sum(ss);
    const float s = 1.0f / sqrtf(ss / (float)kCols + eps);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = lane + 32 * k;
      if (c < kCols) {
        sum[c] = v[k];
        y[c] = (v[k] * s) * wv[k];
#ifdef MEMRA_Q8X_OFF
        q8x_store(y, c, (v[k] * s) * wv[k]);  // warp-uniform: kCols % 32 == 0
#endif
      }
    }
  } else {
    constexpr int kPer = (kCols + 255) / 256, kM = (256 + kThreads - 1) / kThreads;
    // A thread's values stay in registers up to 16 of them (with the weights', 32); past that the
    // tail reads p and b twice (the same sums: v is computed the same way both times).
    constexpr bool kKeep = kM * kPer <= 16;
    __shared__ float partial[8];
    __shared__ float total;
    const int warp = threadIdx.x >> 5;
    // Norm.cu's thread t = threadIdx.x + m * kThreads (when below 256, warp-uniform): its columns
    // t + 256 k, its warp t / 32.
    auto live = [&](int m) { return (int)threadIdx.x + m * kThreads < 256; };
    auto col = [&](int m, int k) { return (int)threadIdx.x + m * kThreads + 256 * k; };
    float wv[kKeep ? kM : 1][kKeep ? kPer : 1], v[kKeep ? kM : 1][kKeep ? kPer : 1];
    if constexpr (kKeep) {
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int k = 0; k < kPer; ++k) wv[m][k] = live(m) && col(m, k) < kCols ? w[col(m, k)] : 0.0f;
    }
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      if (!live(m)) break;  // and every later m
      float ss = 0.0f;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int c = col(m, k);
        const float x = c < kCols ? __ldcg(p + c) + b[c] : 0.0f;
        if constexpr (kKeep) v[m][k] = x;
        ss += x * x;
      }
      ss = warp_sum(ss);
      if (lane == 0) partial[warp + m * (kThreads / 32)] = ss;
    }
    __syncthreads();
    if (warp == 0) {
      float s = lane < 8 ? partial[lane] : 0.0f;
      s = warp_sum(s);
      if (lane == 0) total = s;
    }
    __syncthreads();
    const float s = 1.0f / sqrtf(total / (float)kCols + eps);
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int c = col(m, k);
        if (!live(m) || c >= kCols) continue;
        float x, wc;
        if constexpr (kKeep) {
          x = v[m][k], wc = wv[m][k];
        } else {
          x = __ldcg(p + c) + b[c], wc = w[c];
        }
        const float out = (x * s) * wc;
        sum[c] = x;
        y[c] = out;
#ifdef MEMRA_Q8X_OFF
        q8x_store(y, c, out);  // a warp's 32 consecutive columns (live(m) and c < kCols warp-uniform)
#endif
      }
  }
}

// The tail of a product launch whose blocks wrote the product row into `prod`: the last block to
// arrive on t.ticket adds t.b and normalizes (add_rms_norm_row), the sum over the product.
template <int kCols, int kThreads>
__device__ __forceinline__ void add_norm_tail(float* prod, const AddNormTailParams& t) {
  if (!last_block_to_arrive(t.ticket)) return;
  add_rms_norm_row<kCols, kThreads>(prod, t.b, t.w, prod, t.y, t.eps);
}

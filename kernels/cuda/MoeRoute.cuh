// The MoE routing of one token by one warp (ir/Ops.def moe_route / moe_route_sigmoid): Moe.cu's
// moe_route kernels, and Gemv.cu's router product (moe_router) whose last block routes. MR_E
// experts, MR_K chosen; kFromL2: the logits are other blocks' writes of the same launch (read
// through L2).
#pragma once
#include "Common.cuh"

#ifndef MR_E
#define MR_E 256  // experts
#endif
#ifndef MR_K
#define MR_K 8  // experts chosen per token
#endif
#ifndef MR_NORM
#define MR_NORM 0  // moe_route_sigmoid: the chosen weights renormalized (ir/Ops.def norm)
#endif

template <bool kFromL2>
__device__ __forceinline__ float route_logit(const float* l, int e) {
  return kFromL2 ? __ldcg(l + e) : l[e];
}

// (value, index) order of the top-k: larger value first, then the lower index (ir/Ops.def).
__device__ __forceinline__ bool route_better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

// Softmax over the MR_E logits l (max, exp, sum, one reciprocal: the CPU's order up to the sum's
// association), MR_K rounds of a warp arg-max that retire the winner, the k probabilities summed in
// choice order, clamped at 2^-14 (llama.cpp's), and divided; then times expert_scale[id] when set.
template <bool kFromL2>
__device__ __forceinline__ void route_softmax_warp(const float* l, int* ids, float* weights, const float* expert_scale,
                                                   int lane) {
  constexpr int kPer = (MR_E + 31) / 32;
  float v[kPer];
  float mx = MEMRA_NEG_INF;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + 32 * i;
    v[i] = e < MR_E ? route_logit<kFromL2>(l, e) : MEMRA_NEG_INF;
    mx = fmaxf(mx, v[i]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    v[i] = lane + 32 * i < MR_E ? expf(v[i] - mx) : 0.0f;
    sum += v[i];
  }
  const float inv = 1.0f / warp_sum(sum);
#pragma unroll
  for (int i = 0; i < kPer; ++i) v[i] = lane + 32 * i < MR_E ? v[i] * inv : -1.0f;  // padding never wins
  float chosen_v = 0.0f, total = 0.0f;
  int chosen_i = 0;
#pragma unroll 1
  for (int j = 0; j < MR_K; ++j) {
    float bv = -2.0f;  // below every probability and the padding
    int bi = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (route_better(v[i], lane + 32 * i, bv, bi)) bv = v[i], bi = lane + 32 * i;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (route_better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if (bi >= MR_E) bi = j, bv = __int_as_float(0x7fc00000);  // NaN probabilities: a valid id, a NaN weight
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (lane + 32 * i == bi) v[i] = -3.0f;  // retired
    total += bv;
    if (lane == j) chosen_v = bv, chosen_i = bi;
  }
  total = fmaxf(total, 6.103515625e-5f);
  if (lane < MR_K) {
    ids[lane] = chosen_i;
    float wgt = chosen_v / total;
    if (expert_scale != nullptr) wgt *= expert_scale[chosen_i];  // after the renormalization, as the CPU
    weights[lane] = wgt;
  }
}

// Step 3.5's router: p = sigmoid(l) (sigmoid_f32's), the selection score p + bias (when set),
// MR_K rounds of a warp arg-max over the scores that retire the winner and fetch its unbiased p;
// MR_NORM: divided by the chosen p's sum (in choice order, clamped at 2^-14); then times scale.
template <bool kFromL2>
__device__ __forceinline__ void route_sigmoid_warp(const float* l, int* ids, float* weights, const float* bias,
                                                   float scale, int lane) {
  constexpr int kPer = (MR_E + 31) / 32;
  float prob[kPer], score[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + 32 * i;
    prob[i] = e < MR_E ? sigmoidf_(route_logit<kFromL2>(l, e)) : 0.0f;
    score[i] = e < MR_E ? (bias != nullptr ? prob[i] + bias[e] : prob[i]) : MEMRA_NEG_INF;
  }
  float chosen_v = 0.0f, total = 0.0f;
  int chosen_i = 0;
#pragma unroll 1
  for (int j = 0; j < MR_K; ++j) {
    float bv = MEMRA_NEG_INF;
    int bi = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (lane + 32 * i < MR_E && route_better(score[i], lane + 32 * i, bv, bi)) bv = score[i], bi = lane + 32 * i;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (route_better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    float mine = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (lane + 32 * i == bi) mine = prob[i], score[i] = MEMRA_NEG_INF, prob[i] = 0.0f;  // retired
    float pv = __shfl_sync(0xffffffffu, mine, bi & 31);
    if (bi >= MR_E) bi = j, pv = __int_as_float(0x7fc00000);  // NaN scores: a valid id, a NaN weight
    total += pv;
    if (lane == j) chosen_v = pv, chosen_i = bi;
  }
  if (lane < MR_K) {
    float wgt = chosen_v;
    if (MR_NORM) wgt = chosen_v / fmaxf(total, 6.103515625e-5f);
    if (scale != 1.0f) wgt *= scale;
    ids[lane] = chosen_i;
    weights[lane] = wgt;
  }
}

// The pieces of a delta-net head's one-token step that delta_net_step (DeltaNet.cu) and the
// product-tail step (DeltaNetStepTail.cuh) share, so both compute the same bits.
//
// One state column of the gated delta rule for one token, as the decode steps compute it
// (DeltaNet.cu's delta_net_step, DeltaNetStepTail.cuh's step in the product's blocks): the kLanes
// lanes of a column hold S[i][j] for i = 4 p + 32 m + 0..3 (lane p of the group, piece m), and
//   S *= decay;  d = (v_j - k . S) beta;  S += k d;  out = q . S
// with each sum over the lanes by a butterfly of kLanes. kn(m, e) / qn(m, e): the normalized key
// and query at the lane's element 4 p + 32 m + e. Returns out (every lane of the group).
#pragma once
#include "Common.cuh"

template <int kLanes, int kPieces, typename KN, typename QN>
__device__ __forceinline__ float delta_rule_column(float4 (&S)[kPieces], const KN& kn, const QN& qn, float decay,
                                                   float beta, float v_j) {
  float dot = 0.0f;
#pragma unroll
  for (int m = 0; m < kPieces; ++m) {
    float* s4 = reinterpret_cast<float*>(&S[m]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s4[e] *= decay;
      dot += s4[e] * kn(m, e);
    }
  }
#pragma unroll
  for (int o = 1; o < kLanes; o <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  const float d = (v_j - dot) * beta;
  float out = 0.0f;
#pragma unroll
  for (int m = 0; m < kPieces; ++m) {
    float* s4 = reinterpret_cast<float*>(&S[m]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s4[e] += kn(m, e) * d;
      out += s4[e] * qn(m, e);
    }
  }
#pragma unroll
  for (int o = 1; o < kLanes; o <<= 1) out += __shfl_xor_sync(0xffffffffu, out, o);
  return out;
}

// A head's gates and its key's and query's inverse l2 norms (every lane of a warp gets them: each
// warp sums the squares of sk / sq, dk values in shared memory, lane-strided, then a warp sum).
struct DeltaHeadGates {
  float beta, decay, inv_k, inv_q;
};
__device__ __forceinline__ DeltaHeadGates delta_head_gates(float b, float a, float dt_bias, float ssm_a,
                                                           const float* sk, const float* sq, int dk, float qk_eps) {
  DeltaHeadGates g;
  g.beta = sigmoidf_(b);
  g.decay = expf(softplusf_(a + dt_bias) * ssm_a);
  float kk = 0.0f, qq = 0.0f;
  for (int i = threadIdx.x & 31; i < dk; i += 32) kk += sk[i] * sk[i], qq += sq[i] * sq[i];
  kk = warp_sum(kk);
  qq = warp_sum(qq);
  g.inv_k = 1.0f / fmaxf(sqrtf(kk), qk_eps);
  g.inv_q = 1.0f / fmaxf(sqrtf(qq), qk_eps);
  return g;
}

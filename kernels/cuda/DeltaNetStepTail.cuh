// The delta-net step as the tail of the product that computes its inputs (matmul_delta_net_step:
// Gemv.cu's gemv_group_delta_step). The product's rows are ordered by key head: unit kh holds, in
// this order, the q rows (DNS_DK) and k rows (DNS_DK) of key head kh, then for each of its value
// heads h = kh + r DNS_HK (r < DNS_HV / DNS_HK) the v rows (DNS_DV), the z rows (DNS_DV), the beta
// row and the alpha row. A value head's step reads its key head's q / k rows and its own range: each
// block that writes rows of either adds one arrival to the value head's ticket, and the block that
// completes the count runs that head's step while the other blocks still stream their rows, so the
// heads' steps overlap the product instead of following it (and the last one alone follows it).
//
// The step's arithmetic is DeltaNet.cu's delta_net_step's for each head (the same conv sum, l2 norm
// sums, per-column delta rule with DNS_LANES lanes a column, gated norm), so the bits are the two
// launches' at select-kernels{delta-step-split=1} (tests/cuda/emulation/GemvDeltaStepEmu.cc; a
// split step adds the gated norm's squares as per-block partials). The value heads of a key head each compute
// the key head's q / k conv from its state; the last of them to read it (a second ticket per key
// head, after the value heads' tickets) writes the shifted windows back, as delta_net_step's
// cluster does after its barrier.
#pragma once
#include "Common.cuh"
#include "DeltaNetParams.h"
#include "DeltaRuleColumn.cuh"

#define DNT_R (DNS_HV / DNS_HK)
#define DNT_UNIT (2 * DNS_DK + DNT_R * (2 * DNS_DV + 2))  // a key head's product rows
#define DNT_LANES 8                                       // lanes a state column (delta_net_step's DNS_LANES)
#ifndef DNT_DEPTH
#define DNT_DEPTH 2  // passes of a head's state in registers at a time
#endif

// Product row g (< DNS_HK * DNT_UNIT) as (member, row): member 0 the qkv matrix, 1 z, 2 beta, 3 alpha.
__device__ __forceinline__ void dnt_row(int g, int& member, int& row) {
  const int kh = g / DNT_UNIT, j = g % DNT_UNIT;
  if (j < 2 * DNS_DK) {  // q rows then k rows of key head kh
    member = 0;
    row = (j < DNS_DK ? 0 : DNS_HK * DNS_DK - DNS_DK) + kh * DNS_DK + j;
    return;
  }
  const int jj = j - 2 * DNS_DK, r = jj / (2 * DNS_DV + 2), e = jj % (2 * DNS_DV + 2), h = kh + r * DNS_HK;
  if (e < DNS_DV) {
    member = 0, row = 2 * DNS_HK * DNS_DK + h * DNS_DV + e;
  } else if (e < 2 * DNS_DV) {
    member = 1, row = h * DNS_DV + (e - DNS_DV);
  } else {
    member = e == 2 * DNS_DV ? 2 : 3, row = h;
  }
}

// Blocks of kWarps rows that write rows in [a, b) (a < b).
template <int kWarps>
__device__ __forceinline__ int dnt_first_block(int a) {
  return a / kWarps;
}
template <int kWarps>
__device__ __forceinline__ int dnt_last_block(int b) {
  return (b - 1) / kWarps;
}
// Value head r of unit u: its rows [dnt_head_begin, + 2 DNS_DV + 2) and the unit's q / k rows
// [u DNT_UNIT, + 2 DNS_DK).
__device__ __forceinline__ int dnt_head_begin(int u, int r) { return u * DNT_UNIT + 2 * DNS_DK + r * (2 * DNS_DV + 2); }
// The blocks that write rows the step of value head r of unit u reads: its arrival count.
template <int kWarps>
__device__ __forceinline__ unsigned dnt_arrivals(int u, int r) {
  const int qf = dnt_first_block<kWarps>(u * DNT_UNIT), ql = dnt_last_block<kWarps>(u * DNT_UNIT + 2 * DNS_DK);
  const int hf = dnt_first_block<kWarps>(dnt_head_begin(u, r)),
            hl = dnt_last_block<kWarps>(dnt_head_begin(u, r) + 2 * DNS_DV + 2);
  const int shared = max(0, min(ql, hl) - max(qf, hf) + 1);
  return (unsigned)((ql - qf + 1) + (hl - hf + 1) - shared);
}
// Whether the rows [g0, g1) of a block meet [a, b).
__device__ __forceinline__ bool dnt_meets(int g0, int g1, int a, int b) { return g0 < b && a < g1; }

// One conv channel c of the step's token: the window (the state's K - 1 values, then x[c]) against
// the channel's weights, silu (delta_net_step's order); with `write`, the state shifted and
// written back.
__device__ __forceinline__ float dnt_conv_channel(const DeltaNetStepParams& p, int c, bool write) {
  float win[CONV_K], wc[CONV_K];
#pragma unroll
  for (int i = 0; i < CONV_K; ++i) wc[i] = p.conv_w[(i64)c * CONV_K + i];
#pragma unroll
  for (int i = 0; i < CONV_K - 1; ++i) win[i] = p.conv_state[(i64)c * (CONV_K - 1) + i];
  win[CONV_K - 1] = __ldcg(p.x + c);  // another block's product row
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < CONV_K; ++i) s += win[i] * wc[i];
  if (write) {
#pragma unroll
    for (int i = 0; i < CONV_K - 1; ++i) p.conv_state[(i64)c * (CONV_K - 1) + i] = win[i + 1];
  }
  return siluf_(s);
}
// The q / k conv channel t < 2 DNS_DK of key head kh.
__device__ __forceinline__ int dnt_qk_channel(int kh, int t) {
  return (t < DNS_DK ? 0 : DNS_HK * DNS_DK - DNS_DK) + kh * DNS_DK + t;
}

// Value head r of key head kh, by the whole block (kThreads threads; every thread calls it): the
// key head's q / k conv, the head's v conv, gates, delta rule and gated norm. The products it reads
// (p.x, p.z, p.b, p.a) were written by other blocks before their arrivals: read through L2.
// conv_ticket: the key head's second ticket (the last of its DNT_R value heads writes the q / k
// windows back and zeroes it).
template <int kThreads>
__device__ __forceinline__ void delta_step_head(const DeltaNetStepParams& p, int kh, int r, unsigned* conv_ticket) {
  constexpr int kWarps = kThreads / 32, kCols = 32 / DNT_LANES;
  constexpr int kPasses = (DNS_DV + kCols * kWarps - 1) / (kCols * kWarps);
  constexpr int kPieces = DNS_DK / (4 * DNT_LANES);
  constexpr int kDepth = DNT_DEPTH < kPasses ? DNT_DEPTH : kPasses;
  static_assert(DNS_DK % 32 == 0, "a key row is whole float4 pieces of 8 lanes");
  __shared__ __align__(16) float sq[DNS_DK], sk[DNS_DK], sv[DNS_DV], so[DNS_DV];
  __shared__ bool s_last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g8 = lane / DNT_LANES, p8 = lane % DNT_LANES;

  // The key head's q and k channels (their windows written back below, by the last reader).
  for (int t = threadIdx.x; t < 2 * DNS_DK; t += kThreads) {
    const float out = dnt_conv_channel(p, dnt_qk_channel(kh, t), DNT_R == 1);
    if (t < DNS_DK)
      sq[t] = out;
    else
      sk[t - DNS_DK] = out;
  }
  {
    const int h = kh + r * DNS_HK;
    // The state of head h, DNT_DEPTH passes of it in registers at a time (a ring: a pass's buffer
    // refilled with the pass DNT_DEPTH later as soon as it is stored), the first ones in flight
    // while the v conv runs. Lane group g8 owns column j of pass ps; its lane p8 holds S[i][j] for
    // i = 4 p8 + 32 m + 0..3. The product's blocks share the SM with this one, so the state does
    // not take all its registers at once (the whole of it would be 64 a thread at 256 threads).
    float4 S[kDepth][kPieces];
    float* st = p.delta_state + (i64)h * DNS_DV * DNS_DK;
    auto load_pass = [&](int ps, float4(&buf)[kPieces]) {
      const int j = (ps * kWarps + warp) * kCols + g8;
#pragma unroll
      for (int m = 0; m < kPieces; ++m)
        buf[m] = j < DNS_DV ? *reinterpret_cast<const float4*>(st + (i64)j * DNS_DK + 4 * p8 + 32 * m)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
    };
#pragma unroll
    for (int ps = 0; ps < kDepth; ++ps) load_pass(ps, S[ps]);
    for (int t = threadIdx.x; t < DNS_DV; t += kThreads)
      sv[t] = dnt_conv_channel(p, 2 * DNS_HK * DNS_DK + h * DNS_DV + t, true);
    __syncthreads();  // sq, sk, sv

    const DeltaHeadGates gates =
        delta_head_gates(__ldcg(p.b + h), __ldcg(p.a + h), p.dt_bias[h], p.ssm_a[h], sk, sq, DNS_DK, p.qk_eps);
    const float beta = gates.beta, decay = gates.decay, inv_k = gates.inv_k, inv_q = gates.inv_q;
    // k and q normalized as delta_net_step does (the same product each), read from shared memory
    // at each use rather than held in registers.
    auto kn = [&](int m, int e) { return sk[4 * p8 + 32 * m + e] * inv_k; };
    auto qn = [&](int m, int e) { return sq[4 * p8 + 32 * m + e] * inv_q; };
#pragma unroll
    for (int ps = 0; ps < kPasses; ++ps) {
      float4(&Sp)[kPieces] = S[ps % kDepth];
      const int j = (ps * kWarps + warp) * kCols + g8;
      const float out = delta_rule_column<DNT_LANES>(Sp, kn, qn, decay, beta, j < DNS_DV ? sv[j] : 0.0f);
      if (j < DNS_DV) {
#pragma unroll
        for (int m = 0; m < kPieces; ++m) *reinterpret_cast<float4*>(st + (i64)j * DNS_DK + 4 * p8 + 32 * m) = Sp[m];
        if (p8 == 0) so[j] = out * p.scale;
      }
      if (ps + kDepth < kPasses) load_pass(ps + kDepth, Sp);
    }
    __syncthreads();  // so

    // The gated rms norm of head h's outputs.
    float ss = 0.0f;
    for (int i = lane; i < DNS_DV; i += 32) ss += so[i] * so[i];
    ss = warp_sum(ss);
    const float rs = 1.0f / sqrtf(ss / (float)DNS_DV + p.eps);
    for (int t = threadIdx.x; t < DNS_DV; t += kThreads) {
      const float zj = __ldcg(p.z + (i64)h * DNS_DV + t);
      p.y[(i64)h * DNS_DV + t] = ((so[t] * rs) * p.norm_w[t]) * siluf_(zj);
    }
    __syncthreads();  // sq, sk, sv and so are the next head's
  }
  if constexpr (DNT_R > 1) {
    // Every value head of kh reads the q / k windows before it arrives here; the last writes them
    // back shifted (the values it read: no one wrote them in between).
    __threadfence();
    if (threadIdx.x == 0) {
      s_last = atomicAdd(conv_ticket, 1u) == DNT_R - 1;
      if (s_last) *conv_ticket = 0u;
    }
    __syncthreads();
    if (s_last)
      for (int t = threadIdx.x; t < 2 * DNS_DK; t += kThreads) dnt_conv_channel(p, dnt_qk_channel(kh, t), true);
    __syncthreads();  // s_last is the next head's
  }
}

// The gated delta rule over chunks of GDN_C = 64 tokens (WY form; docs/design/chunked-delta-rule.md,
// the CPU reference kernels/cpu/DeltaNetChunked.cc): gated_delta_scan's result with the sequential
// dependency cut from T steps to T / 64 chunk steps. Two launches:
//
//   gdn_chunk_prep  one block per (value head, chunk), all chunks at once: gamma (the cumulative
//                   log decay), the l2 norms, A = beta_t e^(gamma_t - gamma_s) k_t.k_s (s < t) and
//                   M = e^(gamma_t - gamma_s) q_t.k_s (s <= t), then [W | Y] = (I + A)^-1 [beta e^gamma K
//                   | beta V]: in f32 by forward substitution (one thread per column) for GDN_BF16 = 0;
//                   for GDN_BF16 = 1 the inverse is formed once (blocked, f32) and applied on tensor
//                   cores with split-bf16 operands. Writes W, Y, M (and the decayed rows) to the scratch.
//   gdn_chunk_scan  one block per (value head, GDN_COLS state columns), sequential over the chunks,
//                   the state tile in registers: U = Y - W S, O = scale (e^gamma Q S + M U),
//                   S = e^gamma_n S + (e^(gamma_n - gamma) K)^T U.
//
// GDN_BF16 = 0: f32 throughout (CUDA cores); the results agree with the sequential scan to f32
// rounding. GDN_BF16 = 1 (the op's precision "bf16"): the prep writes its products' operands in
// bf16 (W, e^gamma q^, e^(gamma_n - gamma) k^, M; Y and e^gamma_n in f32), laid out as the
// state pass's shared-memory stage, and the pass runs them on tensor cores (mma.sync m16n8k16,
// f32 accumulation, the state tile f32 in registers and rounded to bf16 only as an operand), a
// chunk's inputs fetched by two bulk copies while the previous chunk computes. Chunks start at
// the call's first token (the grid law: a call split at a multiple of 64 gives the same bits as
// one call).
#include "Common.cuh"
#include "DeltaNetParams.h"
#include "Mma.cuh"

#define GDN_C 64
#ifndef GDN_L2
#define GDN_L2 0
#endif
#ifndef GDN_COLS
#define GDN_COLS 32
#endif
#define GDN_KP (GDN_DK + 1)  // padded row strides (f32): consecutive rows in distinct banks
// Per (head, chunk) scratch, in floats: W [C][DK], M [C][C], Y [C][DV], gamma [C], 1/|k| [C], 1/|q| [C].
#define GDN_SCR_W 0
#define GDN_SCR_M (GDN_SCR_W + GDN_C * GDN_DK)
#define GDN_SCR_Y (GDN_SCR_M + GDN_C * GDN_C)
#define GDN_SCR_GAM (GDN_SCR_Y + GDN_C * GDN_DV)
#define GDN_SCR_IK (GDN_SCR_GAM + GDN_C)
#define GDN_SCR_IQ (GDN_SCR_IK + GDN_C)
#define GDN_SCR (GDN_SCR_IQ + GDN_C)
#ifndef GDN_BF16
#define GDN_BF16 0
#endif
// GDN_BF16's scratch per (chunk, head) is laid out as the state pass's shared-memory stage, so a
// block fetches a chunk with two bulk copies: bf16 W, Q~, K~ [C][DK] and M [C][C] (rows swizzled
// for ldmatrix: gdn_sw), e^gamma_n (16 bytes), then f32 Y as DV / NC column tiles [C][NC] (a
// block's tile contiguous). Rows are whole 32-byte sectors, written by full-sector stores. Offsets
// in u16 units (GDN_S16_*) and floats (GDN_S16_YF, GDN_SCR16).
#define GDN_NC 32  // state columns per block of the bf16 state pass
#define GDN_S16_W 0
#define GDN_S16_Q (GDN_C * GDN_DK)
#define GDN_S16_K (2 * GDN_C * GDN_DK)
#define GDN_S16_M (3 * GDN_C * GDN_DK)
#define GDN_S16_EN (GDN_S16_M + GDN_C * GDN_C)
#define GDN_S16_SHARED (GDN_S16_EN + 8)  // W, Q~, K~, M, e^gamma_n: what every column tile reads
#define GDN_S16_YF (GDN_S16_SHARED / 2)
#define GDN_SCR16 (GDN_S16_YF + GDN_DV * GDN_C)

// Element (r, col) of a bf16 matrix of width W stored with the 16-byte chunks of row r permuted
// (chunk k at k ^ (r & m), m = min(8, W / 8) - 1): rows stay contiguous and unpadded, and the
// eight rows an ldmatrix reads at one column fall in distinct bank groups.
template <int W>
__device__ __forceinline__ int gdn_sw(int r, int col) {
  constexpr int m = (W / 8 < 8 ? W / 8 : 8) - 1;
  return r * W + (((col >> 3) ^ (r & m)) << 3) + (col & 7);
}
#if GDN_BF16
#define GDN_SCR_PER GDN_SCR16
#else
#define GDN_SCR_PER GDN_SCR
#endif

#if defined(MEMRA_MMA_HOST_EMULATION)
#define GDN_SMEM_DECL(n) static __align__(16) float gdn_smem[n]
#else
#define GDN_SMEM_DECL(n) extern __shared__ __align__(16) float gdn_smem[]
#endif

#define GDN_PREP_THREADS 256

#if !GDN_BF16
// ---- gdn_chunk_prep (f32): 256 threads. Shared memory: k, q [C][KP], A [C][C + 1], gamma, 1/|k|,
// 1/|q|, beta.
#define GDN_PREP_SMEM_FLOATS (2 * GDN_C * GDN_KP + GDN_C * (GDN_C + 1) + 4 * GDN_C)

extern "C" __global__ void __launch_bounds__(GDN_PREP_THREADS) gdn_chunk_prep(const GdnChunkParams p) {
  memra_grid_dependency();
  GDN_SMEM_DECL(GDN_PREP_SMEM_FLOATS);
  float* sk = gdn_smem;
  float* sq = sk + GDN_C * GDN_KP;
  float* sA = sq + GDN_C * GDN_KP;
  float* sgam = sA + GDN_C * (GDN_C + 1);
  float* sik = sgam + GDN_C;
  float* siq = sik + GDN_C;
  float* sbeta = siq + GDN_C;  // 0 past n
  const int h = blockIdx.x % GDN_HV, c = blockIdx.x / GDN_HV, kh = h % GDN_HK;
  const int t0 = c * GDN_C;
  if (t0 >= p.n_tok) return;
  const int n = min(GDN_C, p.n_tok - t0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  float* scr = p.scratch + ((i64)c * GDN_HV + h) * GDN_SCR_PER;

  // k and q rows (zeros past n).
  for (int e = tid; e < GDN_C * GDN_DK; e += GDN_PREP_THREADS) {
    const int t = e / GDN_DK, i = e % GDN_DK;
    const bool in = t < n;
    sk[t * GDN_KP + i] = in ? p.k[((i64)(t0 + t) * GDN_HK + kh) * GDN_DK + i] : 0.0f;
    sq[t * GDN_KP + i] = in ? p.q[((i64)(t0 + t) * GDN_HK + kh) * GDN_DK + i] : 0.0f;
  }
  if (tid < GDN_C) sbeta[tid] = tid < n ? p.beta[(i64)(t0 + tid) * GDN_HV + h] : 0.0f;
  // gamma: the cumulative log decay (one warp; padding rows add 0, so gamma[C-1] = gamma[n-1]),
  // summed left to right as the CPU reference does.
  if (warp == 0) {
    const float g0 = lane < n ? p.g[(i64)(t0 + lane) * GDN_HV + h] : 0.0f;
    const float g1 = lane + 32 < n ? p.g[(i64)(t0 + lane + 32) * GDN_HV + h] : 0.0f;
    float acc = 0.0f;
    for (int s = 0; s < GDN_C; ++s) {
      acc += __shfl_sync(0xffffffffu, s < 32 ? g0 : g1, s & 31);
      if (lane == 0) sgam[s] = acc;
    }
  }
  __syncthreads();
  // Inverse l2 norms (one warp per row), applied to the rows in place.
  for (int t = warp; t < GDN_C; t += GDN_PREP_THREADS / 32) {
    float kk = 0.0f, qq = 0.0f;
    for (int i = lane; i < GDN_DK; i += 32) {
      kk += sk[t * GDN_KP + i] * sk[t * GDN_KP + i];
      qq += sq[t * GDN_KP + i] * sq[t * GDN_KP + i];
    }
    kk = warp_sum(kk);
    qq = warp_sum(qq);
    const float ik = GDN_L2 ? 1.0f / fmaxf(sqrtf(kk), p.qk_eps) : 1.0f;
    const float iq = GDN_L2 ? 1.0f / fmaxf(sqrtf(qq), p.qk_eps) : 1.0f;
    if (lane == 0) {
      sik[t] = ik;
      siq[t] = iq;
    }
    if (GDN_L2)
      for (int i = lane; i < GDN_DK; i += 32) {
        sk[t * GDN_KP + i] *= ik;
        sq[t * GDN_KP + i] *= iq;
      }
  }
  __syncthreads();
  // A (strictly lower) and M (lower with the diagonal) in f32: thread (s, t-group), 16 rows t each.
  {
    const int s = tid % GDN_C, tg = tid / GDN_C;
    for (int t = tg; t < GDN_C; t += GDN_PREP_THREADS / GDN_C) {
      float a = 0.0f, m = 0.0f;
      if (s <= t) {
        for (int i = 0; i < GDN_DK; ++i) {
          const float ks = sk[s * GDN_KP + i];
          a += sk[t * GDN_KP + i] * ks;
          m += sq[t * GDN_KP + i] * ks;
        }
        const float decay = expf(sgam[t] - sgam[s]);
        a = s < t ? sbeta[t] * decay * a : 0.0f;
        m *= decay;
      }
      sA[t * (GDN_C + 1) + s] = a;
      scr[GDN_SCR_M + t * GDN_C + s] = s <= t ? m : 0.0f;
    }
  }
  if (tid < GDN_C) {
    scr[GDN_SCR_GAM + tid] = sgam[tid];
    scr[GDN_SCR_IK + tid] = sik[tid];
    scr[GDN_SCR_IQ + tid] = siq[tid];
  }
  __syncthreads();
  // [W | Y] = (I + A)^-1 B by forward substitution, one column per thread: x_t = b_t - sum_{s<t}
  // A[t][s] x_s with b = beta e^gamma k (W's columns) or beta v (Y's).
  // The column's right-hand side first (its v loads all in flight at once), then the substitution
  // in place; four partial sums per row shorten each row's dependent chain 4x.
  for (int col = tid; col < GDN_DK + GDN_DV; col += GDN_PREP_THREADS) {
    float x[GDN_C];
#pragma unroll
    for (int t = 0; t < GDN_C; ++t) {
      x[t] = 0.0f;
      if (t < n) {
        const float bt = sbeta[t];
        x[t] = col < GDN_DK ? bt * expf(sgam[t]) * sk[t * GDN_KP + col]
                            : bt * p.v[((i64)(t0 + t) * GDN_HV + h) * GDN_DV + (col - GDN_DK)];
      }
    }
#pragma unroll
    for (int t = 1; t < GDN_C; ++t) {
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < t; ++s) part[s & 3] += sA[t * (GDN_C + 1) + s] * x[s];
      x[t] -= (part[0] + part[1]) + (part[2] + part[3]);
    }
    if (col < GDN_DK) {
#pragma unroll
      for (int t = 0; t < GDN_C; ++t) {
        scr[GDN_SCR_W + t * GDN_DK + col] = x[t];
      }
    } else {
#pragma unroll
      for (int t = 0; t < GDN_C; ++t) {
        scr[GDN_SCR_Y + t * GDN_DV + (col - GDN_DK)] = x[t];
      }
    }
  }
}

#endif  // !GDN_BF16

#if GDN_BF16
// ---- gdn_chunk_prep (bf16): 256 threads per (value head, chunk). The inverse T = (I + A)^-1 is
// formed once in f32 (blocked: the four 16 x 16 diagonal blocks by forward substitution, then
// T_ij = -T_ii sum_k A_ik T_kj block row by block row), and W = T diag(beta e^gamma) K^, Y = T
// diag(beta) V run on tensor cores with T split into bf16 high and low halves (K^ and V are bf16
// operands, as in every bf16 product), so T adds no rounding of its own; before, a forward
// substitution per output column (256 of them) made the prep 70 % of the scan's time (bench:
// memra-kernel-bench --section deltanet). Emulated nmse against float64 (deltanet_chunked_run.sh):
// 1.4e-5 with V rounded, 1.2e-5 with V split too (three products), 1.6e-5 with T not split.
// Shared memory: k^, q^ as bf16 [C][AS]; v as bf16 [C][VS]; A, then T in place, f32 [C][C + 1];
// a 768-float product buffer (later the column factors); gamma; beta.
#define GDN_AS (GDN_DK + 8)  // bf16 row strides of k^, q^ (ldmatrix rows in distinct bank groups)
#define GDN_VS (GDN_DV + 8)
#define GDN_PREP16_SMEM_BYTES (GDN_C * (2 * GDN_AS + GDN_VS) * 2 + (GDN_C * (GDN_C + 1) + 3 * 256 + 2 * GDN_C) * 4)

// x = hi + lo with hi, lo bf16: the two halves of an f32 operand.
__device__ __forceinline__ void gdn_split(float x, u16& hi, u16& lo) {
  hi = f32_to_bf16(x);
  lo = f32_to_bf16(x - bf16_to_f32(hi));
}

extern "C" __global__ void __launch_bounds__(GDN_PREP_THREADS, 3) gdn_chunk_prep(const GdnChunkParams p) {
  memra_grid_dependency();
  GDN_SMEM_DECL(GDN_PREP16_SMEM_BYTES / 4);
  u16* sKb = reinterpret_cast<u16*>(gdn_smem);
  u16* sQb = sKb + GDN_C * GDN_AS;
  u16* sVb = sQb + GDN_C * GDN_AS;
  float* sA = reinterpret_cast<float*>(sVb + GDN_C * GDN_VS);
  float* sP = sA + GDN_C * (GDN_C + 1);
  float* sgam = sP + 3 * 256;
  float* sbeta = sgam + GDN_C;  // 0 past n
  const int h = blockIdx.x % GDN_HV, c = blockIdx.x / GDN_HV, kh = h % GDN_HK;
  const int t0 = c * GDN_C;
  if (t0 >= p.n_tok) return;
  const int n = min(GDN_C, p.n_tok - t0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  float* scr = p.scratch + ((i64)c * GDN_HV + h) * GDN_SCR16;
  u16* scr16 = reinterpret_cast<u16*>(scr);
  u16* scrW = scr16 + GDN_S16_W;
  u16* scrQ = scr16 + GDN_S16_Q;
  u16* scrK = scr16 + GDN_S16_K;
  u16* scrM = scr16 + GDN_S16_M;

  // v rows: every load issued first (zeros past n), stored as bf16 once gamma is under way.
  constexpr int kV4 = (GDN_C * GDN_DV / 4 + GDN_PREP_THREADS - 1) / GDN_PREP_THREADS;
  float vr[kV4][4];
#pragma unroll
  for (int a = 0; a < kV4; ++a) {
    const int e = tid + a * GDN_PREP_THREADS, t = e / (GDN_DV / 4), j4 = e % (GDN_DV / 4) * 4;
    const bool in = e < GDN_C * GDN_DV / 4 && t < n;
    const float* src = p.v + ((i64)(t0 + t) * GDN_HV + h) * GDN_DV + j4;
#pragma unroll
    for (int x = 0; x < 4; ++x) vr[a][x] = in ? src[x] : 0.0f;
  }
  if (tid < GDN_C) sbeta[tid] = tid < n ? p.beta[(i64)(t0 + tid) * GDN_HV + h] : 0.0f;
  // gamma: the cumulative log decay by a warp scan (padding rows add 0). The order of the additions
  // differs from the f32 path's left-to-right sum by rounding only.
  if (warp == 0) {
    float g0 = lane < n ? p.g[(i64)(t0 + lane) * GDN_HV + h] : 0.0f;
    float g1 = lane + 32 < n ? p.g[(i64)(t0 + lane + 32) * GDN_HV + h] : 0.0f;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float y0 = __shfl_up_sync(0xffffffffu, g0, o), y1 = __shfl_up_sync(0xffffffffu, g1, o);
      if (lane >= o) {
        g0 += y0;
        g1 += y1;
      }
    }
    sgam[lane] = g0;
    sgam[lane + 32] = g1 + __shfl_sync(0xffffffffu, g0, 31);
  }
#pragma unroll
  for (int a = 0; a < kV4; ++a) {
    const int e = tid + a * GDN_PREP_THREADS, t = e / (GDN_DV / 4), j4 = e % (GDN_DV / 4) * 4;
    if (e < GDN_C * GDN_DV / 4) {
      u32* dst = reinterpret_cast<u32*>(sVb + t * GDN_VS + j4);
      dst[0] = mma_pack_bf16(vr[a][0], vr[a][1]);
      dst[1] = mma_pack_bf16(vr[a][2], vr[a][3]);
    }
  }
  __syncthreads();
  // k and q rows, warp w taking rows w, w + 8, ... in batches whose loads are all issued before
  // any is used, four consecutive elements a lane (16-byte loads, 8-byte stores): the l2 norms, k^
  // and q^ as bf16 for the products, and the state pass's decayed rows Q~ = e^gamma q^,
  // K~ = e^(gamma_n - gamma) k^ (rounded once, from f32).
  {
    constexpr int kPer = (GDN_DK + 127) / 128, kBatch = 4, kWarps = GDN_PREP_THREADS / 32;
    const float gam_n = sgam[GDN_C - 1];
#pragma unroll 1
    for (int b0 = 0; b0 < GDN_C / kWarps; b0 += kBatch) {
      float4 kv[kBatch][kPer], qv[kBatch][kPer];
#pragma unroll
      for (int r = 0; r < kBatch; ++r) {
        const int t = warp + kWarps * (b0 + r);
#pragma unroll
        for (int a = 0; a < kPer; ++a) {
          const int i = 4 * lane + 128 * a;
          const i64 at = ((i64)(t0 + t) * GDN_HK + kh) * GDN_DK + i;
          const bool in = t < n && i < GDN_DK;
          const float4 z = {0.0f, 0.0f, 0.0f, 0.0f};
          kv[r][a] = in ? *reinterpret_cast<const float4*>(p.k + at) : z;
          qv[r][a] = in ? *reinterpret_cast<const float4*>(p.q + at) : z;
        }
      }
#pragma unroll
      for (int r = 0; r < kBatch; ++r) {
        const int t = warp + kWarps * (b0 + r);
        float kk = 0.0f, qq = 0.0f;
#pragma unroll
        for (int a = 0; a < kPer; ++a) {
          const float4 k4 = kv[r][a], q4 = qv[r][a];
          kk += k4.x * k4.x + k4.y * k4.y + k4.z * k4.z + k4.w * k4.w;
          qq += q4.x * q4.x + q4.y * q4.y + q4.z * q4.z + q4.w * q4.w;
        }
        kk = warp_sum(kk);
        qq = warp_sum(qq);
        const float ik = GDN_L2 ? 1.0f / fmaxf(sqrtf(kk), p.qk_eps) : 1.0f;
        const float iq = GDN_L2 ? 1.0f / fmaxf(sqrtf(qq), p.qk_eps) : 1.0f;
        const float eq = expf(sgam[t]), ek = expf(gam_n - sgam[t]);
#pragma unroll
        for (int a = 0; a < kPer; ++a) {
          const int i = 4 * lane + 128 * a;
          if (i >= GDN_DK) break;
          const float4 k4 = kv[r][a], q4 = qv[r][a];
          const float k0 = k4.x * ik, k1 = k4.y * ik, k2 = k4.z * ik, k3 = k4.w * ik;
          const float q0 = q4.x * iq, q1 = q4.y * iq, q2 = q4.z * iq, q3 = q4.w * iq;
          *reinterpret_cast<uint2*>(sKb + t * GDN_AS + i) = uint2{mma_pack_bf16(k0, k1), mma_pack_bf16(k2, k3)};
          *reinterpret_cast<uint2*>(sQb + t * GDN_AS + i) = uint2{mma_pack_bf16(q0, q1), mma_pack_bf16(q2, q3)};
          *reinterpret_cast<uint2*>(scrQ + gdn_sw<GDN_DK>(t, i)) =
              uint2{mma_pack_bf16(eq * q0, eq * q1), mma_pack_bf16(eq * q2, eq * q3)};
          *reinterpret_cast<uint2*>(scrK + gdn_sw<GDN_DK>(t, i)) =
              uint2{mma_pack_bf16(ek * k0, ek * k1), mma_pack_bf16(ek * k2, ek * k3)};
        }
      }
    }
  }
  if (tid < 4) scr[GDN_S16_EN / 2 + tid] = tid == 0 ? expf(sgam[GDN_C - 1]) : 0.0f;
  __syncthreads();
  // A (strictly lower, f32) and M (lower with the diagonal, bf16 to the scratch): K^ K^T and Q^ K^T
  // on tensor cores, warp w computing rows 16 (w / 2).., columns 32 (w % 2)...
  {
    const int mt = warp >> 1, nb = (warp & 1) * 32;
    float kk[4][4], qk[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) kk[nt][e] = qk[nt][e] = 0.0f;
    if (nb <= mt * 16 + 15) {  // a tile wholly above the diagonal stays 0
#pragma unroll 2
      for (int k0 = 0; k0 < GDN_DK; k0 += 16) {
        u32 ak[4], aq[4];
        mma_ldmatrix_x4(ak, sKb + (mt * 16 + (lane & 15)) * GDN_AS + k0 + (lane >> 4) * 8);
        mma_ldmatrix_x4(aq, sQb + (mt * 16 + (lane & 15)) * GDN_AS + k0 + (lane >> 4) * 8);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          u32 b[4];
          mma_ldmatrix_x4(b,
                          sKb + (nb + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * GDN_AS + k0 + ((lane >> 3) & 1) * 8);
          mma_bf16(kk[2 * np], ak, b[0], b[1]);
          mma_bf16(kk[2 * np + 1], ak, b[2], b[3]);
          mma_bf16(qk[2 * np], aq, b[0], b[1]);
          mma_bf16(qk[2 * np + 1], aq, b[2], b[3]);
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int t = mt * 16 + g + hh * 8, s = nb + nt * 8 + 2 * tq;
        const float d0 = s <= t ? expf(sgam[t] - sgam[s]) : 0.0f;
        const float d1 = s + 1 <= t ? expf(sgam[t] - sgam[s + 1]) : 0.0f;
        sA[t * (GDN_C + 1) + s] = s < t ? sbeta[t] * d0 * kk[nt][2 * hh] : 0.0f;
        sA[t * (GDN_C + 1) + s + 1] = s + 1 < t ? sbeta[t] * d1 * kk[nt][2 * hh + 1] : 0.0f;
        *reinterpret_cast<u32*>(scrM + gdn_sw<GDN_C>(t, s)) =
            mma_pack_bf16(qk[nt][2 * hh] * d0, qk[nt][2 * hh + 1] * d1);
      }
  }
  __syncthreads();
  // T = (I + A)^-1 in place of A. The diagonal blocks: thread (b, j) solves column j of block b
  // in registers (x_r = delta_rj - sum_{s<r} A_rs x_s), written back once every thread has read A.
  {
    float x[16];
    const int b = tid >> 4, j = tid & 15;
    if (tid < GDN_C) {
      const float* ab = sA + 16 * b * (GDN_C + 1) + 16 * b;
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        float acc = r == j ? 1.0f : 0.0f;
#pragma unroll
        for (int s2 = 0; s2 < r; ++s2) acc -= ab[r * (GDN_C + 1) + s2] * x[s2];
        x[r] = acc;
      }
    }
    __syncthreads();
    if (tid < GDN_C)
#pragma unroll
      for (int r = 0; r < 16; ++r) sA[(16 * b + r) * (GDN_C + 1) + 16 * b + j] = x[r];
    __syncthreads();
  }
  // Block rows 1..3: P_j = sum_{x in [16 j, 16 i)} A[16 i + r][x] T[x][16 j + c], then
  // T_ij = -T_ii P_j (T rows above i are final; A's row block i is read before it is replaced).
#pragma unroll 1
  for (int i = 1; i < GDN_C / 16; ++i) {
    for (int e = tid; e < i * 256; e += GDN_PREP_THREADS) {
      const int j = e >> 8, r = (e >> 4) & 15, cc = e & 15;
      float acc = 0.0f;
      for (int x = 16 * j; x < 16 * i; ++x)
        acc += sA[(16 * i + r) * (GDN_C + 1) + x] * sA[x * (GDN_C + 1) + 16 * j + cc];
      sP[e] = acc;
    }
    __syncthreads();
    for (int e = tid; e < i * 256; e += GDN_PREP_THREADS) {
      const int j = e >> 8, r = (e >> 4) & 15, cc = e & 15;
      float acc = 0.0f;
      for (int m = 0; m <= r; ++m) acc += sA[(16 * i + r) * (GDN_C + 1) + 16 * i + m] * sP[j * 256 + m * 16 + cc];
      sA[(16 * i + r) * (GDN_C + 1) + 16 * j + cc] = -acc;
    }
    __syncthreads();
  }
  // Column factors of T: beta e^gamma for W, beta for Y.
  float* sfk = sP;
  if (tid < GDN_C) sfk[tid] = sbeta[tid] * expf(sgam[tid]);
  __syncthreads();
  // [W | Y] = T diag(f) [K^ | V]. Warp w: W (w even) or Y (w odd), half (w / 2) % 2 of the columns,
  // row tiles {0, 3} (w < 4) or {1, 2}: T is lower triangular, so a row tile mt needs mt + 1
  // k-steps and each warp does five. T's fragments (f32, scaled by the column factors, split
  // hi / lo) are built once per row tile.
  {
    const bool is_y = warp & 1;
    const float* f = is_y ? sbeta : sfk;
    const int width = is_y ? GDN_DV : GDN_DK, c_lo = ((warp >> 1) & 1) * (width / 2), c_hi = c_lo + width / 2;
#pragma unroll 1
    for (int pass = 0; pass < 2; ++pass) {
      const int mt = warp < 4 ? (pass ? 3 : 0) : (pass ? 2 : 1);
      u32 ahi[GDN_C / 16][4], alo[GDN_C / 16][4];
#pragma unroll
      for (int ks = 0; ks < GDN_C / 16; ++ks)
#pragma unroll
        for (int fr = 0; fr < 4; ++fr) {
          const int row = mt * 16 + g + (fr & 1) * 8, col = ks * 16 + 2 * tq + (fr >> 1) * 8;
          u16 h0, l0, h1, l1;
          gdn_split(sA[row * (GDN_C + 1) + col] * f[col], h0, l0);
          gdn_split(sA[row * (GDN_C + 1) + col + 1] * f[col + 1], h1, l1);
          ahi[ks][fr] = (u32)h0 | ((u32)h1 << 16);
          alo[ks][fr] = (u32)l0 | ((u32)l1 << 16);
        }
#pragma unroll 1
      for (int n0 = c_lo; n0 < c_hi; n0 += 64) {
        float acc[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < GDN_C / 16; ++ks) {
          if (ks > mt) break;
#pragma unroll
          for (int np = 0; np < 4; ++np) {
            if (n0 + np * 16 >= c_hi) break;
            u32 b[4];
            const int br = ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), bc = n0 + np * 16 + (lane >> 4) * 8;
            mma_ldmatrix_x4_trans(b, is_y ? sVb + br * GDN_VS + bc : sKb + br * GDN_AS + bc);
            mma_bf16(acc[2 * np], ahi[ks], b[0], b[1]);
            mma_bf16(acc[2 * np + 1], ahi[ks], b[2], b[3]);
            mma_bf16(acc[2 * np], alo[ks], b[0], b[1]);
            mma_bf16(acc[2 * np + 1], alo[ks], b[2], b[3]);
          }
        }
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int row = mt * 16 + g + hh * 8, col = n0 + nt * 8 + 2 * tq;
            if (col >= c_hi) continue;
            if (is_y) {
              *reinterpret_cast<float2*>(scr + GDN_S16_YF + ((col / GDN_NC) * GDN_C + row) * GDN_NC + col % GDN_NC) =
                  make_float2(acc[nt][2 * hh], acc[nt][2 * hh + 1]);
            } else {
              *reinterpret_cast<u32*>(scrW + gdn_sw<GDN_DK>(row, col)) =
                  mma_pack_bf16(acc[nt][2 * hh], acc[nt][2 * hh + 1]);
            }
          }
      }
    }
  }
}
#endif  // GDN_BF16

#if !GDN_BF16
// ---- gdn_chunk_scan: 256 threads per (head, GDN_COLS columns). Shared memory per chunk: W, the
// decayed q (e^gamma q^) and k (e^(gamma_n - gamma) k^) rows [C][KP], M [C][C + 1], Y and U
// [C][COLS], the state tile [DK][COLS].
#define GDN_SCAN_THREADS 256
#define GDN_CP (GDN_COLS + 1)
#define GDN_SCAN_SMEM_FLOATS \
  (3 * GDN_C * GDN_KP + GDN_C * (GDN_C + 1) + 2 * GDN_C * GDN_CP + GDN_DK * GDN_CP + 2 * GDN_C)
// Thread tiles: U and O as (4 rows t) x (COLS / 16 columns); S as (DK / 16 rows i) x (COLS / 16).
#define GDN_JW (GDN_COLS / 16)
#define GDN_IW (GDN_DK / 16)

// acc (4 rows x GDN_JW columns) += or -= A (4 rows x K, row stride SA) x B (K x GDN_JW, row
// stride SB), in f32.
template <int K, int SA, int SB, bool kSub>
__device__ __forceinline__ void gdn_rows_f32(float (*acc)[GDN_JW], const float* a, const float* b) {
  for (int i = 0; i < K; ++i) {
    float bv[GDN_JW];
#pragma unroll
    for (int c = 0; c < GDN_JW; ++c) bv[c] = b[i * SB + c];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float av = a[r * SA + i];
#pragma unroll
      for (int c = 0; c < GDN_JW; ++c) {
        if (kSub)
          acc[r][c] -= av * bv[c];
        else
          acc[r][c] += av * bv[c];
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(GDN_SCAN_THREADS) gdn_chunk_scan(const GdnChunkParams p) {
  memra_grid_dependency();
  GDN_SMEM_DECL(GDN_SCAN_SMEM_FLOATS);
  float* sW = gdn_smem;
  float* sQ = sW + GDN_C * GDN_KP;
  float* sK = sQ + GDN_C * GDN_KP;
  float* sM = sK + GDN_C * GDN_KP;
  float* sY = sM + GDN_C * (GDN_C + 1);
  float* sU = sY + GDN_C * GDN_CP;
  float* sS = sU + GDN_C * GDN_CP;
  float* sfq = sS + GDN_DK * GDN_CP;  // per row: e^gamma / |q| and e^(gamma_n - gamma) / |k|
  float* sfk = sfq + GDN_C;
  const int tiles = GDN_DV / GDN_COLS;
  const int h = blockIdx.x / tiles, j0 = (blockIdx.x % tiles) * GDN_COLS, kh = h % GDN_HK;
  const int tid = threadIdx.x;
  const int jq = tid % 16, grp = tid / 16;  // this thread's column group and row group
  float* st = p.state + (i64)h * GDN_DV * GDN_DK;

  // The state tile S[i][j0 + j]: in registers as rows grp * IW .., columns jq * JW .., mirrored in sS.
  float S[GDN_IW][GDN_JW];
#pragma unroll
  for (int a = 0; a < GDN_IW; ++a)
#pragma unroll
    for (int b = 0; b < GDN_JW; ++b) {
      const int i = grp * GDN_IW + a, j = jq * GDN_JW + b;
      S[a][b] = st[(i64)(j0 + j) * GDN_DK + i];
      sS[i * GDN_CP + j] = S[a][b];
    }

  const int n_chunks = (p.n_tok + GDN_C - 1) / GDN_C;
  for (int c = 0; c < n_chunks; ++c) {
    const int t0 = c * GDN_C, n = min(GDN_C, p.n_tok - t0);
    const float* scr = p.scratch + ((i64)c * GDN_HV + h) * GDN_SCR;
    const float gam_n = scr[GDN_SCR_GAM + GDN_C - 1];
    __syncthreads();  // the previous chunk's reads of the tiles are done
    if (tid < GDN_C) {
      const float gam = scr[GDN_SCR_GAM + tid];
      sfq[tid] = expf(gam) * scr[GDN_SCR_IQ + tid];
      sfk[tid] = expf(gam_n - gam) * scr[GDN_SCR_IK + tid];
    }
    // The loads of each loop are independent: unrolled so several are in flight per thread.
#pragma unroll 8
    for (int e = tid; e < GDN_C * GDN_DK; e += GDN_SCAN_THREADS)
      sW[(e / GDN_DK) * GDN_KP + e % GDN_DK] = scr[GDN_SCR_W + e];
#pragma unroll 8
    for (int e = tid; e < GDN_C * GDN_C; e += GDN_SCAN_THREADS)
      sM[(e / GDN_C) * (GDN_C + 1) + e % GDN_C] = scr[GDN_SCR_M + e];
#pragma unroll 8
    for (int e = tid; e < GDN_C * GDN_COLS; e += GDN_SCAN_THREADS) {
      const int t = e / GDN_COLS, j = e % GDN_COLS;
      sY[t * GDN_CP + j] = scr[GDN_SCR_Y + t * GDN_DV + j0 + j];
    }
    __syncthreads();  // sfq, sfk
#pragma unroll 8
    for (int e = tid; e < GDN_C * GDN_DK; e += GDN_SCAN_THREADS) {
      const int t = e / GDN_DK, i = e % GDN_DK;
      const bool in = t < n;
      const float qv = in ? p.q[((i64)(t0 + t) * GDN_HK + kh) * GDN_DK + i] : 0.0f;
      const float kv = in ? p.k[((i64)(t0 + t) * GDN_HK + kh) * GDN_DK + i] : 0.0f;
      sQ[t * GDN_KP + i] = qv * sfq[t];
      sK[t * GDN_KP + i] = kv * sfk[t];
    }
    __syncthreads();
    // U = Y - W S (rows grp * 4 .., columns jq * JW ..).
    {
      float u[4][GDN_JW];
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < GDN_JW; ++b) u[a][b] = sY[(grp * 4 + a) * GDN_CP + jq * GDN_JW + b];
      gdn_rows_f32<GDN_DK, GDN_KP, GDN_CP, true>(u, sW + grp * 4 * GDN_KP, sS + jq * GDN_JW);
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < GDN_JW; ++b) sU[(grp * 4 + a) * GDN_CP + jq * GDN_JW + b] = u[a][b];
    }
    __syncthreads();
    // O = scale (Q~ S + M U), the same tiles; rows past n are not stored.
    {
      float o[4][GDN_JW];
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < GDN_JW; ++b) o[a][b] = 0.0f;
      gdn_rows_f32<GDN_DK, GDN_KP, GDN_CP, false>(o, sQ + grp * 4 * GDN_KP, sS + jq * GDN_JW);
      gdn_rows_f32<GDN_C, GDN_C + 1, GDN_CP, false>(o, sM + grp * 4 * (GDN_C + 1),
                                                    sU + jq * GDN_JW);  // M: 0 above the diagonal
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const int t = grp * 4 + a;
        if (t < n)
#pragma unroll
          for (int b = 0; b < GDN_JW; ++b)
            p.o[((i64)(t0 + t) * GDN_HV + h) * GDN_DV + j0 + jq * GDN_JW + b] = o[a][b] * p.scale;
      }
    }
    // S = e^gamma_n S + K~^T U (this thread's registers), then mirrored for the next chunk.
    {
      const float en = expf(gam_n);
#pragma unroll
      for (int a = 0; a < GDN_IW; ++a)
#pragma unroll
        for (int b = 0; b < GDN_JW; ++b) S[a][b] *= en;
      for (int s = 0; s < GDN_C; ++s) {
        float uv[GDN_JW];
#pragma unroll
        for (int b = 0; b < GDN_JW; ++b) uv[b] = sU[s * GDN_CP + jq * GDN_JW + b];
#pragma unroll
        for (int a = 0; a < GDN_IW; ++a) {
          const float kv = sK[s * GDN_KP + grp * GDN_IW + a];
#pragma unroll
          for (int b = 0; b < GDN_JW; ++b) S[a][b] += kv * uv[b];
        }
      }
    }
    __syncthreads();  // every thread's reads of sS (U and O) are done
#pragma unroll
    for (int a = 0; a < GDN_IW; ++a)
#pragma unroll
      for (int b = 0; b < GDN_JW; ++b) sS[(grp * GDN_IW + a) * GDN_CP + jq * GDN_JW + b] = S[a][b];
  }
#pragma unroll
  for (int a = 0; a < GDN_IW; ++a)
#pragma unroll
    for (int b = 0; b < GDN_JW; ++b) st[(i64)(j0 + jq * GDN_JW + b) * GDN_DK + grp * GDN_IW + a] = S[a][b];
}
#endif  // !GDN_BF16

#if GDN_BF16
// ---- gdn_chunk_scan on tensor cores: 8 warps per (head, 32 state columns). Per chunk (inputs
// double-buffered: chunk c + 1 streams in with cp.async while chunk c computes):
//   U = Y - W S        warp w: rows 16 (w / 2).., columns 16 (w % 2)..  (U rounded to bf16 in sU)
//   O = Q~ S + M U     the same tile; stored * scale for rows < n
//   S = e^gamma_n S + K~^T U   warp w: state rows 16 w.. (and 16 (w + 8).. for DK > 128), all 32
//                      columns, f32 accumulators kept across chunks; S as bf16 in sS for the products.
#define GDN_SCAN_THREADS 256
#define GDN_NS (GDN_NC + 8)
#define GDN_SMT ((GDN_DK / 16 + 7) / 8)  // state m-tiles per warp
// One stage (u16 units): the scratch's shared part (W, Q~, K~, M, e^gamma_n), then this block's Y
// tile [C][YS] f32.
#define GDN_STAGE_U16 (GDN_S16_SHARED + 2 * GDN_C * GDN_NC)
#define GDN_SCAN_SMEM_BYTES (2 * (2 * GDN_STAGE_U16 + GDN_DK * GDN_NS + GDN_C * GDN_NS) + 16)  // + 2 mbarriers

// Issues chunk c's inputs into stage `st` (one thread): two bulk copies, the shared part and the
// block's Y tile, completing on the stage's mbarrier.
__device__ __forceinline__ void gdn_stage(u16* st, u32* bar, const float* scr, int tile) {
  mma_bar_arrive_expect(bar, GDN_STAGE_U16 * 2);
  mma_bulk_copy(st, scr, GDN_S16_SHARED * 2, bar);
  mma_bulk_copy(st + GDN_S16_SHARED, scr + GDN_S16_YF + tile * GDN_C * GDN_NC, GDN_C * GDN_NC * 4, bar);
  mma_bulk_commit();
}

// Calls f(q, nt, e, i, j, in) for each element of this thread's state tile in the accumulator
// layout: m-tile warp + 8 q (rows i = 16 (warp + 8 q) + g, + 8), n-tile nt (columns j = 8 nt +
// 2 tq, + 1); `in`: the m-tile lies within DK.
template <class F>
__device__ __forceinline__ void gdn_state_tile(int warp, int g, int tq, F f) {
#pragma unroll
  for (int q = 0; q < GDN_SMT; ++q)
#pragma unroll
    for (int nt = 0; nt < GDN_NC / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int mt = warp + 8 * q;
        f(q, nt, e, mt * 16 + g + (e >> 1) * 8, nt * 8 + 2 * tq + (e & 1), mt < GDN_DK / 16);
      }
}

// acc[0..1] (two 16 x 8 tiles) += A (rows a_row0.. of a swizzled [.][K] matrix: gdn_sw) x B (K x 16,
// row-major with row stride SB: the fragments by ldmatrix.trans).
template <int K, int SB>
__device__ __forceinline__ void gdn_mma_rows(float (*acc)[4], const u16* a, int a_row0, const u16* b, int lane) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    u32 af[4], bf[4];
    mma_ldmatrix_x4(af, a + gdn_sw<K>(a_row0 + (lane & 15), kk * 16 + (lane >> 4) * 8));
    mma_ldmatrix_x4_trans(bf, b + (kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)) * SB + (lane >> 4) * 8);
    mma_bf16(acc[0], af, bf[0], bf[1]);
    mma_bf16(acc[1], af, bf[2], bf[3]);
  }
}

extern "C" __global__ void __launch_bounds__(GDN_SCAN_THREADS) gdn_chunk_scan(const GdnChunkParams p) {
  memra_grid_dependency();
  GDN_SMEM_DECL(GDN_SCAN_SMEM_BYTES / 4);
  u16* stages = reinterpret_cast<u16*>(gdn_smem);
  u16* sS = stages + 2 * GDN_STAGE_U16;                     // [DK][NS] the state tile as bf16
  u16* sU = sS + GDN_DK * GDN_NS;                           // [C][NS]
  u32* bars = reinterpret_cast<u32*>(sU + GDN_C * GDN_NS);  // stage s's mbarrier: bars + 2 s
  const int tiles = GDN_DV / GDN_NC;
  const int h = blockIdx.x / tiles, j0 = (blockIdx.x % tiles) * GDN_NC;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  float* st = p.state + (i64)h * GDN_DV * GDN_DK;
  const int n_chunks = (p.n_tok + GDN_C - 1) / GDN_C;
  if (threadIdx.x == 0) {
    mma_bar_init(bars, 1);
    mma_bar_init(bars + 2, 1);
  }
  __syncthreads();
  const bool issuer = threadIdx.x == 0;  // issues the stages' copies and waits for them
  if (issuer && n_chunks > 0) gdn_stage(stages, bars, p.scratch + (i64)h * GDN_SCR16, j0 / GDN_NC);

  // The state tile in the accumulator layout (gdn_state_tile), f32 across the chunks.
  float S[GDN_SMT][GDN_NC / 8][4];
  gdn_state_tile(warp, g, tq, [&](int q, int nt, int e, int i, int j, bool in) {
    S[q][nt][e] = in ? st[(i64)(j0 + j) * GDN_DK + i] : 0.0f;
    if (in) sS[i * GDN_NS + j] = f32_to_bf16(S[q][nt][e]);
  });

  const int mt_u = warp >> 1, nt_u = (warp & 1) * 2;  // the U / O tile of this warp
  for (int c = 0; c < n_chunks; ++c) {
    if (issuer) {
      if (c + 1 < n_chunks)
        gdn_stage(stages + ((c + 1) & 1) * GDN_STAGE_U16, bars + 2 * ((c + 1) & 1),
                  p.scratch + ((i64)(c + 1) * GDN_HV + h) * GDN_SCR16, j0 / GDN_NC);
      mma_bulk_wait(bars + 2 * (c & 1), (unsigned)(c >> 1) & 1u, c + 1 < n_chunks ? 1 : 0);
    }
    __syncthreads();  // chunk c's stage and the previous chunk's sS are visible to every warp
    const u16* sW = stages + (c & 1) * GDN_STAGE_U16;
    const u16* sQ = sW + GDN_S16_Q;
    const u16* sK = sW + GDN_S16_K;
    const u16* sM = sW + GDN_S16_M;
    const float en = *reinterpret_cast<const float*>(sW + GDN_S16_EN);
    const float* sY = reinterpret_cast<const float*>(sW + GDN_S16_SHARED);
    const int t0 = c * GDN_C, n = min(GDN_C, p.n_tok - t0);

    // U = Y - W S.
    float u[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    gdn_mma_rows<GDN_DK, GDN_NS>(u, sW, mt_u * 16, sS + nt_u * 8, lane);
#pragma unroll
    for (int n2 = 0; n2 < 2; ++n2)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = mt_u * 16 + g + hh * 8, j = (nt_u + n2) * 8 + 2 * tq;
        const float2 y = *reinterpret_cast<const float2*>(sY + r * GDN_NC + j);
        const float y0 = y.x - u[n2][2 * hh], y1 = y.y - u[n2][2 * hh + 1];
        *reinterpret_cast<u32*>(sU + r * GDN_NS + j) = mma_pack_bf16(y0, y1);
      }
    __syncthreads();  // U complete

    // O = Q~ S + M U.
    float o[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    gdn_mma_rows<GDN_DK, GDN_NS>(o, sQ, mt_u * 16, sS + nt_u * 8, lane);
    gdn_mma_rows<GDN_C, GDN_NS>(o, sM, mt_u * 16, sU + nt_u * 8, lane);
#pragma unroll
    for (int n2 = 0; n2 < 2; ++n2)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = mt_u * 16 + g + hh * 8, j = (nt_u + n2) * 8 + 2 * tq;
        if (r < n)
          *reinterpret_cast<float2*>(p.o + ((i64)(t0 + r) * GDN_HV + h) * GDN_DV + j0 + j) =
              make_float2(o[n2][2 * hh] * p.scale, o[n2][2 * hh + 1] * p.scale);
      }

      // S = e^gamma_n S + K~^T U (A = K~^T from K~'s rows by ldmatrix.trans).
#pragma unroll
    for (int q = 0; q < GDN_SMT; ++q) {
      const int mt = warp + 8 * q;
      if (mt >= GDN_DK / 16) continue;
#pragma unroll
      for (int nt = 0; nt < GDN_NC / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[q][nt][e] *= en;
#pragma unroll
      for (int kk = 0; kk < GDN_C / 16; ++kk) {
        u32 a[4];
        mma_ldmatrix_x4_trans(
            a, sK + gdn_sw<GDN_DK>(kk * 16 + (lane & 7) + ((lane >> 4) << 3), mt * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int nn = 0; nn < GDN_NC / 16; ++nn) {
          u32 b[4];
          mma_ldmatrix_x4_trans(
              b, sU + (kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)) * GDN_NS + nn * 16 + (lane >> 4) * 8);
          mma_bf16(S[q][2 * nn], a, b[0], b[1]);
          mma_bf16(S[q][2 * nn + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp's reads of sS and of this stage are done
#pragma unroll
    for (int q = 0; q < GDN_SMT; ++q) {
      const int mt = warp + 8 * q;
      if (mt >= GDN_DK / 16) continue;
#pragma unroll
      for (int nt = 0; nt < GDN_NC / 8; ++nt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int i = mt * 16 + g + hh * 8, j = nt * 8 + 2 * tq;
          *reinterpret_cast<u32*>(sS + i * GDN_NS + j) = mma_pack_bf16(S[q][nt][2 * hh], S[q][nt][2 * hh + 1]);
        }
    }
  }
  gdn_state_tile(warp, g, tq, [&](int q, int nt, int e, int i, int j, bool in) {
    if (in) st[(i64)(j0 + j) * GDN_DK + i] = S[q][nt][e];
  });
}
#endif  // GDN_BF16

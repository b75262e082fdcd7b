// Prefill attention on tensor cores (FlashAttention-2's schedule with mma.sync m16n8k16 bf16, f32
// accumulation and an online softmax in f32): causal or sliding-window, GQA, the output gate fused
// (per element, or per head with FA_HEAD_GATE).
//
// One block of FA_WARPS warps owns FA_BR = 16 * FA_WARPS query rows of one kv head: FA_TB tokens
// x the FA_G query heads of the group (row r = token r / FA_G, head r % FA_G), so every key / value
// tile it stages serves all the group's heads. Each warp owns 16 rows. Per tile of FA_BC keys:
// S = Q K^T (16 x 64 per warp, Q and K from shared memory by ldmatrix), the causal / window mask
// where the tile crosses a row's bounds, the online softmax in registers, then O += P V with P
// taken from S's accumulator layout (it is the A layout of the next mma) and V by ldmatrix.trans.
// The caches and activations are f32: Q is rounded to bf16 as it is staged; K and V come from the
// call's bf16 copy of the cache rows (flash_kv_bf16, the step's scratch) by 16-byte cp.async into
// FA_STAGES shared-memory buffers, the next tile in flight while the current one computes.
// The grid is token blocks x Hkv x D / FA_DV (flattened): head dims above 256 split the output
// columns over blocks (each recomputes S) so the O accumulator stays within registers. Token
// blocks run the longest key ranges first.
#include "Common.cuh"
#include "FlashAttention.cuh"
#include "FlashAttentionParams.h"
#include "Mma.cuh"

#ifndef FA_WARPS
#define FA_WARPS 4
#endif
#ifndef FA_STAGES
#define FA_STAGES 1
#endif
#ifndef FA_DV
#define FA_DV FA_D
#endif
#define FA_G (FA_HQ / FA_HKV)
#define FA_BR (16 * FA_WARPS)
#define FA_TB (FA_BR / FA_G)
#define FA_BC 64
// Row strides in bf16 elements: 16 bytes past a multiple of 128, so the 8 row addresses of an
// ldmatrix fall in distinct bank groups.
#define FA_QS (FA_D + 8)
#define FA_VS (FA_DV + 8)
#define FA_SMEM_BYTES ((FA_BR * FA_QS + FA_STAGES * (FA_BC * FA_QS + FA_BC * FA_VS)) * 2)

#if defined(MEMRA_MMA_HOST_EMULATION)
#define FA_SMEM_DECL static __align__(16) unsigned char fa_smem[FA_SMEM_BYTES]
#else
#define FA_SMEM_DECL extern __shared__ __align__(16) unsigned char fa_smem[]
#endif

// Rows [j0, j0 + FA_BC) of kv head kvh, columns [c0, c0 + W), from a bf16 copy [rows,
// Hkv, D] into a [FA_BC][S] tile by 16-byte cp.async; rows at or past j_end are zeroed directly.
template <int W, int S>
__device__ __forceinline__ void fa_stage_kv16(u16* dst, const u16* kv, int kvh, int j0, int j_end, int c0) {
  constexpr int kPerRow = W / 8;
  for (int i = threadIdx.x; i < FA_BC * kPerRow; i += FA_WARPS * 32) {
    const int r = i / kPerRow, c = (i % kPerRow) * 8, j = j0 + r;
    if (j < j_end)
      mma_cp_async16(dst + r * S + c, kv + (fa_row(j) * FA_HKV + kvh) * FA_D + c0 + c);
    else
      *reinterpret_cast<uint4*>(dst + r * S + c) = make_uint4(0u, 0u, 0u, 0u);
  }
}

// The keys any token of the call sees: [lo, hi] (hi = -1: none).
__device__ __forceinline__ void fa_call_range(const FlashAttentionParams& p, int* lo, int* hi) {
  __shared__ int s_call_lo, s_call_hi;
  if (threadIdx.x == 0) {
    s_call_lo = 0x7fffffff;
    s_call_hi = -1;
  }
  __syncthreads();
  int l = 0x7fffffff, h = -1;
  for (int t = threadIdx.x; t < p.n_tok; t += blockDim.x) {
    h = max(h, p.pos[t]);
    l = min(l, fa_first_key(p.pos[t], p.window));
  }
  atomicMin(&s_call_lo, l);
  atomicMax(&s_call_hi, h);
  __syncthreads();
  *lo = s_call_lo;
  *hi = s_call_hi;
}

// flash_kv_bf16: the bf16 copy of the cache rows the call's keys span, for each cache not already
// bf16 (FA_KT / FA_VT: Common.cuh storage codes), into k16 / v16 ([kv_rows, Hkv, D] each, the
// step's scratch); a fixed grid striding over [lo, hi], so one captured graph serves every length.
// A bf16 cache is read in place (k16 / v16 point at it) and an all-bf16 pair skips this launch.
#ifndef FA_KT
#define FA_KT 0
#endif
#ifndef FA_VT
#define FA_VT 0
#endif
template <int kType>
__device__ __forceinline__ void fa_copy8_bf16(const void* src, u16* dst, i64 e) {
  PackedElems<kType, 8> x;
  x.load(src, e);
  *reinterpret_cast<uint4*>(dst + e) = make_uint4(mma_pack_bf16(x.get(0), x.get(1)), mma_pack_bf16(x.get(2), x.get(3)),
                                                  mma_pack_bf16(x.get(4), x.get(5)), mma_pack_bf16(x.get(6), x.get(7)));
}
extern "C" __global__ void __launch_bounds__(256) flash_kv_bf16(const FlashAttentionParams p) {
  memra_grid_dependency();
  int lo, hi;
  fa_call_range(p, &lo, &hi);
  if (hi < 0) return;
  // Keys lo..hi; a ring's rows keep their places in the copy (8 elements never cross a row: D is a
  // multiple of 16).
  const i64 row = (i64)FA_HKV * FA_D, n = (i64)(hi + 1 - lo) * row;
  for (i64 e = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * 8; e < n; e += (i64)gridDim.x * blockDim.x * 8) {
    const i64 at = fa_row(lo + (int)(e / row)) * row + e % row;
    if (FA_KT != 2) fa_copy8_bf16<FA_KT>(p.k_cache, p.k16, at);
    if (FA_VT != 2) fa_copy8_bf16<FA_VT>(p.v_cache, p.v16, at);
  }
}

extern "C" __global__ void __launch_bounds__(FA_WARPS * 32) flash_attention(const FlashAttentionParams p) {
  memra_grid_dependency();
  FA_SMEM_DECL;
  u16* Qs = reinterpret_cast<u16*>(fa_smem);
  u16* Ks0 = Qs + FA_BR * FA_QS;  // stage s: K at Ks0 + s * FA_KV_STAGE, V after it
#define FA_KV_STAGE (FA_BC * FA_QS + FA_BC * FA_VS)
  __shared__ int s_lo, s_hi;

  // blockIdx.x = (token block from the last, kv head, column split), the split fastest.
  const int split = blockIdx.x % (FA_D / FA_DV), kvh = blockIdx.x / (FA_D / FA_DV) % FA_HKV;
  const int n_tb = gridDim.x / (FA_HKV * (FA_D / FA_DV));
  const int t0 = (n_tb - 1 - (int)(blockIdx.x / (FA_HKV * (FA_D / FA_DV)))) * FA_TB, c0 = split * FA_DV;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;

  // The block's key range: from the smallest first key to the largest position of its tokens.
  if (threadIdx.x == 0) {
    fa_block_range(p, t0, FA_TB, &s_lo, &s_hi);
  }
  // Q rows (token, head) of the group, rounded to bf16; rows past n_tok are zeros.
  for (int i = threadIdx.x; i < FA_BR * (FA_D / 4); i += FA_WARPS * 32) {
    const int r = i / (FA_D / 4), c = (i % (FA_D / 4)) * 4;
    *reinterpret_cast<uint2*>(Qs + r * FA_QS + c) = fa_q4_bf16(p, t0 + r / FA_G, kvh * FA_G + r % FA_G, c);
  }

  // This thread's two rows (g and g + 8 of its warp's 16): their bounds; -1 marks a row past n_tok
  // (every key masked, nothing stored).
  const int rA = warp * 16 + g, rB = rA + 8;
  const int tA = t0 + rA / FA_G, tB = t0 + rB / FA_G;
  const int posA = tA < p.n_tok ? p.pos[tA] : -1, posB = tB < p.n_tok ? p.pos[tB] : -1;
  const int firstA = fa_first_key(posA, p.window), firstB = fa_first_key(posB, p.window);
  // The warp's bounds: tiles inside them need no mask, tiles outside them no work.
  int w_min_pos = min(posA, posB), w_max_pos = max(posA, posB);
  int w_min_first = posA >= 0 ? firstA : 0x7fffffff, w_max_first = max(firstA, firstB);
  if (posB >= 0) w_min_first = min(w_min_first, firstB);
  for (int o = 16; o > 0; o >>= 1) {
    w_min_pos = min(w_min_pos, __shfl_xor_sync(0xffffffffu, w_min_pos, o));
    w_max_pos = max(w_max_pos, __shfl_xor_sync(0xffffffffu, w_max_pos, o));
    w_min_first = min(w_min_first, __shfl_xor_sync(0xffffffffu, w_min_first, o));
    w_max_first = max(w_max_first, __shfl_xor_sync(0xffffffffu, w_max_first, o));
  }

  float acc[FA_DV / 8][4];
#pragma unroll
  for (int n = 0; n < FA_DV / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float mA = MEMRA_NEG_INF, mB = MEMRA_NEG_INF, lA = 0.0f, lB = 0.0f;
  const float scale_log2 = p.scale * 1.4426950408889634f;

  __syncthreads();
  const int lo = s_lo, hi = s_hi;
  const u16* k16 = p.k16;
  const u16* v16 = p.v16;
  if (lo <= hi) {
    fa_stage_kv16<FA_D, FA_QS>(Ks0, k16, kvh, lo, hi + 1, 0);
    fa_stage_kv16<FA_DV, FA_VS>(Ks0 + FA_BC * FA_QS, v16, kvh, lo, hi + 1, c0);
  }
  mma_cp_commit();
  for (int j0 = lo, it = 0; j0 <= hi; j0 += FA_BC, ++it) {
    // The next tile streams into the other buffer while this one computes.
    u16* Ks = Ks0 + (it % FA_STAGES) * FA_KV_STAGE;
    u16* Vs = Ks + FA_BC * FA_QS;
    if (FA_STAGES > 1) {
      if (j0 + FA_BC <= hi) {
        u16* nk = Ks0 + ((it + 1) % FA_STAGES) * FA_KV_STAGE;
        fa_stage_kv16<FA_D, FA_QS>(nk, k16, kvh, j0 + FA_BC, hi + 1, 0);
        fa_stage_kv16<FA_DV, FA_VS>(nk + FA_BC * FA_QS, v16, kvh, j0 + FA_BC, hi + 1, c0);
      }
      mma_cp_commit();
      mma_cp_wait<1>();
    } else {
      mma_cp_wait<0>();
    }
    __syncthreads();  // this tile's buffer is complete for every warp
    // A warp none of whose rows sees the tile skips its math (the barriers stay uniform).
    if (j0 <= w_max_pos && j0 + FA_BC - 1 >= w_min_first) {
      // S = Q K^T for the warp's 16 rows x 64 keys.
      float s[FA_BC / 8][4];
#pragma unroll
      for (int n = 0; n < FA_BC / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll 4
      for (int kk = 0; kk < FA_D / 16; ++kk) {
        u32 a[4];
        mma_ldmatrix_x4(a, Qs + (warp * 16 + (lane & 15)) * FA_QS + kk * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int nn = 0; nn < FA_BC / 16; ++nn) {
          u32 b[4];
          mma_ldmatrix_x4(b,
                          Ks + (nn * 16 + (lane & 7) + ((lane >> 4) << 3)) * FA_QS + kk * 16 + ((lane >> 3) & 1) * 8);
          mma_bf16(s[2 * nn], a, b[0], b[1]);
          mma_bf16(s[2 * nn + 1], a, b[2], b[3]);
        }
      }

      // Mask, then the online softmax in base 2 (rows A: s[n][0..1], rows B: s[n][2..3]).
      const bool masked = j0 + FA_BC - 1 > w_min_pos || j0 < w_max_first;
      float mxA = mA, mxB = mB;
#pragma unroll
      for (int n = 0; n < FA_BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[n][e] * scale_log2;
          if (masked) {
            const int j = j0 + n * 8 + 2 * tq + (e & 1);
            const bool ok = e < 2 ? (j <= posA && j >= firstA) : (j <= posB && j >= firstB);
            if (!ok) x = MEMRA_NEG_INF;
          }
          s[n][e] = x;
          if (e < 2)
            mxA = fmaxf(mxA, x);
          else
            mxB = fmaxf(mxB, x);
        }
      mxA = fa_quad_max(mxA);
      mxB = fa_quad_max(mxB);
      // A row that has seen no key yet keeps base 0 (so -inf - -inf never appears).
      const float baseA = mxA == MEMRA_NEG_INF ? 0.0f : mxA, baseB = mxB == MEMRA_NEG_INF ? 0.0f : mxB;
      const float corrA = exp2f(mA - baseA), corrB = exp2f(mB - baseB);
      mA = mxA;
      mB = mxB;
      float sumA = 0.0f, sumB = 0.0f;
#pragma unroll
      for (int n = 0; n < FA_BC / 8; ++n) {
        s[n][0] = exp2f(s[n][0] - baseA);
        s[n][1] = exp2f(s[n][1] - baseA);
        s[n][2] = exp2f(s[n][2] - baseB);
        s[n][3] = exp2f(s[n][3] - baseB);
        sumA += s[n][0] + s[n][1];
        sumB += s[n][2] + s[n][3];
      }
      lA = lA * corrA + sumA;  // this thread's columns; the quad's partial sums add up at the end
      lB = lB * corrB + sumB;
#pragma unroll
      for (int n = 0; n < FA_DV / 8; ++n) {
        acc[n][0] *= corrA;
        acc[n][1] *= corrA;
        acc[n][2] *= corrB;
        acc[n][3] *= corrB;
      }

      // O += P V: P's accumulator fragments of key tiles 2kk, 2kk + 1 are the A fragment of keys
      // 16kk..16kk + 15.
#pragma unroll
      for (int kk = 0; kk < FA_BC / 16; ++kk) {
        u32 a[4];
        a[0] = mma_pack_bf16(s[2 * kk][0], s[2 * kk][1]);
        a[1] = mma_pack_bf16(s[2 * kk][2], s[2 * kk][3]);
        a[2] = mma_pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        a[3] = mma_pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int nd = 0; nd < FA_DV / 16; ++nd) {
          u32 b[4];
          mma_ldmatrix_x4_trans(
              b, Vs + (kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)) * FA_VS + nd * 16 + (lane >> 4) * 8);
          mma_bf16(acc[2 * nd], a, b[0], b[1]);
          mma_bf16(acc[2 * nd + 1], a, b[2], b[3]);
        }
      }
    }                 // the warp's math on this tile
    __syncthreads();  // every warp is done with this buffer before it is refilled
    if (FA_STAGES == 1 && j0 + FA_BC <= hi) {
      fa_stage_kv16<FA_D, FA_QS>(Ks, k16, kvh, j0 + FA_BC, hi + 1, 0);
      fa_stage_kv16<FA_DV, FA_VS>(Vs, v16, kvh, j0 + FA_BC, hi + 1, c0);
      mma_cp_commit();
    }
  }
  mma_cp_wait<0>();

  // Normalize, gate, store (rows past n_tok are not written).
  fa_store_rows<FA_DV>(p, &acc[0][0], lA, lB, tA, kvh * FA_G + rA % FA_G, posA, tB, kvh * FA_G + rB % FA_G, posB, c0,
                       tq);
}

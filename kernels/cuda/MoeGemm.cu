// The prefill expert products of a mixture-of-experts FFN (issue 14), with no host round trip:
// the slot -> expert ids live only on the device.
//
// moe_sort (module defines MS_E = experts, MS_WARPS): one block groups the slots by expert, a
// stable counting sort, and writes the m-tile list moe_gemm walks (MoeGemmParams.h has the
// scratch layout). Ids outside [0, E) are skipped and counted in header[1]: the products then
// never read or write their slot (its rows of y keep whatever they held), and no access goes out
// of bounds. Nothing on the host waits for that count; a caller may read it after the step.
//
// moe_gemm (MG_TYPE = the weights' ggml type id: a block format DequantBlocks.cuh decodes, or 0
// f32 / 1 f16 / 30 bf16; MG_SWIGLU; MG_BK): a grouped GEMM on tensor cores with memra's dense
// prefill numerics: weights dequantized exactly (dequant8, bit-exact with ggml) and rounded to
// bf16, activations rounded to bf16 (nearest even), f32 accumulation (mma.sync m16n8k16 bf16).
// The grid is fixed at launch (the per-expert counts exist only on the device): blockIdx.x =
// m-tile * n-tiles + n-tile over an upper bound of m-tiles; a block past moe_sort's tile count
// returns at once. Tile geometry and the fragment maps: MoeGemmTile.cuh.
//
// Pipeline per k-step (MG_BK elements), two shared buffers: the next step's activations are
// loaded into registers (16-byte loads) before the current step's mma, and after it they are
// rounded to bf16 and stored, and the next weight slice is dequantized into the other buffer;
// one barrier per step. Weights are read with the decoders' byte loads (blocks start at any
// byte), prefetched into L1 before the mma; two resident blocks per SM overlap one block's
// dequantization with the other's mma.
#include "Common.cuh"
#include "MoeGemmParams.h"
#include "MoeGemmTile.cuh"

typedef unsigned char u8;  // as DequantBlocks.cuh (a repeated typedef of the same type is fine)
typedef unsigned int u32;

// ---------------------------------------------------------------------------------------------
#ifdef MS_E

// Per-warp counts (then the warp's running base) per expert: MS_WARPS * MS_E ints, at most 32 KiB
// (MoeSortLaunch picks MS_WARPS = min(32, 8192 / E)).
extern "C" __global__ void __launch_bounds__(MS_WARPS * 32) moe_sort(const MoeSortParams p) {
  __shared__ int cnt[MS_WARPS][MS_E];
  __shared__ int total[MS_E];
  __shared__ int offset[MS_E + 1];
  __shared__ int tile_offset[MS_E + 1];
  __shared__ int bad;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nthreads = MS_WARPS * 32;
  for (int i = tid; i < MS_WARPS * MS_E; i += nthreads) (&cnt[0][0])[i] = 0;
  if (tid == 0) bad = 0;
  memra_grid_dependency();
  __syncthreads();

  // Warp w owns the slots [s0, s1), in order, so concatenating the warps keeps slot order.
  const int n = p.n_slots;
  const int chunk = (n + MS_WARPS - 1) / MS_WARPS;
  const int s0 = min(n, warp * chunk), s1 = min(n, s0 + chunk);
  int my_bad = 0;
  for (int s = s0 + lane; s < s1; s += 32) {
    const int e = p.ids[s];
    if ((unsigned)e < (unsigned)MS_E)
      atomicAdd(&cnt[warp][e], 1);
    else
      ++my_bad;
  }
  if (my_bad) atomicAdd(&bad, my_bad);
  __syncthreads();

  // Per expert: the total, and each warp's exclusive prefix within the expert.
  for (int e = tid; e < MS_E; e += nthreads) {
    int run = 0;
    for (int w = 0; w < MS_WARPS; ++w) {
      const int c = cnt[w][e];
      cnt[w][e] = run;
      run += c;
    }
    total[e] = run;
  }
  __syncthreads();

  // Exclusive scans over the experts of the slot counts and of the m-tile counts (warp 0: each
  // lane a contiguous run of experts, then a shuffle scan of the lane sums).
  if (warp == 0) {
    const int per = (MS_E + 31) / 32;
    const int e0 = min(MS_E, lane * per), e1 = min(MS_E, e0 + per);
    int sc = 0, st = 0;
    for (int e = e0; e < e1; ++e) {
      sc += total[e];
      st += (total[e] + MG_BM - 1) / MG_BM;
    }
    int ic = sc, it = st;
    for (int o = 1; o < 32; o <<= 1) {
      const int c = __shfl_up_sync(0xffffffffu, ic, o), t = __shfl_up_sync(0xffffffffu, it, o);
      if (lane >= o) ic += c, it += t;
    }
    int rc = ic - sc, rt = it - st;
    for (int e = e0; e < e1; ++e) {
      offset[e] = rc;
      tile_offset[e] = rt;
      rc += total[e];
      rt += (total[e] + MG_BM - 1) / MG_BM;
    }
    if (lane == 31) offset[MS_E] = ic, tile_offset[MS_E] = it;
  }
  __syncthreads();

  // Stable scatter: each warp walks its slots 32 at a time; lanes with the same expert rank
  // themselves by lane (= slot order) and the highest of them advances the warp's base.
  for (int base = s0; base < s1; base += 32) {
    const int s = base + lane;
    const int e = s < s1 ? p.ids[s] : -1;
    const bool ok = (unsigned)e < (unsigned)MS_E;
    const unsigned peers = __match_any_sync(0xffffffffu, ok ? e : -1);
    const int here = ok ? cnt[warp][e] : 0;
    if (ok) p.order[offset[e] + here + __popc(peers & ((1u << lane) - 1u))] = s;
    __syncwarp();
    if (ok && lane == 31 - __clz(peers)) cnt[warp][e] = here + __popc(peers);
    __syncwarp();
  }

  // The tile list: tile i belongs to the expert whose tile range holds it (binary search).
  const int n_tiles = tile_offset[MS_E];
  for (int i = tid; i < n_tiles; i += nthreads) {
    int lo = 0, hi = MS_E - 1;  // the last e with tile_offset[e] <= i
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (tile_offset[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int t = i - tile_offset[lo];
    const int row0 = offset[lo] + t * MG_BM;
    reinterpret_cast<int4*>(p.tiles)[i] = make_int4(lo, row0, min(MG_BM, offset[lo + 1] - row0), 0);
  }
  for (int e = tid; e <= MS_E; e += nthreads) p.offsets[e] = offset[e];
  if (tid == 0) reinterpret_cast<int4*>(p.header)[0] = make_int4(n_tiles, bad, offset[MS_E], 0);
}

#endif  // MS_E

// ---------------------------------------------------------------------------------------------
#ifdef MG_TYPE

#if MG_TYPE == 0 || MG_TYPE == 1 || MG_TYPE == 30
#define MG_WIDE 1  // 32/16-bit storage, read with 16-byte loads
#else
#define MG_WIDE 0
#define DEQ_TYPE MG_TYPE
#include "DequantBlocks.cuh"
#endif

#define MG_AV (MG_BM * MG_BK / 4 / MG_THREADS)  // float4 activation loads per thread and step
#define MG_WV (MG_BN * MG_BK / 8 / MG_THREADS)  // 8-element weight groups per thread and step

__device__ __forceinline__ u32 mg_pack(float lo, float hi) {
  return (u32)f32_to_bf16(lo) | ((u32)f32_to_bf16(hi) << 16);
}

// Elements k .. k + 7 of a weight row as bf16 (k a multiple of 8).
__device__ __forceinline__ uint4 mg_weights8(const u8* row, i64 k) {
  uint4 o;
#if MG_TYPE == 0
  const float4* p = reinterpret_cast<const float4*>(row + k * 4);
  const float4 a = p[0], b = p[1];
  o.x = mg_pack(a.x, a.y), o.y = mg_pack(a.z, a.w), o.z = mg_pack(b.x, b.y), o.w = mg_pack(b.z, b.w);
#elif MG_TYPE == 1
  const uint4 v = *reinterpret_cast<const uint4*>(row + k * 2);
  const u32 w[4] = {v.x, v.y, v.z, v.w};
  u32 r[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) r[i] = mg_pack(f16_to_f32((u16)(w[i] & 0xffffu)), f16_to_f32((u16)(w[i] >> 16)));
  o.x = r[0], o.y = r[1], o.z = r[2], o.w = r[3];
#elif MG_TYPE == 30
  o = *reinterpret_cast<const uint4*>(row + k * 2);
#else
  float v[8];
  dequant8(row + (k / DEQ_QK) * DEQ_BYTES, (int)((k % DEQ_QK) >> 3), v);
  o.x = mg_pack(v[0], v[1]), o.y = mg_pack(v[2], v[3]), o.z = mg_pack(v[4], v[5]), o.w = mg_pack(v[6], v[7]);
#endif
  return o;
}

// Pulls the bytes mg_weights8(row, k) will read into L1 (no register waits on it): issued before a
// step's mma, so the dequantization after it finds its weight bytes close instead of stalling on
// L2 / DRAM latency. A block of at most 210 bytes spans at most 3 lines: its first, middle and last
// bytes touch each of them.
__device__ __forceinline__ void mg_prefetch(const u8* p) {
#if !defined(MG_HOST_EMULATION)
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#endif
}
__device__ __forceinline__ void mg_prefetch_weights8(const u8* row, i64 k) {
#if MG_WIDE
  mg_prefetch(row + k * (MG_TYPE == 0 ? 4 : 2));
#else
  const u8* b = row + (k / DEQ_QK) * DEQ_BYTES;
  mg_prefetch(b);
  if (DEQ_BYTES > 64) mg_prefetch(b + DEQ_BYTES / 2);
  mg_prefetch(b + DEQ_BYTES - 1);
#endif
}

#if defined(MG_HOST_EMULATION)
// tests/cuda/emulation/MoeGemmEmuKernels.cc: ldmatrix and mma.sync by their PTX definitions.
__device__ __forceinline__ void mg_ldmatrix_x4(u32* r, const void* p) { mg_emu_ldmatrix_x4(r, p); }
__device__ __forceinline__ void mg_mma(float* d, const u32* a, u32 b0, u32 b1) { mg_emu_mma(d, a, b0, b1); }
#else
__device__ __forceinline__ u32 mg_smem(const void* p) {
  u32 r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ void mg_ldmatrix_x4(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(mg_smem(p)));
}
// d += a (16 x 16, row) * b (16 x 8, col), bf16 in, f32 accumulation.
__device__ __forceinline__ void mg_mma(float* d, const u32* a, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

extern "C" __global__ void __launch_bounds__(MG_THREADS, 2) moe_gemm(const MoeGemmParams p) {
  __shared__ __align__(16) u16 As[2][MG_BM][MG_BKP];
  __shared__ __align__(16) u16 Ws[2][MG_BN][MG_BKP];
  __shared__ int slot_of[MG_BM];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;
  const i64 N = p.N, K = p.K;
  const int cols = mg_cols_per_block(MG_SWIGLU);
  const int n_tiles = (int)((N + cols - 1) / cols);
  const int mt = (int)(blockIdx.x / n_tiles), nt = (int)(blockIdx.x % n_tiles);
  const i64 n0 = (i64)nt * cols;

  // Weight rows this thread dequantizes (fixed over K): group g of row r, r = idx / (BK / 8).
  const u8* wrow[MG_WV];
  int wgrp = 0;
  memra_grid_dependency();
  int e = 0, row0, rows;
  if (p.header) {
    if (mt >= p.header[0]) return;
    const int4 t = reinterpret_cast<const int4*>(p.tiles)[mt];
    e = t.x, row0 = t.y, rows = t.z;
  } else {
    row0 = mt * MG_BM;
    if (row0 >= p.n_slots) return;
    rows = (int)min((i64)MG_BM, p.n_slots - row0);
  }
#pragma unroll
  for (int j = 0; j < MG_WV; ++j) {
    const int idx = tid + j * MG_THREADS;
    const int r = idx / (MG_BK / 8);
    wgrp = idx % (MG_BK / 8);  // the same for every j (MG_THREADS is a multiple of MG_BK / 8)
    const i64 n = min(n0 + mg_w_col(r, MG_SWIGLU), N - 1);  // rows past N: any valid row, not stored
    const u8* base = mg_w_is_up(r, MG_SWIGLU) ? p.w1 : p.w0;
    wrow[j] = base + (i64)e * p.expert_bytes + n * p.row_bytes;
  }
  if (tid < MG_BM) slot_of[tid] = tid < rows ? (p.header ? p.order[row0 + tid] : row0 + tid) : -1;
  __syncthreads();

  // Activation rows this thread stages: float4 c of tile row r (null: a row past the tile's slots).
  const float* arow[MG_AV];
  int ac = 0;
#pragma unroll
  for (int j = 0; j < MG_AV; ++j) {
    const int idx = tid + j * MG_THREADS;
    const int r = idx / (MG_BK / 4);
    ac = idx % (MG_BK / 4);  // the same for every j
    const int s = slot_of[r];
    arow[j] = s >= 0 ? p.a + (s / p.a_row_div) * K + ac * 4 : nullptr;
  }

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

  float4 areg[MG_AV];
  auto load_a = [&](i64 k0) {
#pragma unroll
    for (int j = 0; j < MG_AV; ++j)
      areg[j] = arow[j] ? *reinterpret_cast<const float4*>(arow[j] + k0) : make_float4(0.f, 0.f, 0.f, 0.f);
  };
  auto store_a = [&](int buf) {
#pragma unroll
    for (int j = 0; j < MG_AV; ++j) {
      const int r = (tid + j * MG_THREADS) / (MG_BK / 4);
      uint2 v;
      v.x = mg_pack(areg[j].x, areg[j].y);
      v.y = mg_pack(areg[j].z, areg[j].w);
      *reinterpret_cast<uint2*>(&As[buf][r][ac * 4]) = v;
    }
  };
  auto stage_w = [&](int buf, i64 k0) {
#pragma unroll
    for (int j = 0; j < MG_WV; ++j) {
      const int r = (tid + j * MG_THREADS) / (MG_BK / 8);
      *reinterpret_cast<uint4*>(&Ws[buf][r][wgrp * 8]) = mg_weights8(wrow[j], k0 + wgrp * 8);
    }
  };

  const int nk = (int)(K / MG_BK);
  load_a(0);
  store_a(0);
  stage_w(0, 0);
  __syncthreads();
  for (int kt = 0; kt < nk; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < nk;
    if (more) {
      load_a((i64)(kt + 1) * MG_BK);
#pragma unroll
      for (int j = 0; j < MG_WV; ++j) mg_prefetch_weights8(wrow[j], (i64)(kt + 1) * MG_BK + wgrp * 8);
    }
#pragma unroll
    for (int kk = 0; kk < MG_BK; kk += 16) {
      u32 af[2][4], bf[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        mg_ldmatrix_x4(af[i], &As[cur][wm * 32 + i * 16 + mg_ldm_a_row(lane)][kk + mg_ldm_a_k(lane)]);
#pragma unroll
      for (int jp = 0; jp < 2; ++jp)
        mg_ldmatrix_x4(bf[jp], &Ws[cur][wn * 32 + jp * 16 + mg_ldm_b_row(lane)][kk + mg_ldm_b_k(lane)]);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mg_mma(acc[i][j], af[i], bf[j >> 1][(j & 1) * 2], bf[j >> 1][(j & 1) * 2 + 1]);
    }
    if (more) {
      store_a(cur ^ 1);
      stage_w(cur ^ 1, (i64)(kt + 1) * MG_BK);
    }
    __syncthreads();
  }

  // Epilogue: rows of y are slots; only the tile's slots and columns < N are written.
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int r = wm * 32 + i * 16 + mg_acc_row(lane, q);
      const int s = slot_of[r];
      if (s < 0) continue;
      float* yrow = p.y + (i64)s * N;
#if MG_SWIGLU
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const i64 n = n0 + wn * 16 + j * 8 + mg_acc_col(lane, q);
        if (n < N) yrow[n] = siluf_(acc[i][j][q]) * acc[i][j + 2][q];
      }
#else
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const i64 n = n0 + wn * 32 + j * 8 + mg_acc_col(lane, q);
        if (n < N) yrow[n] = acc[i][j][q];
      }
#endif
    }
}

#endif  // MG_TYPE

// The prefill expert products of a mixture-of-experts FFN (issue 14), with no host round trip:
// the slot -> expert ids live only on the device.
//
// moe_sort (module defines MS_E = experts, MS_WARPS): one block groups the slots by expert, a
// stable counting sort, and writes the m-tile list moe_gemm walks (MoeGemmParams.h has the
// scratch layout). Slot s belongs to expert ids[s] - first_expert (expert parallelism: this rank
// holds experts [first_expert, first_expert + E) of the router's; first_expert 0 otherwise); slots
// outside [0, E) (another rank's experts, or invalid ids) are skipped and counted in header[1]:
// the products then never read or write their slot (its rows of y keep whatever they held), and
// no access goes out of bounds. Nothing on the host waits for that count; a caller may read it after the step.
//
// moe_gemm (MG_TYPE = the weights' ggml type id: a block format DequantBlocks.cuh decodes, or 0
// f32 / 1 f16 / 30 bf16; MG_SWIGLU; the ring geometry MG_BN, MG_CK, MG_CW, MG_ST, which
// MoeGemm.cc picks): a grouped GEMM on tensor cores with memra's dense prefill numerics: weights
// dequantized exactly (dequant8, bit-exact with ggml) and rounded to bf16, activations rounded to
// bf16 (nearest even), f32 accumulation (mma.sync m16n8k16 bf16). The grid is fixed at launch (the
// per-expert counts exist only on the device): blockIdx.x = m-tile * n-tiles + n-tile over an upper
// bound of m-tiles; a block past moe_sort's tile count returns at once. Tile geometry and the
// fragment maps: MoeGemmTile.cuh (64 slots x MG_BN weight rows per block, 8 warps).
//
// Weight path: the raw block bytes stream through a shared ring of MG_ST stages; a stage is one
// chunk of MG_CK elements (whole blocks: 64 for the 32-element formats, 256 for the K-quants, 32
// for f32 / f16 / bf16) of every one of the tile's MG_BN rows, MG_SEG bytes per row, copied with
// cp.async (.cg 16 B, .ca 8 / 4 B; MG_CW is the widest power of two <= 16 dividing row_bytes, the
// pieces are the MG_CW-aligned ones covering the row's chunk, consecutive threads on consecutive
// pieces of a row: coalesced). MG_ST - 1 chunks are in flight while one is consumed; at each chunk
// the wait_group + barrier makes it visible and the freed slot gets chunk c + MG_ST - 1. Each
// 32-element k-step then dequantizes its slice from shared memory (dequant8 reading shared bytes)
// into a bf16 tile, the activations (16-byte loads into registers during the previous step's mma)
// are rounded into another, a barrier, the mma, a barrier. Pieces of 2 / 1 bytes (row_bytes not a
// multiple of 4), or weights whose addresses do not admit MG_CW pieces, take plain copies (same
// protocol, synchronous). PDL: everything after memra_grid_dependency() (the expert comes from
// moe_sort's tiles).
//
// Expected limits (H200: 132 SMs, ~1.75 GHz, 4.6 TB/s = ~20 bytes per SM clock; 128 lane-
// instructions per SM clock), 2 resident blocks per SM (__launch_bounds__(256, 2); ptxas sm_90:
// 76-112 registers, no spills), 16 warps per SM:
//   shared per block: q8_0 (BN 128, CK 64, 16 B pieces, 3 stages of 128 x 80 B) 46.3 KB; q4_K
//   (BN 64, 4 x 64 x 144 B) 47.4 KB; q6_K (BN 64, 2 x 64 x 224 B) 39.2 KB; f32 (2 x 128 x 128 B)
//   48.4 KB; bf16 / f16 4 stages. Bytes in flight per SM: q8_0 2 blocks x 2 chunks x 8.7 KB =
//   35 KB, q4_K 2 x 3 x 9.2 = 55 KB, q6_K 2 x 1 x 13.4 = 27 KB: at ~1.5 us loaded latency that is
//   ~2.3-4 TB/s over the chip (q6_K the least: 2 stages are all 210-byte blocks leave room for).
//   Bytes per weight from DRAM: the format's (q8_0 1.06, q4_K 0.56, q6_K 0.82) once per m-tile
//   of an expert (later m-tiles of the same expert and n-tile mostly hit L2: their blocks run
//   n-tiles apart in the grid).
//   Instructions per weight (lane-instructions, per m-tile): dequant8 from shared ~1.2-2 byte
//   loads + ~2.5 convert / scale / pack (q8_0 ~4, K-quants ~5-7), 1/8 shared store, ~1.5 for
//   ldmatrix + mma of a full 64-row tile (fixed, whatever the tile's slots), < 0.1 for the copies
//   and barriers: ~5-8 per weight, i.e. ~4-6 T weights/s over the chip, above the DRAM rate of
//   q8_0 (4.3 T weights/s) only a little: q8_0 ends near both limits, the 4-bit formats issue-bound.
//   Activations: each slot row is read (f32, L2) once per n-tile: gate_up K = 2048 is 8 KB x 8
//   n-tiles (q8_0) or x 16 (K-quants, 64 rows a block) per slot: at T = 4096 ~2-4 GB of L2 reads.
//   Qwen3.5-35B-A3B (E 256, k 8; gate_up 537 M weights, down 268 M), q8_0: T = 64 / 512 (every
//   touched weight read once, ~2 / 16 slots a tile) DRAM-bound, ~0.15-0.25 ms gate_up, ~0.08-0.13
//   ms down; T = 4096 (~128 slots an expert: 2-3 m-tiles, ~1.5 G weights dequantized) issue-bound,
//   ~0.5-0.8 ms gate_up, ~0.25-0.4 ms down. A 16- or 32-row m-tile for small T would cut the
//   fixed mma share (~1.5 of ~5.5 per weight) but not the bytes, which bound those shapes.
#ifndef MG_GELU
#define MG_GELU 0  // the swiglu epilogue's gate activation: 0 silu, 1 gelu (Gemma 4's experts)
#endif
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
    const int e = p.ids[s] - p.first_expert;
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
    const int e = s < s1 ? p.ids[s] - p.first_expert : -1;
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
#define MG_WIDE 1  // 32/16-bit storage: "blocks" of 8 elements, read from shared memory as uint4
#define MG_QK 8
#define MG_BB (MG_TYPE == 0 ? 32 : 16)
#else
#define MG_WIDE 0
#define DEQ_TYPE MG_TYPE
#include "DequantBlocks.cuh"
#define MG_QK DEQ_QK
#define MG_BB DEQ_BYTES
#endif

#ifndef MG_CK
#define MG_CK 64  // elements per ring chunk (whole blocks; a multiple of MG_BK)
#endif
#ifndef MG_CW
#define MG_CW 1  // copy piece bytes (16, 8, 4: cp.async; 2, 1: plain copies); divides row_bytes
#endif
#ifndef MG_ST
#define MG_ST 2  // ring stages
#endif
// A row's chunk: MG_SEG bytes from byte c * MG_SEG of the row. Copied as the MG_CW-aligned pieces
// covering it (row_bytes is a multiple of MG_CW, so they stay inside the row): at most MG_MAXP
// pieces, the chunk starting MG_SEG * c % MG_CW bytes into its ring row (MG_SEGP bytes apart).
#define MG_SEG (MG_CK / MG_QK * MG_BB)
#define MG_LOW ((MG_SEG) & -(MG_SEG))  // the largest power of two dividing MG_SEG
#define MG_G (MG_LOW < MG_CW ? MG_LOW : MG_CW)
#define MG_MAXP ((MG_SEG + MG_CW - MG_G + MG_CW - 1) / MG_CW)
#define MG_SEGP ((MG_MAXP * MG_CW + 15) / 16 * 16)

#define MG_AV (MG_BM * MG_BK / 4 / MG_THREADS)  // float4 activation loads per thread and step
#define MG_WV (MG_BN * MG_BK / 8 / MG_THREADS)  // 8-element weight groups per thread and step
#if MG_CK % MG_BK != 0 || MG_CK % MG_QK != 0 || MG_WV < 1
#error "moe_gemm: MG_CK must be whole blocks and whole k-steps"
#endif

__device__ __forceinline__ u32 mg_pack(float lo, float hi) {
  return (u32)f32_to_bf16(lo) | ((u32)f32_to_bf16(hi) << 16);
}

// Elements k .. k + 7 of a row's chunk in the ring (seg: its first byte) as bf16 (k a multiple of 8).
__device__ __forceinline__ uint4 mg_weights8(const u8* seg, int k) {
  uint4 o;
#if MG_TYPE == 0
  const float4* p = reinterpret_cast<const float4*>(seg + k * 4);
  const float4 a = p[0], b = p[1];
  o.x = mg_pack(a.x, a.y), o.y = mg_pack(a.z, a.w), o.z = mg_pack(b.x, b.y), o.w = mg_pack(b.z, b.w);
#elif MG_TYPE == 1
  const uint4 v = *reinterpret_cast<const uint4*>(seg + k * 2);
  const u32 w[4] = {v.x, v.y, v.z, v.w};
  u32 r[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) r[i] = mg_pack(f16_to_f32((u16)(w[i] & 0xffffu)), f16_to_f32((u16)(w[i] >> 16)));
  o.x = r[0], o.y = r[1], o.z = r[2], o.w = r[3];
#elif MG_TYPE == 30
  o = *reinterpret_cast<const uint4*>(seg + k * 2);
#else
  float v[8];
  dequant8(seg + (k / DEQ_QK) * DEQ_BYTES, (k % DEQ_QK) >> 3, v);
  o.x = mg_pack(v[0], v[1]), o.y = mg_pack(v[2], v[3]), o.z = mg_pack(v[4], v[5]), o.w = mg_pack(v[6], v[7]);
#endif
  return o;
}

#if defined(MG_HOST_EMULATION)
// tests/cuda/emulation/MoeGemmEmuConfig.cc: ldmatrix and mma.sync by their PTX definitions;
// cp.async as CudaHostEmulation.h's queued copies (performed by the wait covering their group).
__device__ __forceinline__ void mg_ldmatrix_x4(u32* r, const void* p) { mg_emu_ldmatrix_x4(r, p); }
__device__ __forceinline__ void mg_mma(float* d, const u32* a, u32 b0, u32 b1) { mg_emu_mma(d, a, b0, b1); }
__device__ __forceinline__ void mg_cp_async(u8* dst, const u8* src) { gq_emu_copy(dst, src, MG_CW); }
__device__ __forceinline__ void mg_commit() { gq_emu_commit(); }
__device__ __forceinline__ void mg_wait() { gq_emu_wait(MG_ST - 2); }
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
__device__ __forceinline__ void mg_cp_async(u8* dst, const u8* src) {
#if MG_CW == 16
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(mg_smem(dst)), "l"(src));
#elif MG_CW == 8 || MG_CW == 4
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(mg_smem(dst)), "l"(src), "n"(MG_CW));
#endif
}
__device__ __forceinline__ void mg_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void mg_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(MG_ST - 2)); }
#endif

// One piece: cp.async when the pieces are at least 4 bytes and the weights' addresses admit them,
// else a plain copy (synchronous; the same barriers order it).
__device__ __forceinline__ void mg_copy(u8* dst, const u8* src, bool async) {
#if MG_CW >= 4
  if (async) {
    mg_cp_async(dst, src);
    return;
  }
#endif
#if MG_CW >= 2
  if (async || ((reinterpret_cast<unsigned long long>(src) & 1) == 0)) {
#pragma unroll
    for (int i = 0; i < MG_CW; i += 2) *reinterpret_cast<u16*>(dst + i) = *reinterpret_cast<const u16*>(src + i);
    return;
  }
#endif
#pragma unroll
  for (int i = 0; i < MG_CW; ++i) dst[i] = src[i];
}

extern "C" __global__ void __launch_bounds__(MG_THREADS, 2) moe_gemm(const MoeGemmParams p) {
  __shared__ __align__(16) u8 ring[MG_ST][MG_BN][MG_SEGP];
  __shared__ __align__(16) u16 As[MG_BM][MG_BKP];
  __shared__ __align__(16) u16 Ws[MG_BN][MG_BKP];
  __shared__ int slot_of[MG_BM];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;
  const i64 N = p.N, K = p.K;
  const int cols = mg_cols_per_block(MG_SWIGLU, MG_BN);
  const int n_tiles = (int)((N + cols - 1) / cols);
  const int mt = (int)(blockIdx.x / n_tiles), nt = (int)(blockIdx.x % n_tiles);
  const i64 n0 = (i64)nt * cols;

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
  const u8* we0 = p.w0 + (i64)e * p.expert_bytes;
  const u8* we1 = p.w1 + (i64)e * p.expert_bytes;  // swiglu only
  const bool async =
      MG_CW >= 4 && ((reinterpret_cast<unsigned long long>(p.w0) | reinterpret_cast<unsigned long long>(p.w1) |
                      (unsigned long long)p.expert_bytes | (unsigned long long)p.row_bytes) %
                         MG_CW ==
                     0);

  // Chunk c (elements c * MG_CK ..) of the tile's MG_BN weight rows into ring slot `slot`: pieces
  // i = (row, piece), consecutive threads on consecutive pieces of a row (coalesced). Rows past N
  // read row N - 1 (valid memory; never stored).
  auto issue = [&](int slot, int c) {
    const i64 s0 = (i64)c * MG_SEG, a0 = s0 / MG_CW * MG_CW;
    const int np = (int)((s0 + MG_SEG - a0 + MG_CW - 1) / MG_CW);
#pragma unroll
    for (int i = tid; i < MG_BN * MG_MAXP; i += MG_THREADS) {
      const int r = i / MG_MAXP, q = i % MG_MAXP;
      if (q < np) {
        const i64 n = min(n0 + mg_w_col(r, MG_SWIGLU, MG_BN), N - 1);
        const u8* src = (mg_w_is_up(r, MG_SWIGLU, MG_BN) ? we1 : we0) + n * p.row_bytes + a0 + q * MG_CW;
        mg_copy(&ring[slot][r][q * MG_CW], src, async);
      }
    }
  };

  const int nc = (int)(K / MG_CK);
#pragma unroll
  for (int c = 0; c < MG_ST - 1; ++c) {
    if (c < nc) issue(c, c);
    mg_commit();
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
  const int wgrp = tid % (MG_BK / 8);  // the 8-element group of a step this thread dequantizes

  float acc[2][MG_NJ][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < MG_NJ; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

  float4 areg[MG_AV];
  auto load_a = [&](i64 k0) {
#pragma unroll
    for (int j = 0; j < MG_AV; ++j)
      areg[j] = arow[j] ? *reinterpret_cast<const float4*>(arow[j] + k0) : make_float4(0.f, 0.f, 0.f, 0.f);
  };
  load_a(0);

  for (int c = 0; c < nc; ++c) {
    const int slot = c % MG_ST;
    mg_wait();        // this thread's pieces of chunk c have landed
    __syncthreads();  // everyone's have; everyone is past the chunk read last in slot (c - 1) % MG_ST
    if (c + MG_ST - 1 < nc) issue((c + MG_ST - 1) % MG_ST, c + MG_ST - 1);
    mg_commit();  // (an empty group past the end keeps the wait's count uniform)
    const int off = (int)(((i64)c * MG_SEG) % MG_CW);
#pragma unroll 1
    for (int s = 0; s < MG_CK / MG_BK; ++s) {
      const i64 k0 = (i64)c * MG_CK + s * MG_BK;
      // This step's activations (in registers since the previous step's mma) and weights (the
      // ring chunk, dequantized) as bf16 tiles.
#pragma unroll
      for (int j = 0; j < MG_AV; ++j) {
        const int r = (tid + j * MG_THREADS) / (MG_BK / 4);
        uint2 v;
        v.x = mg_pack(areg[j].x, areg[j].y);
        v.y = mg_pack(areg[j].z, areg[j].w);
        *reinterpret_cast<uint2*>(&As[r][ac * 4]) = v;
      }
#pragma unroll
      for (int j = 0; j < MG_WV; ++j) {
        const int r = (tid + j * MG_THREADS) / (MG_BK / 8);
        *reinterpret_cast<uint4*>(&Ws[r][wgrp * 8]) = mg_weights8(&ring[slot][r][off], s * MG_BK + wgrp * 8);
      }
      __syncthreads();
      if (k0 + MG_BK < K) load_a(k0 + MG_BK);
#pragma unroll
      for (int kk = 0; kk < MG_BK; kk += 16) {
        u32 af[2][4], bf[MG_NJ / 2][4];
#pragma unroll
        for (int i = 0; i < 2; ++i)
          mg_ldmatrix_x4(af[i], &As[wm * 32 + i * 16 + mg_ldm_a_row(lane)][kk + mg_ldm_a_k(lane)]);
#pragma unroll
        for (int jp = 0; jp < MG_NJ / 2; ++jp)
          mg_ldmatrix_x4(bf[jp], &Ws[wn * MG_WN + jp * 16 + mg_ldm_b_row(lane)][kk + mg_ldm_b_k(lane)]);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < MG_NJ; ++j)
            mg_mma(acc[i][j], af[i], bf[j >> 1][(j & 1) * 2], bf[j >> 1][(j & 1) * 2 + 1]);
      }
      __syncthreads();
    }
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
      for (int j = 0; j < MG_NJ / 2; ++j) {
        const i64 n = n0 + wn * (MG_WN / 2) + j * 8 + mg_acc_col(lane, q);
        if (n < N) yrow[n] = glu_(MG_GELU ? geluf_(acc[i][j][q]) : siluf_(acc[i][j][q]), acc[i][j + MG_NJ / 2][q]);
      }
#else
#pragma unroll
      for (int j = 0; j < MG_NJ; ++j) {
        const i64 n = n0 + wn * MG_WN + j * 8 + mg_acc_col(lane, q);
        if (n < N) yrow[n] = acc[i][j][q];
      }
#endif
    }
}

#endif  // MG_TYPE

// Prefill attention on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a): FlashAttention.cu's
// schedule (GQA rows, causal / sliding-window masks, the online softmax in f32, the output gate)
// with each warpgroup of 4 warps owning 64 query rows and issuing 64-row products: S = Q K^T
// (m64nNk16 with N the tile's keys, Q and K in shared memory) and O += P V (m64nNk16, P from S's accumulators in
// registers, V read N-major), pipelined a key tile apart so the softmax of one tile runs while the
// tensor cores multiply the previous tile's probabilities by its values. The operands sit in shared
// memory in the 128-byte swizzled layout the descriptors name (Wgmma.cuh): Q rounded to bf16 as it
// is staged, K and V rows from the bf16 copy (flash_kv_bf16 of FlashAttention.cu, or a bf16 cache
// in place) by 16-byte cp.async into two buffers each, the next tile in flight while the current
// one computes.
//
// A block of FA_WG warpgroups owns FW_BR = 64 * FA_WG rows of one kv head: FW_TB tokens x the
// FA_G query heads of the group (row r = token r / FA_G, head r % FA_G), so every key / value tile
// serves the whole group. The grid is token blocks x Hkv x D / FA_DV (head dims above 256 split
// the output columns over blocks, each recomputing S); token blocks run the longest key ranges
// first. Every warpgroup runs all of its block's key tiles (one that none of its rows sees is
// masked whole): products issued under a data-dependent branch would be serialized by ptxas.
// Tiles are FW_BC keys (64; 32 for head dim 512, whose 64-key buffers do not fit).
#include "Common.cuh"
#include "FlashAttention.cuh"
#include "FlashAttentionParams.h"
#include "Mma.cuh"
#include "Wgmma.cuh"

#ifndef FA_WG
#define FA_WG 2
#endif
#ifndef FA_DV
#define FA_DV FA_D
#endif
#define FA_G (FA_HQ / FA_HKV)
#define FW_THREADS (128 * FA_WG)
#define FW_BR (64 * FA_WG)
#define FW_TB (FW_BR / FA_G)
#ifndef FW_BC
#define FW_BC 64  // keys a tile: 64, or 32 where 64-key buffers do not fit (head dim 512)
#endif
#define FW_PANEL_K (FW_BC * 128)  // a 64-column panel of a K or V tile: FW_BC rows of 128 bytes
#define FW_Q_BYTES (FW_BR * FA_D * 2)
#define FW_K_BYTES (FW_BC * FA_D * 2)
#define FW_V_BYTES (FW_BC * FA_DV * 2)
// Q, two K and two V buffers; + 1 KB: the start is rounded up to the swizzle atom.
#define FW_SMEM_BYTES (FW_Q_BYTES + 2 * (FW_K_BYTES + FW_V_BYTES) + 1024)

#if defined(MEMRA_MMA_HOST_EMULATION)
#define FW_SMEM_DECL static __align__(1024) unsigned char fw_smem[FW_SMEM_BYTES]
#else
#define FW_SMEM_DECL extern __shared__ __align__(1024) unsigned char fw_smem[]
#endif

// cp.async of 16 bytes to a shared address (the kernel's offsets are kept as 32-bit shared
// addresses, so no generic-to-shared conversion per copy); `bytes` < 16 reads that many and
// zero-fills the rest (0: the row past the keys is zeros), so every write to a tile is a cp.async
// that the slot's barrier tracks.
__device__ __forceinline__ void fw_cp_async16(u32 dst, const void* src, int bytes = 16) {
#if defined(MEMRA_MMA_HOST_EMULATION)
  unsigned char zero[16] = {};
  if (bytes == 16)
    gq_emu_copy(emu_wg_base + dst, src, 16);
  else
    std::memcpy(emu_wg_base + dst, zero, 16);  // bytes is 16 or 0 here
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
#endif
}

// Rows [j0, j0 + FW_BC) of kv head kvh, columns [c0, c0 + W), of a bf16 copy [rows, Hkv, D] into
// a swizzled tile at shared address `tile` (W / 64 panels) by 16-byte cp.async; rows at or past
// j_end are zero-filled by the copy. A thread keeps one 16-byte column chunk (c) and steps over rows from
// r0, so for a whole tile of a flat cache (the common case) its addresses differ by constants
// (by whole swizzle atoms when it steps 8 rows or more): `dst` (its first row's chunk, from the
// tile's start) and `src` (its chunk of row 0) are computed once.
template <int W>
struct FwCopy {
  static constexpr int kChunks = W / 8, kRowsPerPass = FW_THREADS / kChunks;
  // Whole tiles by constant steps: rows per pass in whole atoms (the swizzle repeats).
  static constexpr bool kFast = FA_RING == 0 && FW_BC % kRowsPerPass == 0;
  int c, r0;
  u32 dst;
  i64 src;
  __device__ __forceinline__ FwCopy(int kvh, int c0) {
    c = threadIdx.x % kChunks;
    r0 = threadIdx.x / kChunks;
    dst = (c >> 3) * FW_PANEL_K + wg_swizzle(r0, c & 7);
    src = (i64)kvh * FA_D + c0 + c * 8;
  }
  __device__ __forceinline__ void stage(u32 tile, const u16* kv, int j0, int j_end) const {
    if (kFast && j0 + FW_BC <= j_end) {
      const u16* row = kv + src + (i64)(j0 + r0) * (FA_HKV * FA_D);
#pragma unroll
      for (int i = 0; i < FW_BC / kRowsPerPass; ++i)
        fw_cp_async16(tile + (kRowsPerPass % 8 == 0 ? dst + i * kRowsPerPass * 128
                                                    : (c >> 3) * FW_PANEL_K + wg_swizzle(r0 + i * kRowsPerPass, c & 7)),
                      row + (i64)i * kRowsPerPass * (FA_HKV * FA_D));
      return;
    }
    for (int r = r0; r < FW_BC; r += kRowsPerPass) {
      const u32 at = (c >> 3) * FW_PANEL_K + wg_swizzle(r, c & 7);
      const int j = j0 + r;
      if (j < j_end)
        fw_cp_async16(tile + at, kv + src + fa_row(j) * (FA_HKV * FA_D));
      else
        fw_cp_async16(tile + at, kv, 0);
    }
  }
};

extern "C" __global__ void __launch_bounds__(FW_THREADS) flash_attention_wgmma(const FlashAttentionParams p) {
  memra_grid_dependency();
  FW_SMEM_DECL;
  unsigned char* Qs = wg_align_smem(fw_smem);  // FA_D / 64 panels of FW_BR rows
  __shared__ int s_lo, s_hi;
  // Copy group j (below) lives in slot j % 2: full[slot] completes when every thread's copies of
  // the group have landed, empty[slot] when every thread's products reading it are done.
  __shared__ __align__(8) u64 s_full[2], s_empty[2];

  // blockIdx.x = (token block from the last, kv head, column split), the split fastest.
  const int split = blockIdx.x % (FA_D / FA_DV), kvh = blockIdx.x / (FA_D / FA_DV) % FA_HKV;
  const int n_tb = gridDim.x / (FA_HKV * (FA_D / FA_DV));
  const int t0 = (n_tb - 1 - (int)(blockIdx.x / (FA_HKV * (FA_D / FA_DV)))) * FW_TB, c0 = split * FA_DV;
  // The warpgroup index broadcast from lane 0: provably uniform, so the descriptors derived from it
  // stay in uniform registers (a per-thread descriptor makes the compiler serialize the products).
  const int wg = __shfl_sync(0xffffffffu, (int)(threadIdx.x >> 7), 0);
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;

  // The block's key range: from the smallest first key to the largest position of its tokens.
  if (threadIdx.x == 0) {
    fa_block_range(p, t0, FW_TB, &s_lo, &s_hi);
    for (int i = 0; i < 2; ++i) {
      wg_mbar_init(&s_full[i], FW_THREADS);
      wg_mbar_init(&s_empty[i], FW_THREADS);
    }
  }
  // Q rows (token, head) of the group, rounded to bf16, 4 columns a thread; rows past n_tok are zeros.
  for (int i = threadIdx.x; i < FW_BR * (FA_D / 4); i += FW_THREADS) {
    const int r = i / (FA_D / 4), c = (i % (FA_D / 4)) * 4;
    const uint2 w = fa_q4_bf16(p, t0 + r / FA_G, kvh * FA_G + r % FA_G, c);
    *reinterpret_cast<uint2*>(Qs + (c >> 6) * (FW_BR * 128) + wg_swizzle(r, (c & 63) >> 3) + (c & 4) * 2) = w;
  }

  // This thread's two rows (g and g + 8 of its warp's 16): their bounds; -1 marks a row past n_tok
  // (every key masked, nothing stored).
  const int rA = wg * 64 + warp * 16 + g, rB = rA + 8;
  const int tA = t0 + rA / FA_G, tB = t0 + rB / FA_G;
  const int posA = tA < p.n_tok ? p.pos[tA] : -1, posB = tB < p.n_tok ? p.pos[tB] : -1;
  const int firstA = fa_first_key(posA, p.window), firstB = fa_first_key(posB, p.window);
  // The warpgroup's bounds (over its tokens): tiles inside them need no mask. min_pos counts a row
  // past n_tok as -1, so such a group always masks.
  int g_min_pos = 0x7fffffff, g_max_first = 0;
  for (int t = t0 + (wg * 64) / FA_G; t <= t0 + (wg * 64 + 63) / FA_G; ++t) {
    const int P = t < p.n_tok ? p.pos[t] : -1;
    g_min_pos = min(g_min_pos, P);
    if (P >= 0) g_max_first = max(g_max_first, fa_first_key(P, p.window));
  }

  float acc[FA_DV / 2];
#pragma unroll
  for (int n = 0; n < FA_DV / 2; ++n) acc[n] = 0.0f;
  float mA = MEMRA_NEG_INF, mB = MEMRA_NEG_INF, lA = 0.0f, lB = 0.0f;
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const u32 q_addr = wg_smem_addr(Qs) + wg * 64 * 128;

  wg_fence_proxy_async();  // Q's rows, visible to the tensor cores
  __syncthreads();         // with the barriers' initialization
  const int lo = s_lo, hi = s_hi;
  const u16* k16 = p.k16;
  const u16* v16 = p.v16;
  const int n_tiles = lo <= hi ? (hi - lo) / FW_BC + 1 : 0;
  unsigned char* Kb = Qs + FW_Q_BYTES;      // 2 K buffers
  unsigned char* Vb = Kb + 2 * FW_K_BYTES;  // then 2 V buffers
  const FwCopy<FA_D> k_copy(kvh, 0);
  const FwCopy<FA_DV> v_copy(kvh, c0);
  const u32 k_addr0 = wg_smem_addr(Kb), v_addr0 = wg_smem_addr(Vb);
  auto copy_group = [&](int j) {
    if (j < n_tiles) k_copy.stage(k_addr0 + (j & 1) * FW_K_BYTES, k16, lo + j * FW_BC, hi + 1);
    if (j >= 1 && j <= n_tiles) v_copy.stage(v_addr0 + ((j - 1) & 1) * FW_V_BYTES, v16, lo + (j - 1) * FW_BC, hi + 1);
    wg_mbar_cp_async_arrive(&s_full[j & 1]);
  };
  // Group j landed for every thread; then visible to this thread's products.
  auto await_group = [&](int j) {
    wg_mbar_wait(&s_full[j & 1], (j >> 1) & 1);
    wg_fence_proxy_async();
  };
  // Group j's slot free again: every thread's products of the step that read it are done.
  auto await_release = [&](int j) { wg_mbar_wait(&s_empty[j & 1], (j >> 1) & 1); };
  float s[FW_BC / 2];
  u32 a[FW_BC / 16][4];  // P of the previous tile: the A fragments of its PV product
#pragma unroll
  for (int n = 0; n < FW_BC / 2; ++n) s[n] = 0.0f;
  // The descriptors of a tile's first k16 step; a step adds its byte offset / 16.
  const u64 q_desc = wg_desc(q_addr, 16, 1024);
  // S_j = Q K_j^T: the group's 64 rows x 64 keys, D / 16 steps of k16.
  auto issue_scores = [&](int j) {
    const u64 k_desc = wg_desc(k_addr0 + (j & 1) * FW_K_BYTES, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < FA_D / 16; ++kk)
      wg_mma_ss<FW_BC>(s, q_desc + (((kk >> 2) * (FW_BR * 128) + (kk & 3) * 32) >> 4),
                       k_desc + (((kk >> 2) * FW_PANEL_K + (kk & 3) * 32) >> 4), kk > 0);
    wg_commit();
  };
  // O += P_j V_j: V's step kk is its rows 16kk.. (N-major: LBO steps the 64-column panels).
  auto issue_values = [&](int j) {
    const u64 v_desc = wg_desc(v_addr0 + (j & 1) * FW_V_BYTES, FW_PANEL_K, 1024);
#pragma unroll
    for (int kk = 0; kk < FW_BC / 16; ++kk) wg_mma_rs<FA_DV>(acc, a[kk], v_desc + ((kk * 16 * 128) >> 4), 1);
    wg_commit();
  };
  // The online softmax of S_j in base 2 (rows A: s[4n + 0..1], rows B: s[4n + 2..3]), masked where
  // the tile crosses a row's bounds (or the row is past n_tok): s becomes P_j, corr the factor O
  // and l are rebased by.
  auto softmax = [&](int j, float& corrA, float& corrB) {
    const int j0 = lo + j * FW_BC;
    const bool masked = j0 + FW_BC - 1 > g_min_pos || j0 < g_max_first;
#pragma unroll
    for (int n = 0; n < FW_BC / 2; ++n) s[n] *= scale_log2;
    if (masked) {
      // The rows' bounds relative to this thread's first column, pinned after the wait so the
      // compiler does not compute the mask for every tile ahead of the products.
      int hiA = posA - j0 - 2 * tq, loA = firstA - j0 - 2 * tq, hiB = posB - j0 - 2 * tq, loB = firstB - j0 - 2 * tq;
      asm volatile("" : "+r"(hiA), "+r"(loA), "+r"(hiB), "+r"(loB));
#pragma unroll
      for (int n = 0; n < FW_BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = n * 8 + (e & 1);
          const bool ok = e < 2 ? (col <= hiA && col >= loA) : (col <= hiB && col >= loB);
          if (!ok) s[4 * n + e] = MEMRA_NEG_INF;
        }
    }
    float mxA = mA, mxB = mB;
#pragma unroll
    for (int n = 0; n < FW_BC / 8; ++n) {
      mxA = fmaxf(mxA, fmaxf(s[4 * n + 0], s[4 * n + 1]));
      mxB = fmaxf(mxB, fmaxf(s[4 * n + 2], s[4 * n + 3]));
    }
    mxA = fa_quad_max(mxA);
    mxB = fa_quad_max(mxB);
    // A row that has seen no key yet keeps base 0 (so -inf - -inf never appears).
    const float baseA = mxA == MEMRA_NEG_INF ? 0.0f : mxA, baseB = mxB == MEMRA_NEG_INF ? 0.0f : mxB;
    corrA = fa_exp2(mA - baseA);
    corrB = fa_exp2(mB - baseB);
    mA = mxA;
    mB = mxB;
    float sumA = 0.0f, sumB = 0.0f;
#pragma unroll
    for (int n = 0; n < FW_BC / 8; ++n) {
      s[4 * n + 0] = fa_exp2(s[4 * n + 0] - baseA);
      s[4 * n + 1] = fa_exp2(s[4 * n + 1] - baseA);
      s[4 * n + 2] = fa_exp2(s[4 * n + 2] - baseB);
      s[4 * n + 3] = fa_exp2(s[4 * n + 3] - baseB);
      sumA += s[4 * n + 0] + s[4 * n + 1];
      sumB += s[4 * n + 2] + s[4 * n + 3];
    }
    lA = lA * corrA + sumA;  // this thread's columns; the quad's partial sums add up at the end
    lB = lB * corrB + sumB;
  };
  // O rebased to the new maxima; P_j's accumulator n-blocks 2kk, 2kk + 1 become the A fragment of
  // keys 16kk..16kk + 15.
  auto rebase_and_pack = [&](float corrA, float corrB) {
#pragma unroll
    for (int n = 0; n < FA_DV / 8; ++n) {
      acc[4 * n + 0] *= corrA;
      acc[4 * n + 1] *= corrA;
      acc[4 * n + 2] *= corrB;
      acc[4 * n + 3] *= corrB;
    }
#pragma unroll
    for (int kk = 0; kk < FW_BC / 16; ++kk) {
      a[kk][0] = mma_pack_bf16(s[8 * kk + 0], s[8 * kk + 1]);
      a[kk][1] = mma_pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
      a[kk][2] = mma_pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
      a[kk][3] = mma_pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
    }
  };

  // The products are pipelined a tile apart: step j issues S_j = Q K_j and O += P_{j-1} V_{j-1},
  // and the softmax of S_j runs while P_{j-1} V_{j-1} is on the tensor cores. Copy group j brings
  // K_j (into K buffer j % 2) and V_{j-1} (into V buffer (j - 1) % 2); group j + 1 is issued behind
  // step j's products and streams in during the step. The warpgroups meet only at the slots'
  // barriers (no block barrier a step), so one group's softmax can run beside the other's products. Every group of the
  // block runs every tile of the block's range (a tile none of its rows sees is masked whole): the products are issued
  // on no data-dependent branch, so the compiler keeps them asynchronous.
  if (n_tiles > 0) {
    float corrA, corrB;
    copy_group(0);
    await_group(0);
    wg_fence_regs<FW_BC / 2>(s);
    wg_fence();
    issue_scores(0);
    copy_group(1);  // slot 1: never used before
    wg_wait<0>();
    wg_mbar_arrive(&s_empty[0]);
    wg_fence_regs<FW_BC / 2>(s);
    softmax(0, corrA, corrB);
    rebase_and_pack(corrA, corrB);
    for (int j = 1; j < n_tiles; ++j) {
      await_group(j);
      wg_fence_regs<FW_BC / 2>(s);
      wg_fence_regs<FA_DV / 2>(acc);
      wg_fence_regs<FW_BC / 4>(&a[0][0]);
      wg_fence();
      issue_scores(j);
      issue_values(j - 1);
      await_release(j - 1);  // group j + 1 takes group j - 1's slot
      copy_group(j + 1);
      wg_wait<1>();
      wg_fence_regs<FW_BC / 2>(s);
      softmax(j, corrA, corrB);
      wg_wait<0>();
      wg_mbar_arrive(&s_empty[j & 1]);
      wg_fence_regs<FA_DV / 2>(acc);
      wg_fence_regs<FW_BC / 4>(&a[0][0]);
      rebase_and_pack(corrA, corrB);
    }
    await_group(n_tiles);  // V of the last tile
    wg_fence_regs<FA_DV / 2>(acc);
    wg_fence_regs<FW_BC / 4>(&a[0][0]);
    wg_fence();
    issue_values(n_tiles - 1);
    wg_wait<0>();
    wg_fence_regs<FA_DV / 2>(acc);
    wg_fence_regs<FW_BC / 4>(&a[0][0]);
  }

  // Normalize, gate, store (rows past n_tok are not written).
  fa_store_rows<FA_DV>(p, acc, lA, lB, tA, kvh * FA_G + rA % FA_G, posA, tB, kvh * FA_G + rB % FA_G, posB, c0, tq);
}

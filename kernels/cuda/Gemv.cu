// Matrix-vector products for one token (decode, M = 1): y[n] = sum_k W[n, k] * x[k], W row-major
// [N, GEMV_K]. Decode is bound by reading the weights once, so a warp streams one row with 16-byte
// loads (8 f16/bf16 or 16 int8 weights per lane per step) against x staged in shared memory
// (f32; every block reads it once), accumulating in f32; a warp reduction finishes the row.
//
// GEMV_STAGE_X: 0 (default) = x read through the read-only cache next to the weights (no barrier
// before the stream starts; any K); 1 = x staged in shared memory per block (K <= 12288). Measured
// with bench/KernelBench.cc on the H200: 0 reaches 78-100 % of the HBM roofline at the 9B shapes,
// 1 only 52-91 % (bench/RESULTS.md).
// GEMV_PREFETCH: the 16-byte weight loads per lane (per row) issued before the grid dependency
// wait (Common.cuh memra_grid_dependency): weights do not depend on the kernel before, so under
// programmatic dependent launch a block resident during that kernel's tail already has its row in
// flight, and the first-byte latency of every product overlaps the work before it.
// GEMV_L2_PREFETCH (select-kernels{l2-prefetch-bytes}): bytes of the launch's weights, from their
// start in the order the rows run, that its first blocks ask the L2 for before the wait (Common.cuh
// memra_l2_prefetch): the rows of blocks not yet resident then come from the L2, streamed in while
// the kernel before ran. 0: none. The sums do not depend on it.
// GEMV_EVICT_FIRST (select-kernels{gemv-evict-first}): the weight loads mark their lines first to
// leave the L2 (Common.cuh memra_ld_evict_first), so the rows a product reads once do not push out
// what GEMV_L2_PREFETCH asked for ahead, the KV cache or activations. The sums do not depend on it.
// GEMV_W, the weight storage: 1 f16, 2 bf16, 3 q8 (Q8_0 repacked at upload: int8 values row-major
// [N, K] and one f32 scale per 32 values [N, K / 32], so loads stay 16-byte aligned; the ggml
// block is 34 bytes), 4 f32 (the MoE router, f32 in every GGUF: cuBLASLt's M = 1 f32 GEMM took a
// launch of several µs per layer). GEMV_K is a multiple of 16 (q8: of 32). GEMV_WARPS rows per block.
// GEMV_T: tokens per launch (x [GEMV_T, K], y [GEMV_T, N] row-major, 1..8): a warp reads its row
// once for every token, and each token's arithmetic is the one-token kernel's in the same order
// (the same products and sums per piece, the same warp reduction), so a row's result does not
// depend on GEMV_T: the exact decode class (DecodeClass.h) relies on that. The add_rms_norm
// prologue and x staged in shared memory take one token.
// GEMV_R: rows a warp runs side by side in gemv, gemv_group and gemv_splitk (1, 2 or 4), each x load serving
// them all: with several tokens the x loads (GEMV_T x 32 bytes per 16-byte weight piece), not the
// weights, bound a warp of one row. A row's arithmetic does not depend on it.
#include "Common.cuh"
#include "GemvParams.h"

#ifndef GEMV_K
#define GEMV_K 256
#endif
#ifndef GEMV_W
#define GEMV_W 2
#endif
#ifndef GEMV_WARPS
#define GEMV_WARPS 8
#endif
#ifndef GEMV_STAGE_X
#define GEMV_STAGE_X 0
#endif
#ifndef GEMV_SPLITK
#define GEMV_SPLITK 0
#endif
#ifndef GEMV_T
#define GEMV_T 1
#endif
#ifndef GEMV_R
#define GEMV_R 1
#endif
static_assert(GEMV_R == 1 || GEMV_R == 2 || GEMV_R == 4, "GEMV_R in 1, 2, 4");
static_assert(GEMV_T >= 1 && GEMV_T <= 8, "GEMV_T in 1..8");
static_assert(GEMV_T == 1 || !GEMV_STAGE_X, "x staged in shared memory holds one token");

#if GEMV_W == 3
#define GEMV_PER_LANE 16  // int8 per 16-byte load
#elif GEMV_W == 4
#define GEMV_PER_LANE 4  // f32 per 16-byte load
#else
#define GEMV_PER_LANE 8  // f16 / bf16 per 16-byte load
#endif
#define GEMV_STEPS ((GEMV_K + 32 * GEMV_PER_LANE - 1) / (32 * GEMV_PER_LANE))
#ifndef GEMV_PREFETCH
// session 18: 4 a row was faster alone (ncu) but slower in the decode graph; GEMV_R rows share 16.
#define GEMV_PREFETCH (16 / GEMV_R)
#endif
#define GEMV_PRE (GEMV_STEPS < GEMV_PREFETCH ? GEMV_STEPS : GEMV_PREFETCH)
#if GEMV_W == 3
#define GEMV_ELEM_BYTES 1
#elif GEMV_W == 4
#define GEMV_ELEM_BYTES 4
#else
#define GEMV_ELEM_BYTES 2
#endif

#ifndef GEMV_L2_PREFETCH
#define GEMV_L2_PREFETCH 0
#endif
#ifndef GEMV_EVICT_FIRST
#define GEMV_EVICT_FIRST 0
#endif
// Asks the L2 for up to `budget` bytes from the start of a weight of n_rows rows; the bytes asked.
__device__ __forceinline__ i64 weight_l2_prefetch(const void* w, i64 n_rows, i64 budget) {
  const i64 bytes = min(budget, n_rows * (i64)(GEMV_K * GEMV_ELEM_BYTES));
  if (bytes > 0) memra_l2_prefetch(w, bytes);
  return bytes;
}

// The first GEMV_PRE 16-byte pieces of a lane's share of one weight row (zeros past GEMV_K).
struct RowPrefetch {
  uint4 q[GEMV_PRE];
};
__device__ __forceinline__ const unsigned char* row_bytes(const void* w, i64 row) {
  return static_cast<const unsigned char*>(w) + row * (i64)(GEMV_K * GEMV_ELEM_BYTES);
}
__device__ __forceinline__ uint4 row_piece(const unsigned char* wr, int s) {
  const int k = (s * 32 + (threadIdx.x & 31)) * GEMV_PER_LANE;
  if (k >= GEMV_K) return make_uint4(0, 0, 0, 0);
#if GEMV_EVICT_FIRST
  return memra_ld_evict_first(wr + k * GEMV_ELEM_BYTES);
#else
  return __ldg(reinterpret_cast<const uint4*>(wr + k * GEMV_ELEM_BYTES));
#endif
}
__device__ __forceinline__ void row_prefetch(const void* __restrict__ w, i64 row, RowPrefetch& pf) {
  const unsigned char* wr = row_bytes(w, row);
#pragma unroll
  for (int s = 0; s < GEMV_PRE; ++s) pf.q[s] = row_piece(wr, s);
}

#if GEMV_STAGE_X
#define GEMV_X_DECL __shared__ __align__(16) float xs_smem[GEMV_K];
__device__ __forceinline__ const float* stage_x(const float* __restrict__ x, float* xs) {
  for (int i = threadIdx.x; i < GEMV_K; i += blockDim.x) xs[i] = x[i];
  __syncthreads();
  return xs;
}
__device__ __forceinline__ float4 load_x4(const float* xs, int k) { return *reinterpret_cast<const float4*>(xs + k); }
#else
#define GEMV_X_DECL float* xs_smem = nullptr;
__device__ __forceinline__ const float* stage_x(const float* __restrict__ x, float*) { return x; }
__device__ __forceinline__ float4 load_x4(const float* x, int k) {
  return __ldg(reinterpret_cast<const float4*>(x + k));
}
#endif

// Where the products read x: XPlain, x itself (staged first when GEMV_STAGE_X); XAddNorm, the
// add_rms_norm prologue (add_rms_norm_matmul): each warp reads x = (a + b) * norm_w as it goes,
// summing the squares of a + b on the way, and scales each row's sum by the norm's 1 / rms at the
// end: rms_norm(a + b) * norm_w . w up to f32 rounding. No block barrier: a block staging x in
// shared memory first (measured, session 18) paid that latency once per wave of blocks, as much as
// the separate norm launch it replaced. a, b and w come from L1 after the block's first warp.
struct XPlain {
  const float* x;
  __device__ __forceinline__ void begin() {}
  __device__ __forceinline__ float4 load(int k, int t) { return load_x4(x + (i64)t * GEMV_K, k); }
  __device__ __forceinline__ float finish(float acc) const { return warp_sum(acc); }
};
struct XAddNorm {
  const float* a;
  const float* b;
  const float* w;
  float eps;
  float ss;  // this lane's share of sum((a + b)^2) over the row (begin resets it)
  __device__ __forceinline__ void begin() { ss = 0.0f; }
  __device__ __forceinline__ float4 load(int k, int) {  // one token (GEMV_T == 1)
    const float4 va = __ldg(reinterpret_cast<const float4*>(a + k));
    const float4 vb = __ldg(reinterpret_cast<const float4*>(b + k));
    const float4 vw = __ldg(reinterpret_cast<const float4*>(w + k));
    const float4 v = make_float4(va.x + vb.x, va.y + vb.y, va.z + vb.z, va.w + vb.w);
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    return make_float4(v.x * vw.x, v.y * vw.y, v.z * vw.z, v.w * vw.w);
  }
  __device__ __forceinline__ float finish(float acc) const {
    return warp_sum(acc) * (1.0f / sqrtf(warp_sum(ss) / (float)GEMV_K + eps));
  }
};
// After the grid dependency wait: stage x (GEMV_STAGE_X) for the plain source.
__device__ __forceinline__ void prepare_x(XPlain& xs, float* smem) { xs.x = stage_x(xs.x, smem); }
__device__ __forceinline__ void prepare_x(XAddNorm&, float*) {}

// Four int8 (one 32-bit word) to f32 exactly without the quarter-rate I2F conversion: each biased
// byte goes into the low mantissa of 2^23 (byte_perm), and one subtraction removes 2^23 + 128.
__device__ __forceinline__ void int8x4_to_f32(unsigned w, float f[4]) {
  const unsigned u = w ^ 0x80808080u;  // signed -> biased unsigned bytes
  f[0] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7650)) - 8388736.0f;
  f[1] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7651)) - 8388736.0f;
  f[2] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7652)) - 8388736.0f;
  f[3] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7653)) - 8388736.0f;
}

// acc[t] += one 16-byte piece of a row of f32 (GEMV_W 4) or 16-bit weights dotted with each
// token's x over the piece's elements (xv[t]: a float4, or 8 floats), in the one order every
// GEMV form uses (so a row's sums do not depend on the form or on T).
#if GEMV_W == 4
__device__ __forceinline__ void piece_dot(float (&acc)[GEMV_T], const uint4 q, const float4 (&xv)[GEMV_T]) {
#pragma unroll
  for (int t = 0; t < GEMV_T; ++t)
    acc[t] += __uint_as_float(q.x) * xv[t].x + __uint_as_float(q.y) * xv[t].y + __uint_as_float(q.z) * xv[t].z +
              __uint_as_float(q.w) * xv[t].w;
}
#elif GEMV_W != 3
__device__ __forceinline__ void piece_dot(float (&acc)[GEMV_T], const uint4 q, const float (&xv)[GEMV_T][8]) {
  const u16* h = reinterpret_cast<const u16*>(&q);
  float wf[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) wf[j] = load_as_f32<GEMV_W>(h, j);
#pragma unroll
  for (int t = 0; t < GEMV_T; ++t)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[t] += wf[j] * xv[t][j];
}
#endif

// The dot products of R weight rows (one warp: the same row index in each of w[0..R)) with the
// GEMV_T tokens of x, each summed over the warp (every lane gets them): one x load a piece serves
// the R rows, the prefetched pieces first, the rest of each row loaded here. Per (row, token) the
// products and sums are those of GEMV_T = 1, in the same order.
template <typename XS, int R>
__device__ __forceinline__ void rows_dot(const void* const (&w)[R], const float* const (&scale)[R], const i64 (&row)[R],
                                         XS& xs, const RowPrefetch (&pf)[R], float (&out)[R][GEMV_T]) {
  const int lane = threadIdx.x & 31;
  xs.begin();
  float acc[R][GEMV_T];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < GEMV_T; ++t) acc[r][t] = 0.0f;
#pragma unroll
  for (int s = 0; s < GEMV_STEPS; ++s) {
    const int k = (s * 32 + lane) * GEMV_PER_LANE;
    if (k < GEMV_K) {
#if GEMV_W == 3
      float4 xv[GEMV_T][4];
#pragma unroll
      for (int t = 0; t < GEMV_T; ++t)
#pragma unroll
        for (int j = 0; j < 4; ++j) xv[t][j] = xs.load(k + 4 * j, t);
#elif GEMV_W == 4
      float4 xv[GEMV_T];
#pragma unroll
      for (int t = 0; t < GEMV_T; ++t) xv[t] = xs.load(k, t);
#else
      float xv[GEMV_T][8];
#pragma unroll
      for (int t = 0; t < GEMV_T; ++t) {
        const float4 x0 = xs.load(k, t);
        const float4 x1 = xs.load(k + 4, t);
        xv[t][0] = x0.x, xv[t][1] = x0.y, xv[t][2] = x0.z, xv[t][3] = x0.w;
        xv[t][4] = x1.x, xv[t][5] = x1.y, xv[t][6] = x1.z, xv[t][7] = x1.w;
      }
#endif
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint4 q = s < GEMV_PRE ? pf[r].q[s < GEMV_PRE ? s : 0] : row_piece(row_bytes(w[r], row[r]), s);
#if GEMV_W == 3
        const unsigned qw[4] = {q.x, q.y, q.z, q.w};
        float qf[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) int8x4_to_f32(qw[j], qf[j]);
        const float sc = scale[r][row[r] * (GEMV_K / 32) + k / 32];
#pragma unroll
        for (int t = 0; t < GEMV_T; ++t) {
          float part = 0.0f;
#pragma unroll
          for (int j = 0; j < 4; ++j)
            part += qf[j][0] * xv[t][j].x + qf[j][1] * xv[t][j].y + qf[j][2] * xv[t][j].z + qf[j][3] * xv[t][j].w;
          acc[r][t] += part * sc;
        }
#else
        piece_dot(acc[r], q, xv);
#endif
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < GEMV_T; ++t) out[r][t] = xs.finish(acc[r][t]);
}
// One row for every token (every lane gets the sums).
template <typename XS>
__device__ __forceinline__ void row_dot(const void* __restrict__ w, const float* __restrict__ scale, i64 row, XS& xs,
                                        const RowPrefetch& pf, float (&out)[GEMV_T]) {
  const void* const ws[1] = {w};
  const float* const ss[1] = {scale};
  const RowPrefetch pfs[1] = {pf};
  const i64 rows[1] = {row};
  float o[1][GEMV_T];
  rows_dot<XS, 1>(ws, ss, rows, xs, pfs, o);
#pragma unroll
  for (int t = 0; t < GEMV_T; ++t) out[t] = o[0][t];
}
// GEMV_R rows a warp (rows past the matrix read its last one and write nothing).
template <typename XS>
__device__ __forceinline__ void gemv_body(const void* __restrict__ w, const float* __restrict__ scale, XS xs,
                                          float* __restrict__ y, int n_rows) {
  const i64 first = ((i64)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5)) * GEMV_R;
  i64 rows[GEMV_R];
  const void* ws[GEMV_R];
  const float* ss[GEMV_R];
#pragma unroll
  for (int r = 0; r < GEMV_R; ++r) {
    rows[r] = GEMV_R == 1 || first + r < n_rows ? first + r : n_rows - 1;  // one row: live past the return
    ws[r] = w, ss[r] = scale;
  }
  // The L2 prefetch first: its registers are free again before the rows' pieces arrive.
  if (GEMV_L2_PREFETCH > 0) weight_l2_prefetch(w, n_rows, GEMV_L2_PREFETCH);
  RowPrefetch pf[GEMV_R];
  if (first < n_rows)
#pragma unroll
    for (int r = 0; r < GEMV_R; ++r) row_prefetch(w, rows[r], pf[r]);
  memra_grid_dependency();
  GEMV_X_DECL
  prepare_x(xs, xs_smem);
  if (first >= n_rows) return;
  float v[GEMV_R][GEMV_T];
  rows_dot<XS, GEMV_R>(ws, ss, rows, xs, pf, v);
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int r = 0; r < GEMV_R; ++r)
      if (GEMV_R == 1 || first + r < n_rows)
#pragma unroll
        for (int t = 0; t < GEMV_T; ++t) y[(i64)t * n_rows + first + r] = v[r][t];
}

// The FFN's fused gate/up product: y[n] = silu(Wg x)[n] * (Wu x)[n] (GEMV_GELU: gelu, GeGLU), both
// rows read by one warp.
#ifndef GEMV_GELU
#define GEMV_GELU 0
#endif
template <typename XS>
__device__ __forceinline__ void gemv_swiglu_body(const void* __restrict__ wg, const float* __restrict__ sg,
                                                 const void* __restrict__ wu, const float* __restrict__ su, XS xs,
                                                 float* __restrict__ y, int n_rows) {
  const i64 row = (i64)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
  if (GEMV_L2_PREFETCH > 0) {  // the two weights' rows run side by side: half the bytes each
    weight_l2_prefetch(wg, n_rows, GEMV_L2_PREFETCH / 2);
    weight_l2_prefetch(wu, n_rows, GEMV_L2_PREFETCH / 2);
  }
  RowPrefetch pg, pu;
  if (row < n_rows) {
    row_prefetch(wg, row, pg);
    row_prefetch(wu, row, pu);
  }
  memra_grid_dependency();
  GEMV_X_DECL
  prepare_x(xs, xs_smem);
  if (row >= n_rows) return;
  // Both rows in one pass over x (one x load a piece for the two weight pieces).
  const void* const ws[2] = {wg, wu};
  const float* const ss[2] = {sg, su};
  const RowPrefetch pfs[2] = {pg, pu};
  const i64 rows[2] = {row, row};
  float gu[2][GEMV_T];
  rows_dot<XS, 2>(ws, ss, rows, xs, pfs, gu);
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int t = 0; t < GEMV_T; ++t)
      y[(i64)t * n_rows + row] = glu_(GEMV_GELU ? geluf_(gu[0][t]) : siluf_(gu[0][t]), gu[1][t]);
}

// A matmul_group's products (up to 4 weights of one storage sharing x) in one launch: global row
// g runs against the weight whose row range holds it. Small projections (the delta-net beta /
// alpha, 32 rows) then cost no launch of their own. GEMV_R rows a warp may straddle two weights
// (each row finds its own); rows past the group read its first row and write nothing.
struct GroupRow {
  const void* w = nullptr;  // nullptr: past the group
  const float* scale = nullptr;
  float* y = nullptr;
  int n = 0;
  i64 row = 0;
};
__device__ __forceinline__ GroupRow group_row(const GemvWeight* __restrict__ ws, float* const* ys, const int* n_rows,
                                              i64 g) {
  int which = -1;
#pragma unroll
  for (int i = 0; i < MEMRA_GEMV_GROUP_MAX; ++i) {
    if (which < 0) {
      if (g < n_rows[i])
        which = i;
      else
        g -= n_rows[i];
    }
  }
  // Constant indices only (a parameter array indexed at run time goes through the stack).
  GroupRow r;
  r.row = g;
#pragma unroll
  for (int i = 0; i < MEMRA_GEMV_GROUP_MAX; ++i)
    if (i == which) r.w = ws[i].w, r.scale = ws[i].scale, r.y = ys[i], r.n = n_rows[i];
  return r;
}
template <typename XS>
__device__ __forceinline__ void gemv_group_body(const GemvWeight* __restrict__ ws, float* const* ys, const int* n_rows,
                                                XS xs) {
  const i64 first = ((i64)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5)) * GEMV_R;
  GroupRow gr[GEMV_R];
  const void* w[GEMV_R];
  const float* sc[GEMV_R];
  i64 rows[GEMV_R];
#pragma unroll
  for (int r = 0; r < GEMV_R; ++r) {
    gr[r] = group_row(ws, ys, n_rows, first + r);
    const bool live = gr[r].w != nullptr;
    w[r] = live ? gr[r].w : ws[0].w;
    sc[r] = live ? gr[r].scale : ws[0].scale;
    rows[r] = live ? gr[r].row : 0;
  }
  if (GEMV_L2_PREFETCH > 0) {  // the weights in turn, as their rows run
    i64 left = GEMV_L2_PREFETCH;
#pragma unroll
    for (int i = 0; i < MEMRA_GEMV_GROUP_MAX; ++i)
      if (ws[i].w != nullptr) left -= weight_l2_prefetch(ws[i].w, n_rows[i], left);
  }
  RowPrefetch pf[GEMV_R];
  if (gr[0].w != nullptr)
#pragma unroll
    for (int r = 0; r < GEMV_R; ++r) row_prefetch(w[r], rows[r], pf[r]);
  memra_grid_dependency();
  GEMV_X_DECL
  prepare_x(xs, xs_smem);
  if (gr[0].w == nullptr) return;
  float v[GEMV_R][GEMV_T];
  rows_dot<XS, GEMV_R>(w, sc, rows, xs, pf, v);
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int r = 0; r < GEMV_R; ++r)
      if (gr[r].w != nullptr)
#pragma unroll
        for (int t = 0; t < GEMV_T; ++t) gr[r].y[(i64)t * gr[r].n + gr[r].row] = v[r][t];
}

#if defined(GEMV_NORM_COLS) && GEMV_T == 1
#include "AddNormTail.cuh"
// matmul_add_rms_norm (one token): the product's blocks write it into g.y (the op's sum); the
// launch's last block to finish adds the residual and normalizes the row as Norm.cu's add_rms_norm
// does (AddNormTail.cuh: the same bits as the two launches, tests/cuda/emulation/GemvAddNormEmu.cc):
// gemv_splitk_add_norm and gemv_add_norm below.
#endif

#if GEMV_SPLITK == 2 && GEMV_W != 3 && GEMV_STEPS % 2 == 0
// A product of few rows (fewer than two waves of warp-per-row blocks: the 9B's 4096 x 4096, the
// 0.8B's 1024-row products) with two warps a row, each over half of K: twice the blocks, each half
// as long, so the last partial wave is half as long, and blocks still retire one by one (the next
// product's blocks take their place and prefetch). The second half's sum goes through shared
// memory to the first's warp, which adds it (a fixed order: deterministic).
#define GEMV_HALF (GEMV_STEPS / 2)
#define GEMV_HALF_PRE (GEMV_HALF < GEMV_PREFETCH ? GEMV_HALF : GEMV_PREFETCH)
__device__ __forceinline__ void gemv_splitk_body(const GemvParams& p) {
  __shared__ float second[GEMV_WARPS / 2][GEMV_R][GEMV_T];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = warp & 1;
  // GEMV_R rows a warp pair (rows past the matrix read row 0 and write nothing).
  const i64 first = ((i64)blockIdx.x * (GEMV_WARPS / 2) + (warp >> 1)) * GEMV_R;
  if (GEMV_L2_PREFETCH > 0) weight_l2_prefetch(p.w.w, p.n_rows, GEMV_L2_PREFETCH);
  const unsigned char* wr[GEMV_R];
  uint4 pf[GEMV_R][GEMV_HALF_PRE];
#pragma unroll
  for (int r = 0; r < GEMV_R; ++r) {
    const bool live = first + r < p.n_rows;
    wr[r] = row_bytes(p.w.w, live ? first + r : 0);
#pragma unroll
    for (int s = 0; s < GEMV_HALF_PRE; ++s)
      pf[r][s] = live ? row_piece(wr[r], half * GEMV_HALF + s) : make_uint4(0, 0, 0, 0);
  }
  memra_grid_dependency();
  float acc[GEMV_R][GEMV_T];
#pragma unroll
  for (int r = 0; r < GEMV_R; ++r)
#pragma unroll
    for (int t = 0; t < GEMV_T; ++t) acc[r][t] = 0.0f;
  if (first < p.n_rows) {
#pragma unroll
    for (int s = 0; s < GEMV_HALF; ++s) {
      const int piece = half * GEMV_HALF + s, k = (piece * 32 + lane) * GEMV_PER_LANE;
#if GEMV_W == 4
      float4 xv[GEMV_T];
#pragma unroll
      for (int t = 0; t < GEMV_T; ++t) xv[t] = load_x4(p.x + (i64)t * GEMV_K, k);
#else
      float xv[GEMV_T][8];
#pragma unroll
      for (int t = 0; t < GEMV_T; ++t) {
        const float4 x0 = load_x4(p.x + (i64)t * GEMV_K, k);
        const float4 x1 = load_x4(p.x + (i64)t * GEMV_K, k + 4);
        xv[t][0] = x0.x, xv[t][1] = x0.y, xv[t][2] = x0.z, xv[t][3] = x0.w;
        xv[t][4] = x1.x, xv[t][5] = x1.y, xv[t][6] = x1.z, xv[t][7] = x1.w;
      }
#endif
#pragma unroll
      for (int r = 0; r < GEMV_R; ++r) {
        const uint4 q = s < GEMV_HALF_PRE ? pf[r][s < GEMV_HALF_PRE ? s : 0] : row_piece(wr[r], piece);
        piece_dot(acc[r], q, xv);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < GEMV_R; ++r)
#pragma unroll
    for (int t = 0; t < GEMV_T; ++t) acc[r][t] = warp_sum(acc[r][t]);
  if (half == 1 && lane == 0)
#pragma unroll
    for (int r = 0; r < GEMV_R; ++r)
#pragma unroll
      for (int t = 0; t < GEMV_T; ++t) second[warp >> 1][r][t] = acc[r][t];
  __syncthreads();
  if (half == 0 && lane == 0)
#pragma unroll
    for (int r = 0; r < GEMV_R; ++r)
      if (first + r < p.n_rows)
#pragma unroll
        for (int t = 0; t < GEMV_T; ++t) p.y[(i64)t * p.n_rows + first + r] = acc[r][t] + second[warp >> 1][r][t];
}
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_splitk(const GemvParams p) { gemv_splitk_body(p); }
#if defined(GEMV_NORM_COLS) && GEMV_T == 1
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_splitk_add_norm(const GemvAddNormParams p) {
  gemv_splitk_body(p.g);
  add_norm_tail<GEMV_NORM_COLS, GEMV_WARPS * 32>(p.g.y, p.norm);
}
#endif

#if defined(MR_E) && GEMV_T == 1
#include "AddNormTail.cuh"
#include "MoeRoute.cuh"
// moe_router (one token): gemv_splitk's blocks write the router's logits into g.y (the step's
// scratch); the launch's last block to finish (an arrival ticket taken after a fence, zeroed
// again by that block for the next launch) routes them with its first warp, as moe_route
// (MR_SIGMOID: moe_route_sigmoid) computes it, so no routing launch follows.
#ifndef MR_SIGMOID
#define MR_SIGMOID 0
#endif
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_splitk_route(const GemvRouteParams p) {
  gemv_splitk_body(p.g);
  if (!last_block_to_arrive(p.ticket) || threadIdx.x >= 32) return;
#if MR_SIGMOID
  route_sigmoid_warp<true>(p.g.y, p.ids, p.weights, p.per_expert, p.scale, threadIdx.x);
#else
  route_softmax_warp<true>(p.g.y, p.ids, p.weights, p.per_expert, threadIdx.x);
#endif
}
#endif

#endif

// add_rms_norm_matmul's sum = a + b: written by the first block (every block reads a and b; the
// memory plan never places an op's result over its operands).
__device__ __forceinline__ void write_norm_sum(const GemvNorm& n, const float* a) {
  if (blockIdx.x != 0) return;
  for (int k = threadIdx.x; k < GEMV_K; k += blockDim.x) n.sum[k] = a[k] + n.b[k];
}
__device__ __forceinline__ XAddNorm add_norm_x(const float* a, const GemvNorm& n) {
  XAddNorm x;
  x.a = a;
  x.b = n.b;
  x.w = n.w;
  x.eps = n.eps;
  x.ss = 0.0f;
  return x;
}

// Entry points: one parameter struct each (GemvParams.h), unpacked into the bodies above (their
// __restrict__ parameters survive inlining). The bodies call memra_grid_dependency() once their
// weights are in flight; the _norm entries are add_rms_norm_matmul's (x is the prologue's a).
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv(const GemvParams p) {
  gemv_body(p.w.w, p.w.scale, XPlain{p.x}, p.y, p.n_rows);
}
#if defined(GEMV_NORM_COLS) && GEMV_T == 1 && GEMV_R == 1
// matmul_add_rms_norm where gemv_splitk does not take the shape (K past 4096: the 9B's down).
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_add_norm(const GemvAddNormParams p) {
  gemv_body(p.g.w.w, p.g.w.scale, XPlain{p.g.x}, p.g.y, p.g.n_rows);
  add_norm_tail<GEMV_NORM_COLS, GEMV_WARPS * 32>(p.g.y, p.norm);
}
#endif
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_swiglu(const GemvSwigluParams p) {
  gemv_swiglu_body(p.gate.w, p.gate.scale, p.up.w, p.up.scale, XPlain{p.x}, p.y, p.n_rows);
}
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_group(const GemvGroupParams p) {
  gemv_group_body(p.w, p.y, p.n_rows, XPlain{p.x});
}
#if defined(DNS_HK) && GEMV_T == 1 && GEMV_R == 1
#include "DeltaNetStepTail.cuh"
// matmul_delta_net_step (one token): the four products of a delta-net layer's input projections,
// a warp a row in the key-head order of DeltaNetStepTail.cuh, each into its place in the step's
// inputs (p.step.x, z, b, a: the op's scratch); the block that completes the rows a value head's
// step reads (a ticket per value head, p.ticket[h]; then one per key head for its conv rows,
// p.ticket[DNS_HV + kh]; all zero between launches) runs that head's step. A row's arithmetic is
// gemv_group's, a head's step delta_net_step's.
// Three blocks an SM at 8 warps (at most 85 registers a thread), so the product streams as gemv_group
// does: the step's state takes DNT_DEPTH passes of registers, not all of them.
#ifndef DNT_MIN_BLOCKS
#define DNT_MIN_BLOCKS (GEMV_WARPS <= 8 ? 3 : 1)
#endif
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32, DNT_MIN_BLOCKS)
    gemv_group_delta_step(const GemvDeltaStepParams p) {
  constexpr int kRows = DNS_HK * DNT_UNIT;
  static_assert(DNT_UNIT >= GEMV_WARPS, "a block's rows touch at most two key heads");
  const int g = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
  int member = -1, row = 0;
  if (g < kRows) dnt_row(g, member, row);
  // Constant indices only (a parameter array indexed at run time goes through the stack).
  const void* w = nullptr;
  const float* sc = nullptr;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (i == member) w = p.w[i].w, sc = p.w[i].scale;
  float* const y = const_cast<float*>(member == 0   ? p.step.x
                                      : member == 1 ? p.step.z
                                      : member == 2 ? p.step.b
                                                    : p.step.a);
  RowPrefetch pf;
  if (w != nullptr) row_prefetch(w, row, pf);
  memra_grid_dependency();
  XPlain xs{p.x};
  GEMV_X_DECL
  prepare_x(xs, xs_smem);
  if (w != nullptr) {
    float v[1];
    row_dot(w, sc, row, xs, pf, v);
    if ((threadIdx.x & 31) == 0) y[row] = v[0];
  }
  // One arrival for each value head whose step reads rows this block wrote (its key head's q / k
  // rows or its own); the heads this block completes, as u * DNT_R + r.
  __shared__ int s_heads[2 * DNT_R];
  __shared__ int s_n;
  __threadfence();  // this thread's stores before the block's arrivals
  __syncthreads();
  if (threadIdx.x == 0) {
    int n = 0;
    const int g0 = blockIdx.x * GEMV_WARPS, g1 = min(g0 + GEMV_WARPS, kRows);
    for (int u = g0 / DNT_UNIT; u <= (g1 - 1) / DNT_UNIT; ++u) {
      const bool qk = dnt_meets(g0, g1, u * DNT_UNIT, u * DNT_UNIT + 2 * DNS_DK);
      for (int r = 0; r < DNT_R; ++r) {
        const int b = dnt_head_begin(u, r);
        if (!qk && !dnt_meets(g0, g1, b, b + 2 * DNS_DV + 2)) continue;
        if (atomicAdd(p.ticket + u + r * DNS_HK, 1u) == dnt_arrivals<GEMV_WARPS>(u, r) - 1)
          s_heads[n++] = u * DNT_R + r;
      }
    }
    s_n = n;
  }
  __syncthreads();
  const int n = s_n;
  for (int i = 0; i < n; ++i) {
    const int u = s_heads[i] / DNT_R, r = s_heads[i] % DNT_R;
    __threadfence();  // the other blocks' stores after their arrivals
    if (threadIdx.x == 0) p.ticket[u + r * DNS_HK] = 0u;
    delta_step_head<GEMV_WARPS * 32>(p.step, u, r, p.ticket + DNS_HV + u);
  }
}
#endif
#if !GEMV_STAGE_X && GEMV_T == 1  // the prologue reads a, b and w through the read-only cache; one token
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_norm(const GemvNormParams p) {
  gemv_body(p.g.w.w, p.g.w.scale, add_norm_x(p.g.x, p.norm), p.g.y, p.g.n_rows);
  write_norm_sum(p.norm, p.g.x);
}
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_swiglu_norm(const GemvSwigluNormParams p) {
  gemv_swiglu_body(p.g.gate.w, p.g.gate.scale, p.g.up.w, p.g.up.scale, add_norm_x(p.g.x, p.norm), p.g.y, p.g.n_rows);
  write_norm_sum(p.norm, p.g.x);
}
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_group_norm(const GemvGroupNormParams p) {
  gemv_group_body(p.g.w, p.g.y, p.g.n_rows, add_norm_x(p.g.x, p.norm));
  write_norm_sum(p.norm, p.g.x);
}
#endif

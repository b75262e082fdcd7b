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
// GEMV_W, the weight storage: 1 f16, 2 bf16, 3 q8 (Q8_0 repacked at upload: int8 values row-major
// [N, K] and one f32 scale per 32 values [N, K / 32], so loads stay 16-byte aligned; the ggml
// block is 34 bytes), 4 f32 (the MoE router, f32 in every GGUF: cuBLASLt's M = 1 f32 GEMM took a
// launch of several µs per layer). GEMV_K is a multiple of 16 (q8: of 32). GEMV_WARPS rows per block.
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

#if GEMV_W == 3
#define GEMV_PER_LANE 16  // int8 per 16-byte load
#elif GEMV_W == 4
#define GEMV_PER_LANE 4  // f32 per 16-byte load
#else
#define GEMV_PER_LANE 8  // f16 / bf16 per 16-byte load
#endif
#define GEMV_STEPS ((GEMV_K + 32 * GEMV_PER_LANE - 1) / (32 * GEMV_PER_LANE))
#ifndef GEMV_PREFETCH
#define GEMV_PREFETCH 16
#endif
#define GEMV_PRE (GEMV_STEPS < GEMV_PREFETCH ? GEMV_STEPS : GEMV_PREFETCH)
#if GEMV_W == 3
#define GEMV_ELEM_BYTES 1
#elif GEMV_W == 4
#define GEMV_ELEM_BYTES 4
#else
#define GEMV_ELEM_BYTES 2
#endif

// The first GEMV_PRE 16-byte pieces of a lane's share of one weight row (zeros past GEMV_K).
struct RowPrefetch {
  uint4 q[GEMV_PRE];
};
__device__ __forceinline__ const unsigned char* row_bytes(const void* w, i64 row) {
  return static_cast<const unsigned char*>(w) + row * (i64)(GEMV_K * GEMV_ELEM_BYTES);
}
__device__ __forceinline__ uint4 row_piece(const unsigned char* wr, int s) {
  const int k = (s * 32 + (threadIdx.x & 31)) * GEMV_PER_LANE;
  return k < GEMV_K ? __ldg(reinterpret_cast<const uint4*>(wr + k * GEMV_ELEM_BYTES)) : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ void row_prefetch(const void* __restrict__ w, i64 row, RowPrefetch& pf) {
  const unsigned char* wr = row_bytes(w, row);
#pragma unroll
  for (int s = 0; s < GEMV_PRE; ++s) pf.q[s] = row_piece(wr, s);
}

#if GEMV_STAGE_X
#define GEMV_X_DECL __shared__ __align__(16) float xs[GEMV_K];
__device__ __forceinline__ const float* stage_x(const float* __restrict__ x, float* xs) {
  for (int i = threadIdx.x; i < GEMV_K; i += blockDim.x) xs[i] = x[i];
  __syncthreads();
  return xs;
}
__device__ __forceinline__ float4 load_x4(const float* xs, int k) { return *reinterpret_cast<const float4*>(xs + k); }
#else
#define GEMV_X_DECL float* xs = nullptr;
__device__ __forceinline__ const float* stage_x(const float* __restrict__ x, float*) { return x; }
__device__ __forceinline__ float4 load_x4(const float* x, int k) {
  return __ldg(reinterpret_cast<const float4*>(x + k));
}
#endif

// Four int8 (one 32-bit word) to f32 exactly without the quarter-rate I2F conversion: each biased
// byte goes into the low mantissa of 2^23 (byte_perm), and one subtraction removes 2^23 + 128.
__device__ __forceinline__ void int8x4_to_f32(unsigned w, float f[4]) {
  const unsigned u = w ^ 0x80808080u;  // signed -> biased unsigned bytes
  f[0] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7650)) - 8388736.0f;
  f[1] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7651)) - 8388736.0f;
  f[2] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7652)) - 8388736.0f;
  f[3] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7653)) - 8388736.0f;
}

// The dot product of row `row` with the staged x, summed over the warp (every lane gets it): the
// prefetched pieces first, the rest of the row loaded here.
__device__ __forceinline__ float row_dot(const void* __restrict__ w, const float* __restrict__ scale, i64 row,
                                         const float* xs, const RowPrefetch& pf) {
  const int lane = threadIdx.x & 31;
  const unsigned char* wr = row_bytes(w, row);
  float acc = 0.0f;
#if GEMV_W == 3
  const float* sr = scale + row * (GEMV_K / 32);
#endif
#pragma unroll
  for (int s = 0; s < GEMV_STEPS; ++s) {
    const int k = (s * 32 + lane) * GEMV_PER_LANE;
    if (k < GEMV_K) {
      const uint4 q = s < GEMV_PRE ? pf.q[s < GEMV_PRE ? s : 0] : row_piece(wr, s);
#if GEMV_W == 3
      const unsigned qw[4] = {q.x, q.y, q.z, q.w};
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 xv = load_x4(xs, k + 4 * j);
        float qf[4];
        int8x4_to_f32(qw[j], qf);
        part += qf[0] * xv.x + qf[1] * xv.y + qf[2] * xv.z + qf[3] * xv.w;
      }
      acc += part * sr[k / 32];
#elif GEMV_W == 4
      const float4 xv = load_x4(xs, k);
      acc += __uint_as_float(q.x) * xv.x + __uint_as_float(q.y) * xv.y + __uint_as_float(q.z) * xv.z +
             __uint_as_float(q.w) * xv.w;
#else
      const u16* h = reinterpret_cast<const u16*>(&q);
      const float4 x0 = load_x4(xs, k);
      const float4 x1 = load_x4(xs, k + 4);
      const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) acc += load_as_f32<GEMV_W>(h, j) * xv[j];
#endif
    }
  }
  return warp_sum(acc);
}

// y[N] = W x. scale: the q8 scales (unused for f16 / bf16). Each body prefetches its rows, then
// waits for the kernels before (memra_grid_dependency, in every block), then reads x.
__device__ __forceinline__ void gemv_body(const void* __restrict__ w, const float* __restrict__ scale,
                                          const float* __restrict__ x, float* __restrict__ y, int n_rows) {
  const i64 row = (i64)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
  RowPrefetch pf;
  if (row < n_rows) row_prefetch(w, row, pf);
  memra_grid_dependency();
  GEMV_X_DECL
  const float* xv = stage_x(x, xs);
  if (row >= n_rows) return;
  const float v = row_dot(w, scale, row, xv, pf);
  if ((threadIdx.x & 31) == 0) y[row] = v;
}

// The FFN's fused gate/up product: y[n] = silu(Wg x)[n] * (Wu x)[n] (GEMV_GELU: gelu, GeGLU), both
// rows read by one warp.
#ifndef GEMV_GELU
#define GEMV_GELU 0
#endif
__device__ __forceinline__ void gemv_swiglu_body(const void* __restrict__ wg, const float* __restrict__ sg,
                                                 const void* __restrict__ wu, const float* __restrict__ su,
                                                 const float* __restrict__ x, float* __restrict__ y, int n_rows) {
  const i64 row = (i64)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
  RowPrefetch pg, pu;
  if (row < n_rows) {
    row_prefetch(wg, row, pg);
    row_prefetch(wu, row, pu);
  }
  memra_grid_dependency();
  GEMV_X_DECL
  const float* xv = stage_x(x, xs);
  if (row >= n_rows) return;
  const float g = row_dot(wg, sg, row, xv, pg);
  const float u = row_dot(wu, su, row, xv, pu);
  if ((threadIdx.x & 31) == 0) y[row] = glu_(GEMV_GELU ? geluf_(g) : siluf_(g), u);
}

// A matmul_group's products (up to 4 weights of one storage sharing x) in one launch: global row
// g runs against the weight whose row range holds it. Small projections (the delta-net beta /
// alpha, 32 rows) then cost no launch of their own.
__device__ __forceinline__ void gemv_group_body(const void* __restrict__ w0, const float* __restrict__ s0,
                                                float* __restrict__ y0, const void* __restrict__ w1,
                                                const float* __restrict__ s1, float* __restrict__ y1,
                                                const void* __restrict__ w2, const float* __restrict__ s2,
                                                float* __restrict__ y2, const void* __restrict__ w3,
                                                const float* __restrict__ s3, float* __restrict__ y3,
                                                const float* __restrict__ x, int n0, int n1, int n2, int n3) {
  i64 row = (i64)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
  const void* w = nullptr;
  const float* s = nullptr;
  float* y = nullptr;
  if (row < n0) {
    w = w0, s = s0, y = y0;
  } else if ((row -= n0) < n1) {
    w = w1, s = s1, y = y1;
  } else if ((row -= n1) < n2) {
    w = w2, s = s2, y = y2;
  } else if ((row -= n2) < n3) {
    w = w3, s = s3, y = y3;
  }
  RowPrefetch pf;
  if (w != nullptr) row_prefetch(w, row, pf);
  memra_grid_dependency();
  GEMV_X_DECL
  const float* xv = stage_x(x, xs);
  if (w == nullptr) return;
  const float v = row_dot(w, s, row, xv, pf);
  if ((threadIdx.x & 31) == 0) y[row] = v;
}

// Entry points: one parameter struct each (GemvParams.h), unpacked into the bodies above (their
// __restrict__ parameters survive inlining). The bodies call memra_grid_dependency() once their
// weights are in flight.
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv(const GemvParams p) {
  gemv_body(p.w.w, p.w.scale, p.x, p.y, p.n_rows);
}
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_swiglu(const GemvSwigluParams p) {
  gemv_swiglu_body(p.gate.w, p.gate.scale, p.up.w, p.up.scale, p.x, p.y, p.n_rows);
}
extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_group(const GemvGroupParams p) {
  gemv_group_body(p.w[0].w, p.w[0].scale, p.y[0], p.w[1].w, p.w[1].scale, p.y[1], p.w[2].w, p.w[2].scale, p.y[2],
                  p.w[3].w, p.w[3].scale, p.y[3], p.x, p.n_rows[0], p.n_rows[1], p.n_rows[2], p.n_rows[3]);
}

// fused_rows (ir/RowProgram.h): a row program compiled into the kernel. The host (FusedRows.cc)
// writes the program as defines, so each instruction is a template instance with constant
// operands and every value of a row lives in registers:
//
//   FR_COLS, FR_BLOCK       the row width and the block (one block per row, FR_PT values a thread)
//   FR_NIN, FR_ACT          the operand count; bit i set: operand i is rows (else a weight)
//   FR_SCALAR               bit i set: operand i is a weight [1] (mul_weight's scalar)
//   FR_I<k>, FR_C<k>        instruction k: opcode << 16 | a << 8 | b, with a / b 0 (none), 1 + i
//                           (operand i) or 64 + j (instruction j's result); its constant's f32 bits
//   FR_Y<k>                 yield k, coded as a / b
//   FR_POINTWISE            no rms_norm: a grid-stride loop over all elements (any width), one
//                           value a thread
//   FR_Q8Y, MEMRA_Q8X_OFF   yield FR_Q8Y also written as q8 for the decode products (its companion,
//                           kernels/cuda/Q8Companion.h), each 32-column group by the warp holding it
//
// Each instruction computes what the CPU's op kernel computes, in the same order; rms_norm sums
// squares in f32 per thread and then over the block (the CPU in double: agreement to f32
// rounding, as Norm.cu). Every operand of a row is read before the first store, so results may
// share memory with operands (in place). The row kernel reads its weights (the same columns for
// every row) before it waits for the previous kernel: with programmatic dependent launch their
// latency hides behind it, and the row's only dependent loads are its activations.
#include "Common.cuh"
#include "FusedRowsParams.h"

#define FR_RMS_NORM 0
#define FR_ADD 1
#define FR_MUL 2
#define FR_MUL_WEIGHT 3
#define FR_SCALE 4
#define FR_TANH 5

#ifndef FR_SCALAR
#define FR_SCALAR 0
#endif
#ifdef FR_POINTWISE
#define FR_PT 1
#else
#define FR_PT ((FR_COLS + FR_BLOCK - 1) / FR_BLOCK)
#endif
#define FR_NV (FR_NIN + 24)

// A coded reference's value slot: operands first, then the results.
__host__ __device__ constexpr int fr_slot(int code) { return code >= 64 ? FR_NIN + code - 64 : code - 1; }

// Instruction K. c0 + k * stride is value k's column; `valid` masks the columns past the row
// (they hold 0 and every instruction keeps them 0, so the norms' sums stay exact).
template <int K, int CODE, unsigned CBITS>
__device__ __forceinline__ void fr_step(float (&v)[FR_NV][FR_PT], const float (&wv)[FR_NIN][FR_PT], int c0,
                                        int stride) {
  constexpr int op = CODE >> 16;
  constexpr int a = fr_slot((CODE >> 8) & 255);
  constexpr int rb = CODE & 255;
  constexpr int b = rb == 0 ? 0 : fr_slot(rb);  // 0 when absent (never read then)
  constexpr int d = FR_NIN + K;
  const float cst = __uint_as_float(CBITS);
  if constexpr (op == FR_RMS_NORM) {
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < FR_PT; ++k) ss += v[a][k] * v[a][k];
    ss = block_sum(ss);
    const float s = 1.0f / sqrtf(ss / (float)FR_COLS + cst);
#pragma unroll
    for (int k = 0; k < FR_PT; ++k) {
      const int c = c0 + k * stride;
      const bool valid = c < FR_COLS;
      float w = valid ? 1.0f : 0.0f;
      if constexpr (rb != 0) w = wv[b][k];
      v[d][k] = (v[a][k] * s) * w;
    }
  } else {
#pragma unroll
    for (int k = 0; k < FR_PT; ++k) {
      if constexpr (op == FR_ADD) {
        v[d][k] = v[a][k] + v[b][k];
      } else if constexpr (op == FR_MUL) {
        v[d][k] = v[a][k] * v[b][k];
      } else if constexpr (op == FR_MUL_WEIGHT) {
        v[d][k] = v[a][k] * wv[b][k];
      } else if constexpr (op == FR_SCALE) {
        v[d][k] = v[a][k] * cst;
      } else {
        v[d][k] = tanhf(v[a][k]);
      }
    }
  }
}

#define FR_RUN_STEP(K) fr_step<K, FR_I##K, FR_C##K>(v, wv, c0, stride)

// The weights' values at this thread's columns (0 past the row; a [1] weight's one value in each).
__device__ __forceinline__ void fr_load_weights(float (&wv)[FR_NIN][FR_PT], const FusedRowsParams& p, int c0,
                                                int stride) {
#pragma unroll
  for (int i = 0; i < FR_NIN; ++i) {
    if (!((FR_ACT >> i) & 1)) {
#pragma unroll
      for (int k = 0; k < FR_PT; ++k) {
        const int c = c0 + k * stride;
        wv[i][k] = ((FR_SCALAR >> i) & 1) ? p.x[i][0] : c < FR_COLS ? p.x[i][c] : 0.0f;
      }
    }
  }
}

// The program over one row's values (loaded into v by the caller).
__device__ __forceinline__ void fr_program(float (&v)[FR_NV][FR_PT], const float (&wv)[FR_NIN][FR_PT], int c0,
                                           int stride) {
#ifdef FR_I0
  FR_RUN_STEP(0);
#endif
#ifdef FR_I1
  FR_RUN_STEP(1);
#endif
#ifdef FR_I2
  FR_RUN_STEP(2);
#endif
#ifdef FR_I3
  FR_RUN_STEP(3);
#endif
#ifdef FR_I4
  FR_RUN_STEP(4);
#endif
#ifdef FR_I5
  FR_RUN_STEP(5);
#endif
#ifdef FR_I6
  FR_RUN_STEP(6);
#endif
#ifdef FR_I7
  FR_RUN_STEP(7);
#endif
#ifdef FR_I8
  FR_RUN_STEP(8);
#endif
#ifdef FR_I9
  FR_RUN_STEP(9);
#endif
#ifdef FR_I10
  FR_RUN_STEP(10);
#endif
#ifdef FR_I11
  FR_RUN_STEP(11);
#endif
#ifdef FR_I12
  FR_RUN_STEP(12);
#endif
#ifdef FR_I13
  FR_RUN_STEP(13);
#endif
#ifdef FR_I14
  FR_RUN_STEP(14);
#endif
#ifdef FR_I15
  FR_RUN_STEP(15);
#endif
#ifdef FR_I16
  FR_RUN_STEP(16);
#endif
#ifdef FR_I17
  FR_RUN_STEP(17);
#endif
#ifdef FR_I18
  FR_RUN_STEP(18);
#endif
#ifdef FR_I19
  FR_RUN_STEP(19);
#endif
#ifdef FR_I20
  FR_RUN_STEP(20);
#endif
#ifdef FR_I21
  FR_RUN_STEP(21);
#endif
#ifdef FR_I22
  FR_RUN_STEP(22);
#endif
#ifdef FR_I23
  FR_RUN_STEP(23);
#endif
}

// Yield K's values to p.y[K] at `base` + column.
template <int K, int CODE>
__device__ __forceinline__ void fr_store(const float (&v)[FR_NV][FR_PT], const FusedRowsParams& p, i64 base, int c0,
                                         int stride) {
#pragma unroll
  for (int k = 0; k < FR_PT; ++k) {
    const int c = c0 + k * stride;
    if (c < FR_COLS) p.y[K][base + c] = v[fr_slot(CODE)][k];
  }
}
#define FR_RUN_STORE(K) fr_store<K, FR_Y##K>(v, p, base, c0, stride)

__device__ __forceinline__ void fr_stores(const float (&v)[FR_NV][FR_PT], const FusedRowsParams& p, i64 base, int c0,
                                          int stride) {
#ifdef FR_Y0
  FR_RUN_STORE(0);
#endif
#ifdef FR_Y1
  FR_RUN_STORE(1);
#endif
#ifdef FR_Y2
  FR_RUN_STORE(2);
#endif
#ifdef FR_Y3
  FR_RUN_STORE(3);
#endif
#ifdef FR_Y4
  FR_RUN_STORE(4);
#endif
#ifdef FR_Y5
  FR_RUN_STORE(5);
#endif
#ifdef FR_Y6
  FR_RUN_STORE(6);
#endif
#ifdef FR_Y7
  FR_RUN_STORE(7);
#endif
}

#ifdef MEMRA_Q8X_OFF
#define FR_CAT2(a, b) a##b
#define FR_CAT(a, b) FR_CAT2(a, b)
// Yield FR_Q8Y's companion for row r (every lane of the block: a warp's columns at step k are
// one 32-column group, or all past the row, since FR_COLS and FR_BLOCK are multiples of 32).
__device__ __forceinline__ void fr_store_q8x(const float (&v)[FR_NV][FR_PT], const FusedRowsParams& p, i64 r, int c0,
                                             int stride) {
#pragma unroll
  for (int k = 0; k < FR_PT; ++k) {
    const int c = c0 + k * stride;
    if (c < FR_COLS) q8x_store(p.y[FR_Q8Y], r * FR_COLS + c, v[fr_slot(FR_CAT(FR_Y, FR_Q8Y))][k]);
  }
}
#endif

__device__ __forceinline__ void fr_load(float (&v)[FR_NV][FR_PT], const FusedRowsParams& p, i64 base, int c0,
                                        int stride) {
#pragma unroll
  for (int i = 0; i < FR_NIN; ++i) {
    if ((FR_ACT >> i) & 1) {
#pragma unroll
      for (int k = 0; k < FR_PT; ++k) {
        const int c = c0 + k * stride;
        v[i][k] = c < FR_COLS ? p.x[i][base + c] : 0.0f;
      }
    }
  }
}

#ifndef FR_POINTWISE
// One block per row (grid-stride over rows).
extern "C" __global__ void __launch_bounds__(FR_BLOCK) fused_rows(FusedRowsParams p) {
  float wv[FR_NIN][FR_PT];
  fr_load_weights(wv, p, threadIdx.x, FR_BLOCK);  // weights: before the wait
  memra_grid_dependency();
  for (i64 r = blockIdx.x; r < p.n_rows; r += gridDim.x) {
    float v[FR_NV][FR_PT];
    const i64 base = r * FR_COLS;
    fr_load(v, p, base, threadIdx.x, FR_BLOCK);
    fr_program(v, wv, threadIdx.x, FR_BLOCK);
    fr_stores(v, p, base, threadIdx.x, FR_BLOCK);
#ifdef MEMRA_Q8X_OFF
    fr_store_q8x(v, p, r, threadIdx.x, FR_BLOCK);
#endif
  }
}
#else
// No reductions: every element on its own (grid-stride over n_rows * FR_COLS).
extern "C" __global__ void fused_rows_pointwise(FusedRowsParams p) {
  memra_grid_dependency();
  const i64 n = p.n_rows * FR_COLS;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    float v[FR_NV][FR_PT];
    const i64 base = i - i % FR_COLS;
    const int c0 = (int)(i % FR_COLS);
    float wv[FR_NIN][FR_PT];
    fr_load_weights(wv, p, c0, 0);
    fr_load(v, p, base, c0, 0);
    fr_program(v, wv, c0, 0);
    fr_stores(v, p, base, c0, 0);
#ifdef MEMRA_Q8X_OFF
    // A warp's 32 elements are one group of one row (n and the grid's stride multiples of 32).
    fr_store_q8x(v, p, i / FR_COLS, c0, 0);
#endif
  }
}
#endif

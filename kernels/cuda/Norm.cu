// Row normalizations: one block per row of NORM_COLS elements (the per-head norms are the same
// kernels over [rows * heads, head_dim]). With MEMRA_Q8X_OFF (kernels/cuda/Q8Companion.h) the
// normalized rows also go out as q8 for the decode products, each warp quantizing the 32-column
// groups it stores. Sums of squares accumulate in f32 per thread, then a
// tree reduction (the CPU reference sums in double: agreement is to f32 rounding).
#include "Common.cuh"
#include "NormParams.h"

#ifndef NORM_COLS
#define NORM_COLS 256
#endif
#ifndef NORM_BLOCK
#define NORM_BLOCK 256
#endif
// The normalizations' row mapping. NORM_WARP_ROWS: one warp per row, NORM_BLOCK / 32 rows a block
// (short rows: a per-head norm of 128 or 256 columns as one block per row spent its time in block
// barriers and launch granularity, 27 % of the bandwidth); else one block per row.
#ifdef NORM_WARP_ROWS
#define ROW_T ((int)threadIdx.x & 31)
#define ROW_N 32
#define ROW_FIRST ((i64)blockIdx.x * (NORM_BLOCK / 32) + (threadIdx.x >> 5))
#define ROW_STEP ((i64)gridDim.x * (NORM_BLOCK / 32))
#define row_sum warp_sum
#else
#define ROW_T ((int)threadIdx.x)
#define ROW_N NORM_BLOCK
#define ROW_FIRST ((i64)blockIdx.x)
#define ROW_STEP ((i64)gridDim.x)
#define row_sum block_sum
#endif
#define PER_THREAD ((NORM_COLS + ROW_N - 1) / ROW_N)

// Every body reads all it needs of a row into registers (x, the second input, the weights)
// before its first store: with plain pointers the compiler must assume a store may alias a later
// load and would otherwise issue the loads one by one (a 4096-wide add_rms_norm took 16 us on one
// block, the latency of 32 dependent loads; loads first, it takes ~2).
__device__ __forceinline__ float load_row(const float* xr, float* v) {
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) {
    const int c = ROW_T + k * ROW_N;
    v[k] = c < NORM_COLS ? xr[c] : 0.0f;
    ss += v[k] * v[k];
  }
  return ss;
}

__device__ __forceinline__ void load_weights(const float* w, float* wv) {
#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) {
    const int c = ROW_T + k * ROW_N;
    wv[k] = c < NORM_COLS ? (w ? w[c] : 1.0f) : 0.0f;  // no weight (rms_norm without w): 1, exact
  }
}

// y = x / sqrt(mean(x^2) + eps) * w
__device__ __forceinline__ void rms_norm_body(const float* x, const float* w, float* y, i64 n_rows, float eps) {
  float wv[PER_THREAD];
  load_weights(w, wv);
  for (i64 r = ROW_FIRST; r < n_rows; r += ROW_STEP) {
    float v[PER_THREAD];
    const float ss = row_sum(load_row(x + r * NORM_COLS, v));
    const float s = 1.0f / sqrtf(ss / (float)NORM_COLS + eps);
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
      const int c = ROW_T + k * ROW_N;
      const float out = (v[k] * s) * wv[k];
      if (c < NORM_COLS) y[r * NORM_COLS + c] = out;
#ifdef MEMRA_Q8X_OFF
      if (c < NORM_COLS) q8x_store(y, r * NORM_COLS + c, out);  // warp-uniform: NORM_COLS % 32 == 0
#endif
    }
  }
}

// y = x / max(||x||, eps)
__device__ __forceinline__ void l2_norm_body(const float* x, float* y, i64 n_rows, float eps) {
  for (i64 r = ROW_FIRST; r < n_rows; r += ROW_STEP) {
    float v[PER_THREAD];
    const float ss = row_sum(load_row(x + r * NORM_COLS, v));
    const float s = 1.0f / fmaxf(sqrtf(ss), eps);
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
      const int c = ROW_T + k * ROW_N;
      if (c < NORM_COLS) y[r * NORM_COLS + c] = v[k] * s;
    }
  }
}

// y = rms_norm(x) * w * silu(z)
__device__ __forceinline__ void gated_rms_norm_body(const float* x, const float* z, const float* w, float* y,
                                                    i64 n_rows, float eps) {
  float wv[PER_THREAD];
  load_weights(w, wv);
  for (i64 r = ROW_FIRST; r < n_rows; r += ROW_STEP) {
    float v[PER_THREAD], zv[PER_THREAD];
    const float ss_local = load_row(x + r * NORM_COLS, v);
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
      const int c = ROW_T + k * ROW_N;
      zv[k] = c < NORM_COLS ? z[r * NORM_COLS + c] : 0.0f;
    }
    const float ss = row_sum(ss_local);
    const float s = 1.0f / sqrtf(ss / (float)NORM_COLS + eps);
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
      const int c = ROW_T + k * ROW_N;
      const float out = ((v[k] * s) * wv[k]) * siluf_(zv[k]);
      if (c < NORM_COLS) y[r * NORM_COLS + c] = out;
#ifdef MEMRA_Q8X_OFF
      if (c < NORM_COLS) q8x_store(y, r * NORM_COLS + c, out);
#endif
    }
  }
}

// sum = a + b; y = rms_norm(sum) * w
__device__ __forceinline__ void add_rms_norm_body(const float* a, const float* b, const float* w, float* sum, float* y,
                                                  i64 n_rows, float eps) {
  float wv[PER_THREAD];
  load_weights(w, wv);
  for (i64 r = ROW_FIRST; r < n_rows; r += ROW_STEP) {
    float v[PER_THREAD];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
      const int c = ROW_T + k * ROW_N;
      v[k] = c < NORM_COLS ? a[r * NORM_COLS + c] + b[r * NORM_COLS + c] : 0.0f;
      ss += v[k] * v[k];
    }
    ss = row_sum(ss);
    const float s = 1.0f / sqrtf(ss / (float)NORM_COLS + eps);
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
      const int c = ROW_T + k * ROW_N;
      if (c < NORM_COLS) {
        sum[r * NORM_COLS + c] = v[k];
        y[r * NORM_COLS + c] = (v[k] * s) * wv[k];
      }
#ifdef MEMRA_Q8X_OFF
      if (c < NORM_COLS) q8x_store(y, r * NORM_COLS + c, (v[k] * s) * wv[k]);
#endif
    }
  }
}

// Row softmax (max-subtracted, f32).
__device__ __forceinline__ void softmax_body(const float* x, float* y, i64 n_rows) {
  __shared__ float red[32];
  for (i64 r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const float* xr = x + r * NORM_COLS;
    float mx = MEMRA_NEG_INF;
    for (int c = threadIdx.x; c < NORM_COLS; c += NORM_BLOCK) mx = fmaxf(mx, xr[c]);
    mx = warp_max(mx);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
    __syncthreads();
    mx = MEMRA_NEG_INF;
    for (int k = 0; k < NORM_BLOCK / 32; ++k) mx = fmaxf(mx, red[k]);
    float s = 0.0f;
    for (int c = threadIdx.x; c < NORM_COLS; c += NORM_BLOCK) s += expf(xr[c] - mx);
    s = block_sum(s);
    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < NORM_COLS; c += NORM_BLOCK) y[r * NORM_COLS + c] = expf(xr[c] - mx) * inv;
  }
}

// No non-finite value in a row (row_argmax's *bad).
#define NORM_ALL_FINITE 0x7fffffff

// Index of the maximum of one row of NORM_COLS (ties: lowest index; NaN never wins unless all
// are NaN -> 0), the same rule as the host sampler's greedy pick. Also the lowest index whose
// value is NaN or +-inf in *bad (NORM_ALL_FINITE when there is none): every value is checked, as
// the host path checks every logit, because a NaN never wins the max and a check of the maximum
// alone would pass a row with NaNs in it. The cost is an exponent test of each value already in a
// register and one more min in the block reduction. Every thread of the block calls it; the
// results are valid in every thread.
// The block's (best, idx, first_bad) triples reduced into thread 0's shared slot (the tie rule
// above: a larger value, or the same value at a lower index; idx < 0 means "none yet").
__device__ void block_argmax(float best, int idx, int first_bad, float* out_v, int* out_i, int* out_bad) {
  __shared__ float bv[NORM_BLOCK];
  __shared__ int bi[NORM_BLOCK];
  __shared__ int bb[NORM_BLOCK];
  __syncthreads();
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = idx;
  bb[threadIdx.x] = first_bad;
  __syncthreads();
  for (int s = NORM_BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = bv[threadIdx.x + s];
      const int oi = bi[threadIdx.x + s];
      const float mv = bv[threadIdx.x];
      const int mi = bi[threadIdx.x];
      if (oi >= 0 && (mi < 0 || ov > mv || (ov == mv && oi < mi))) {
        bv[threadIdx.x] = ov;
        bi[threadIdx.x] = oi;
      }
      bb[threadIdx.x] = min(bb[threadIdx.x], bb[threadIdx.x + s]);
    }
    __syncthreads();
  }
  *out_v = bv[0];
  *out_i = bi[0];
  *out_bad = bb[0];
  __syncthreads();  // the shared arrays are reused by the next call
}

// Columns [lo, hi) of one row: this block's best value, its index (-1 when every value is NaN)
// and the lowest non-finite column (valid in every thread).
__device__ void range_argmax(const float* xr, int lo, int hi, float* out_v, int* out_i, int* out_bad) {
  float best = MEMRA_NEG_INF;
  int idx = -1;
  int first_bad = NORM_ALL_FINITE;
  for (int c = lo + threadIdx.x; c < hi; c += NORM_BLOCK) {
    const float v = xr[c];
    // All exponent bits set: inf or NaN. A thread's columns rise, so its first is its lowest.
    if ((__float_as_uint(v) & 0x7f800000u) == 0x7f800000u && first_bad == NORM_ALL_FINITE) first_bad = c;
    if (v > best || (idx < 0 && v == best)) {  // v == -inf keeps the first -inf index
      best = v;
      idx = c;
    }
  }
  block_argmax(best, idx, first_bad, out_v, out_i, out_bad);
}

__device__ int row_argmax(const float* xr, int* bad) {
  float v;
  int i;
  range_argmax(xr, 0, NORM_COLS, &v, &i, bad);
  return i < 0 ? 0 : i;
}

__device__ __forceinline__ void argmax_body(const float* x, int* y, i64 n_rows) {
  for (i64 r = blockIdx.x; r < n_rows; r += gridDim.x) {
    int bad;
    const int id = row_argmax(x + r * NORM_COLS, &bad);
#ifdef NORM_ARGMAX_NONFINITE
    if (threadIdx.x == 0) y[r] = bad != NORM_ALL_FINITE ? NORM_ARGMAX_NONFINITE : id;
#else
    if (threadIdx.x == 0) y[r] = id;
#endif
  }
}

// The device-side greedy step that closes the decode loop (one block): the next token is the
// argmax of the logits row; it becomes the decode function's input token for the next step and
// is appended to the token ring (ring[*ring_pos % ring_cap], then ++*ring_pos), which the host
// reads once per chunk of steps. The first step of a chunk whose logits are not all finite is
// recorded in bad[0] = its ring_pos + 1 (0: none so far), with the first such vocabulary id in
// bad[1] and its value's bits in bad[2]; the host resets bad[0] with ring_pos and turns it into
// an error after the chunk. Nothing here depends on host values that change per step, so a
// captured decode step replays unchanged.
// The row is split over gridDim.x blocks (248,320 logits in one block took 46 us): block b takes
// an equal range, writes its triple to part[3 b ..], and the last block to finish (a ticket taken
// after a fence) merges the triples in block order (the ranges ascend, so the tie rule holds
// globally), writes the pick and resets the ticket for the next replay.
__device__ __forceinline__ void greedy_next_body(const float* logits, int* token, int* ring, int* ring_pos, int* bad,
                                                 int* part, unsigned* ticket, int ring_cap) {
  const int chunk = (NORM_COLS + (int)gridDim.x - 1) / (int)gridDim.x;
  const int lo = min((int)blockIdx.x * chunk, NORM_COLS), hi = min(lo + chunk, NORM_COLS);
  float v;
  int i, b;
  range_argmax(logits, lo, hi, &v, &i, &b);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    part[3 * blockIdx.x] = __float_as_int(v);
    part[3 * blockIdx.x + 1] = i;
    part[3 * blockIdx.x + 2] = b;
    __threadfence();
    last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  float pv = MEMRA_NEG_INF;
  int pi = -1, pb = NORM_ALL_FINITE;
  if (threadIdx.x < gridDim.x) {
    pv = __int_as_float(__ldcg(part + 3 * threadIdx.x));
    pi = __ldcg(part + 3 * threadIdx.x + 1);
    pb = __ldcg(part + 3 * threadIdx.x + 2);
  }
  block_argmax(pv, pi, pb, &v, &i, &b);
  if (threadIdx.x == 0) {
    const int id = i < 0 ? 0 : i;
    token[0] = id;
    const int k = ring_pos[0];
    ring[k % ring_cap] = id;
    ring_pos[0] = k + 1;
    if (b != NORM_ALL_FINITE && bad[0] == 0) {
      bad[0] = k + 1;
      bad[1] = b;
      bad[2] = __float_as_int(logits[b]);
    }
    *ticket = 0u;
  }
}

// Entry points: one parameter struct each (NormParams.h), unpacked into the bodies above.
extern "C" __global__ void __launch_bounds__(NORM_BLOCK) rms_norm(const NormParams p) {
  memra_grid_dependency();
  rms_norm_body(p.x, p.w, p.y, p.n_rows, p.eps);
}
extern "C" __global__ void __launch_bounds__(NORM_BLOCK) l2_norm(const NormParams p) {
  memra_grid_dependency();
  l2_norm_body(p.x, p.y, p.n_rows, p.eps);
}
extern "C" __global__ void __launch_bounds__(NORM_BLOCK) gated_rms_norm(const NormParams p) {
  memra_grid_dependency();
  gated_rms_norm_body(p.x, p.z, p.w, p.y, p.n_rows, p.eps);
}
extern "C" __global__ void __launch_bounds__(NORM_BLOCK) add_rms_norm(const NormParams p) {
  memra_grid_dependency();
  add_rms_norm_body(p.x, p.z, p.w, p.sum, p.y, p.n_rows, p.eps);
}
extern "C" __global__ void __launch_bounds__(NORM_BLOCK) softmax(const RowParams p) {
  memra_grid_dependency();
  softmax_body(p.x, static_cast<float*>(p.y), p.n_rows);
}
extern "C" __global__ void __launch_bounds__(NORM_BLOCK) argmax(const RowParams p) {
  memra_grid_dependency();
  argmax_body(p.x, static_cast<int*>(p.y), p.n_rows);
}
extern "C" __global__ void __launch_bounds__(NORM_BLOCK) greedy_next(const GreedyNextParams p) {
  memra_grid_dependency();
  greedy_next_body(p.logits, p.token, p.ring, p.ring_pos, p.bad, p.part, p.ticket, p.ring_cap);
}

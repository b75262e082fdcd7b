// NeoX rotary embedding on the first ROPE_NROT dims of each head (partial rope). x, y:
// [n_tok, ROPE_HEADS, ROPE_DIM]; pos: i32[n_tok]. theta_i is formed as ggml / the CPU reference
// do: theta_0 = p, theta_{i+1} = theta_i * s with s = base^(-2/n_rot) in f32; with freq_factors
// (ggml_rope_ext's) pair i turns by theta_i / freq_factors[i].
#include "Common.cuh"
#include "RopeParams.h"

__device__ __forceinline__ void rope_neox_body(const float* x, float* y, const int* pos, const float* ff, int n_tok,
                                               float theta_scale) {
  const int half = ROPE_NROT / 2;
  const i64 n = (i64)n_tok * ROPE_HEADS * ROPE_DIM;
  MEMRA_GRID_STRIDE(idx, n) {
    const int d = (int)(idx % ROPE_DIM);
    const i64 th = idx / ROPE_DIM;
    const i64 t = th / ROPE_HEADS;
    const float* xr = x + th * ROPE_DIM;
    if (d >= ROPE_NROT) {
      y[idx] = xr[d];
      continue;
    }
    const int i = d < half ? d : d - half;
    float theta = (float)pos[t];
    for (int k = 0; k < i; ++k) theta *= theta_scale;
    if (ff != nullptr) theta = theta / ff[i];
    const float c = cosf(theta), s = sinf(theta);
    const float x0 = xr[i], x1 = xr[i + half];
    y[idx] = d < half ? x0 * c - x1 * s : x0 * s + x1 * c;
  }
}

extern "C" __global__ void rope_neox(const RopeParams p) {
  memra_grid_dependency();
  rope_neox_body(p.x, p.y, p.pos, p.freq_factors, p.n_tok, p.theta_scale);
}

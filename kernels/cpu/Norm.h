// Row normalizations. x and out are [rows][cols] f32; out may alias x. The sum of squares of a
// row is accumulated in double (as ggml does), the scaling is f32.
//
// Per-head normalization (attention q/k norm, the delta-net output norm) is the same call on
// the reshaped buffer: a [T][H*D] activation is [T*H][D] rows of one head each.
#pragma once

#include <cstdint>

#include "kernels/cpu/ThreadPool.h"

namespace memra::kernels::cpu {

// out[r][c] = x[r][c] * s_r * w[c] with s_r = 1 / sqrt(mean_c(x[r][c]²) + eps). w may be null
// (no weight). The weight is used as stored (GGUF norm weights already hold the "+1").
void RmsNorm(const float* x, const float* w, int64_t rows, int64_t cols, float eps, float* out,
             ThreadPool* pool = nullptr);

// out[r][c] = x[r][c] / max(||x[r]||₂, eps)   (ggml_l2_norm; qwen35 passes the rms eps).
void L2Norm(const float* x, int64_t rows, int64_t cols, float eps, float* out, ThreadPool* pool = nullptr);

// out[r][c] = RmsNorm(x)[r][c] * w[c] * silu(z[r][c])   (the delta-net gated norm; w is
// ssm_norm, used as stored). z is [rows][cols] like x.
void GatedRmsNorm(const float* x, const float* w, const float* z, int64_t rows, int64_t cols, float eps, float* out,
                  ThreadPool* pool = nullptr);

}  // namespace memra::kernels::cpu

// Elementwise and row-copy kernels over contiguous f32 buffers. Every function allows out to
// alias an input exactly (in-place), never a partial overlap. f32 math, as ggml computes it.
#pragma once

#include "ir/OpKind.h"

#include <cstdint>

namespace memra::kernels::cpu {

// out[i] = a[i] + b[i], i < n.
void Add(const float* a, const float* b, int64_t n, float* out);
// out[i] = a[i] * b[i], i < n.
void Mul(const float* a, const float* b, int64_t n, float* out);
// out[r][c] = x[r][c] * w[c] for rows x cols (a row vector broadcast over rows).
void MulRows(const float* x, const float* w, int64_t rows, int64_t cols, float* out);
// out[i] = 1 / (1 + exp(-x[i])).
void Sigmoid(const float* x, int64_t n, float* out);
// out[i] = x[i] / (1 + exp(-x[i]))  (SiLU).
void Silu(const float* x, int64_t n, float* out);
// out[i] = log(1 + exp(x[i])), and x[i] itself above 20 (ggml's softplus).
void Softplus(const float* x, int64_t n, float* out);
// exp(x) (std::exp).
void Exp(const float* x, int64_t n, float* out);
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))) in f32 (ggml's formula).
void Gelu(const float* x, int64_t n, float* out);
// tanh(x) (std::tanh).
void Tanh(const float* x, int64_t n, float* out);

// The kernel of a unary elementwise op (ir/Ops.def flag kUnary), nullptr for other kinds: the
// CPU executor runs every kUnary op through this table.
using UnaryKernelFn = void (*)(const float* x, int64_t n, float* out);
UnaryKernelFn UnaryKernelFor(ir::OpKind kind);
// out[i] = silu(gate[i]) * up[i]  (SwiGLU with separate gate and up halves). clamp > 0: the
// clamped SwiGLU, min(silu(gate[i]), clamp) * min(max(up[i], -clamp), clamp) (Step 3.5).
void Swiglu(const float* gate, const float* up, int64_t n, float* out, float clamp = 0.0f);
// The clamped SwiGLU's product for one element (clamp <= 0: act * up).
inline float GluProduct(float act, float up, float clamp) {
  if (clamp <= 0.0f) return act * up;
  const float a = act < clamp ? act : clamp;
  const float u = up < clamp ? up : clamp;
  return a * (u > -clamp ? u : -clamp);
}
// out[r][n] = x[r][n] * s[r]: one factor per row of `width` (the mul_rows op).
void ScaleRows(const float* x, const float* s, int64_t rows, int64_t width, float* out);

// Scalar forms of the functions above (same formulas).
float SigmoidScalar(float x);
float SiluScalar(float x);
float GeluScalar(float x);
float SoftplusScalar(float x);

// out[r][0..width) = x[r][col0 .. col0+width) for a [rows][cols] matrix (a column slice, e.g.
// the q / k / v parts of a fused projection). out is [rows][width] and must not overlap x.
void CopyColumns(const float* x, int64_t rows, int64_t cols, int64_t col0, int64_t width, float* out);
// out[0..cols) = x[rows-1][0..cols)  (the last token's row; rows >= 1).
void TakeLastRow(const float* x, int64_t rows, int64_t cols, float* out);

}  // namespace memra::kernels::cpu

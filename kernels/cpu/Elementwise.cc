#include "kernels/cpu/Elementwise.h"

#include <cmath>
#include <cstring>

namespace memra::kernels::cpu {

float SigmoidScalar(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float SiluScalar(float x) { return x / (1.0f + std::exp(-x)); }
float SoftplusScalar(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void Add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Mul(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void MulRows(const float* x, const float* w, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = x[r * cols + c] * w[c];
}

void Sigmoid(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = SigmoidScalar(x[i]);
}

void Silu(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = SiluScalar(x[i]);
}

void Softplus(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = SoftplusScalar(x[i]);
}

void Exp(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp(x[i]);
}

UnaryKernelFn UnaryKernelFor(ir::OpKind kind) {
  switch (kind) {
    case ir::OpKind::kSigmoid:
      return Sigmoid;
    case ir::OpKind::kSilu:
      return Silu;
    case ir::OpKind::kSoftplus:
      return Softplus;
    case ir::OpKind::kExp:
      return Exp;
    default:
      return nullptr;
  }
}

void Swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = SiluScalar(gate[i]) * up[i];
}

void CopyColumns(const float* x, int64_t rows, int64_t cols, int64_t col0, int64_t width, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out + r * width, x + r * cols + col0, static_cast<size_t>(width) * sizeof(float));
}

void TakeLastRow(const float* x, int64_t rows, int64_t cols, float* out) {
  std::memmove(out, x + (rows - 1) * cols, static_cast<size_t>(cols) * sizeof(float));
}

}  // namespace memra::kernels::cpu

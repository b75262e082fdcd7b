#include "kernels/cpu/Elementwise.h"

#include <cmath>
#include <cstring>

namespace memra::kernels::cpu {

float SigmoidScalar(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float SiluScalar(float x) { return x / (1.0f + std::exp(-x)); }
float SoftplusScalar(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
float GeluScalar(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f, kCoefA = 0.044715f;  // ggml's constants
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

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

void Gelu(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = GeluScalar(x[i]);
}

void Tanh(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::tanh(x[i]);
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
    case ir::OpKind::kGelu:
      return Gelu;
    case ir::OpKind::kTanh:
      return Tanh;
    default:
      return nullptr;
  }
}

void Swiglu(const float* gate, const float* up, int64_t n, float* out, float clamp) {
  if (clamp > 0.0f) {
    for (int64_t i = 0; i < n; ++i) out[i] = GluProduct(SiluScalar(gate[i]), up[i], clamp);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = SiluScalar(gate[i]) * up[i];
}

void ScaleRows(const float* x, const float* s, int64_t rows, int64_t width, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = 0; n < width; ++n) out[r * width + n] = x[r * width + n] * s[r];
}

void CopyColumns(const float* x, int64_t rows, int64_t cols, int64_t col0, int64_t width, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out + r * width, x + r * cols + col0, static_cast<size_t>(width) * sizeof(float));
}

void TakeLastRow(const float* x, int64_t rows, int64_t cols, float* out) {
  std::memmove(out, x + (rows - 1) * cols, static_cast<size_t>(cols) * sizeof(float));
}

}  // namespace memra::kernels::cpu

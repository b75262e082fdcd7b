#include "kernels/cpu/Norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/Elementwise.h"

namespace memra::kernels::cpu {
namespace {

double SumSquares(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

float RmsScale(const float* x, int64_t cols, float eps) {
  const float mean = static_cast<float>(SumSquares(x, cols) / static_cast<double>(cols));
  return 1.0f / std::sqrt(mean + eps);
}

int64_t RowGrain(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols)); }

}  // namespace

void RmsNorm(const float* x, const float* w, int64_t rows, int64_t cols, float eps, float* out, ThreadPool* pool) {
  ParallelFor(pool, 0, rows, RowGrain(cols), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * cols;
      float* yr = out + r * cols;
      const float s = RmsScale(xr, cols, eps);
      if (w != nullptr) {
        for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] * s) * w[c];
      } else {
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * s;
      }
    }
  });
}

void L2Norm(const float* x, int64_t rows, int64_t cols, float eps, float* out, ThreadPool* pool) {
  ParallelFor(pool, 0, rows, RowGrain(cols), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * cols;
      float* yr = out + r * cols;
      const float norm = std::sqrt(static_cast<float>(SumSquares(xr, cols)));
      const float s = 1.0f / std::max(norm, eps);
      for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * s;
    }
  });
}

void GatedRmsNorm(const float* x, const float* w, const float* z, int64_t rows, int64_t cols, float eps, float* out,
                  ThreadPool* pool) {
  ParallelFor(pool, 0, rows, RowGrain(cols), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * cols;
      const float* zr = z + r * cols;
      float* yr = out + r * cols;
      const float s = RmsScale(xr, cols, eps);
      for (int64_t c = 0; c < cols; ++c) yr[c] = ((xr[c] * s) * w[c]) * SiluScalar(zr[c]);
    }
  });
}

}  // namespace memra::kernels::cpu

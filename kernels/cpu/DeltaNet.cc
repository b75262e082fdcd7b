#include "kernels/cpu/DeltaNet.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/Elementwise.h"
#include "kernels/cpu/Matmul.h"

namespace memra::kernels::cpu {

void Conv1dCausal(const float* x, int64_t T, int64_t channels, const float* weight, int64_t d_conv, float* state,
                  float* out, bool apply_silu, ThreadPool* pool) {
  const int64_t n_state = d_conv - 1;
  ParallelFor(pool, 0, channels, 16, [&](int64_t lo, int64_t hi) {
    std::vector<float> ext(static_cast<size_t>(n_state + T));
    for (int64_t ch = lo; ch < hi; ++ch) {
      float* st = state + ch * n_state;
      for (int64_t i = 0; i < n_state; ++i) ext[i] = st[i];
      for (int64_t t = 0; t < T; ++t) ext[n_state + t] = x[t * channels + ch];
      const float* w = weight + ch * d_conv;
      for (int64_t t = 0; t < T; ++t) {
        float sum = 0.0f;
        for (int64_t i = 0; i < d_conv; ++i) sum += ext[t + i] * w[i];
        out[t * channels + ch] = apply_silu ? SiluScalar(sum) : sum;
      }
      for (int64_t i = 0; i < n_state; ++i) st[i] = ext[T + i];
    }
  });
}

void DeltaNetGates(const float* b, const float* alpha, int64_t T, int64_t n_v_heads, const float* dt_bias,
                   const float* ssm_a, float* beta, float* g) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n_v_heads; ++h) {
      const int64_t i = t * n_v_heads + h;
      beta[i] = SigmoidScalar(b[i]);
      g[i] = SoftplusScalar(alpha[i] + dt_bias[h]) * ssm_a[h];
    }
}

void GatedDeltaScan(const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t T,
                    int64_t n_k_heads, int64_t n_v_heads, int64_t d_k, int64_t d_v, float scale, float* state,
                    float* out, ThreadPool* pool) {
  const int64_t qk_width = n_k_heads * d_k, v_width = n_v_heads * d_v;
  ParallelFor(pool, 0, n_v_heads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t h = lo; h < hi; ++h) {
      const int64_t kh = h % n_k_heads;
      float* S = state + h * d_v * d_k;
      for (int64_t t = 0; t < T; ++t) {
        const float* qt = q + t * qk_width + kh * d_k;
        const float* kt = k + t * qk_width + kh * d_k;
        const float* vt = v + t * v_width + h * d_v;
        float* ot = out + t * v_width + h * d_v;
        const float decay = std::exp(g[t * n_v_heads + h]);
        const float b = beta[t * n_v_heads + h];
        for (int64_t j = 0; j < d_v; ++j) {
          float* row = S + j * d_k;  // S[:, j]
          for (int64_t i = 0; i < d_k; ++i) row[i] *= decay;
          const float d = (vt[j] - Dot(row, kt, d_k)) * b;
          for (int64_t i = 0; i < d_k; ++i) row[i] += kt[i] * d;
          ot[j] = Dot(row, qt, d_k) * scale;
        }
      }
    }
  });
}

}  // namespace memra::kernels::cpu

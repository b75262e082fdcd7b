#include "kernels/cpu/DeltaNetChunked.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace memra::kernels::cpu {

namespace {

float Dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void GatedDeltaScanChunked(const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t T,
                           int64_t n_k_heads, int64_t n_v_heads, int64_t d_k, int64_t d_v, float scale, float* state,
                           float* out, int64_t chunk, ThreadPool* pool) {
  const int64_t qk_width = n_k_heads * d_k, v_width = n_v_heads * d_v;
  const int64_t C = std::max<int64_t>(chunk, 1);
  ParallelFor(pool, 0, n_v_heads, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> gamma(C), kk(C * C), U(C * d_v), Sk(d_v), Sq(d_v), S0(d_k * d_v);
    for (int64_t h = lo; h < hi; ++h) {
      const int64_t kh = h % n_k_heads;
      float* S = state + h * d_v * d_k;  // S[i][j] at j * d_k + i
      auto K = [&](int64_t t) { return k + t * qk_width + kh * d_k; };
      auto Q = [&](int64_t t) { return q + t * qk_width + kh * d_k; };
      for (int64_t t0 = 0; t0 < T; t0 += C) {
        const int64_t n = std::min(C, T - t0);
        float acc = 0.0f;
        for (int64_t t = 0; t < n; ++t) gamma[t] = acc += g[(t0 + t) * n_v_heads + h];
        std::copy(S, S + d_k * d_v, S0.begin());
        // K K^T below the diagonal (the products the GPU takes on tensor cores).
        for (int64_t t = 0; t < n; ++t)
          for (int64_t s = 0; s < t; ++s) kk[t * C + s] = Dot(K(t0 + t), K(t0 + s), d_k);
        // U by forward substitution: u_t = B_t - sum_{s<t} A[t][s] u_s.
        for (int64_t t = 0; t < n; ++t) {
          const float b = beta[(t0 + t) * n_v_heads + h], decay = std::exp(gamma[t]);
          const float* vt = v + (t0 + t) * v_width + h * d_v;
          float* ut = U.data() + t * d_v;
          for (int64_t j = 0; j < d_v; ++j) ut[j] = b * (vt[j] - decay * Dot(S0.data() + j * d_k, K(t0 + t), d_k));
          for (int64_t s = 0; s < t; ++s) {
            const float a = b * std::exp(gamma[t] - gamma[s]) * kk[t * C + s];
            const float* us = U.data() + s * d_v;
            for (int64_t j = 0; j < d_v; ++j) ut[j] -= a * us[j];
          }
        }
        // Outputs: the state's part and the chunk's own part.
        for (int64_t t = 0; t < n; ++t) {
          const float decay = std::exp(gamma[t]);
          float* ot = out + (t0 + t) * v_width + h * d_v;
          for (int64_t j = 0; j < d_v; ++j) ot[j] = decay * Dot(S0.data() + j * d_k, Q(t0 + t), d_k);
          for (int64_t s = 0; s <= t; ++s) {
            const float w = std::exp(gamma[t] - gamma[s]) * Dot(Q(t0 + t), K(t0 + s), d_k);
            const float* us = U.data() + s * d_v;
            for (int64_t j = 0; j < d_v; ++j) ot[j] += w * us[j];
          }
          for (int64_t j = 0; j < d_v; ++j) ot[j] *= scale;
        }
        // The state at the chunk's end.
        const float end = std::exp(gamma[n - 1]);
        for (int64_t j = 0; j < d_v; ++j) {
          float* col = S + j * d_k;
          for (int64_t i = 0; i < d_k; ++i) col[i] = end * S0[j * d_k + i];
          for (int64_t s = 0; s < n; ++s) {
            const float w = std::exp(gamma[n - 1] - gamma[s]) * U[s * d_v + j];
            const float* ks = K(t0 + s);
            for (int64_t i = 0; i < d_k; ++i) col[i] += w * ks[i];
          }
        }
      }
    }
  });
}

}  // namespace memra::kernels::cpu

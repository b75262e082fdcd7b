// The reference GemvQuant.cu is checked against, shared by tests/cuda/GemvQuant_test (on the GPU)
// and tests/cuda/emulation (on the host): the activation rounding of the q8 paths and the score of
// one launch's outputs against f64 products of the dequantized weights.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace memra::kernels::cuda::gemv_quant_reference {

inline constexpr uint32_t kPoison = 0x7fc00000u;  // NaN: outputs are poisoned before the launch
inline constexpr int64_t kGuard = 64;             // poisoned floats past each output

// x rounded as gemv_q_quantize_x rounds it (int8 per 32, d = amax / 127).
inline std::vector<float> RoundLikeQ8(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.0f;
    for (size_t i = 0; i < 32; ++i) {
      const float q = amax > 0 ? std::nearbyint(x[b + i] / d) : 0.0f;
      r[b + i] = static_cast<float>(static_cast<double>(d) * q);
    }
  }
  return r;
}

struct Score {
  double nmse = 0;    // against the exact x
  double nmse_r = 0;  // against x rounded as the kernel rounds it (RoundLikeQ8 on the q8 paths)
  int unwritten = 0;  // outputs of the call's tokens left poisoned or non-finite
  int overwritten = 0;
};

// `y[o]`: output o's words as downloaded, [T * rows[o] + kGuard]; `deq[w]`: weight w dequantized,
// [rows, K]; tokens at or past `n_tok` must stay poisoned. swiglu: y = silu(W0 x) * (W1 x).
inline Score ScoreOutputs(bool swiglu, const std::vector<std::vector<float>>& deq, const std::vector<int64_t>& rows,
                          int64_t K, int64_t T, int64_t n_tok, const std::vector<float>& x,
                          const std::vector<float>& xr, const std::vector<std::vector<uint32_t>>& y) {
  auto product = [&](size_t w, int64_t t, int64_t n, const std::vector<float>& xv) {
    double s = 0;
    const float* row = deq[w].data() + n * K;
    for (int64_t k = 0; k < K; ++k) s += static_cast<double>(row[k]) * xv[t * K + k];
    return s;
  };
  auto silu = [](double g) { return g / (1.0 + std::exp(-g)); };
  double num = 0, den = 0, num_r = 0, den_r = 0;
  Score s;
  for (size_t o = 0; o < y.size(); ++o) {
    const int64_t N = rows[o];
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) {
        const uint32_t b = y[o][t * N + n];
        if (t >= n_tok) {
          s.overwritten += b != kPoison;
          continue;
        }
        float g;
        std::memcpy(&g, &b, 4);
        if (!std::isfinite(g)) {
          ++s.unwritten;
          continue;
        }
        double want, want_r;
        if (swiglu) {
          want = silu(product(0, t, n, x)) * product(1, t, n, x);
          want_r = silu(product(0, t, n, xr)) * product(1, t, n, xr);
        } else {
          want = product(o, t, n, x);
          want_r = product(o, t, n, xr);
        }
        num += (g - want) * (g - want), den += want * want;
        num_r += (g - want_r) * (g - want_r), den_r += want_r * want_r;
      }
    for (int64_t i = 0; i < kGuard; ++i) s.overwritten += y[o][T * N + i] != kPoison;
  }
  s.nmse = den > 0 ? num / den : num;
  s.nmse_r = den_r > 0 ? num_r / den_r : num_r;
  return s;
}

}  // namespace memra::kernels::cuda::gemv_quant_reference

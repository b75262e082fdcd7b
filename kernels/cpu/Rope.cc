#include "kernels/cpu/Rope.h"

#include <cmath>
#include <vector>

namespace memra::kernels::cpu {

void RopeNeox(float* x, int64_t T, int64_t n_head, int64_t head_dim, int64_t n_rot, float freq_base,
              const int32_t* positions, const float* freq_factors) {
  const int64_t half = n_rot / 2;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  for (int64_t t = 0; t < T; ++t) {
    float theta = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float th = freq_factors != nullptr ? theta / freq_factors[i] : theta;
      cs[i] = std::cos(th);
      sn[i] = std::sin(th);
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < n_head; ++h) {
      float* v = x + (t * n_head + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cs[i] - x1 * sn[i];
        v[i + half] = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

}  // namespace memra::kernels::cpu

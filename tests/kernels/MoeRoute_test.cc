// The CPU routers (kernels/cpu/Moe.h) against float64 references: Step 3.5's sigmoid router with
// its selection bias (the bias chooses, the unbiased probabilities weight), renormalization and
// scale, and its tie order.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/Moe.h"
#include "tests/TestUtil.h"

namespace memra::kernels::cpu {
namespace {

struct Route {
  std::vector<int32_t> ids;
  std::vector<double> weights;
};

// float64 reference of ir/Ops.def moe_route_sigmoid for one token.
Route Reference(const float* logits, int64_t E, int64_t k, const float* bias, bool norm, double scale) {
  std::vector<double> p(E), sel(E);
  for (int64_t e = 0; e < E; ++e) {
    p[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
    sel[e] = p[e] + (bias ? bias[e] : 0.0);
  }
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return sel[a] > sel[b]; });
  Route r;
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    r.ids.push_back(order[i]);
    r.weights.push_back(p[order[i]]);
    sum += p[order[i]];
  }
  for (double& w : r.weights) {
    if (norm) w /= std::max(sum, 6.103515625e-5);
    if (scale != 0 && scale != 1) w *= scale;
  }
  return r;
}

TEST(MoeRouteSigmoidTest, MatchesFloat64Reference) {
  constexpr int64_t T = 7, E = 16, k = 4;
  const std::vector<float> logits = memra::testing::RandomNormal(T * E, 11, 2.0f);
  const std::vector<float> bias = memra::testing::RandomNormal(E, 12, 0.3f);
  for (const bool use_bias : {false, true})
    for (const bool norm : {false, true})
      for (const double scale : {0.0, 2.5}) {
        std::vector<float> w(T * k, -1.0f);
        std::vector<int32_t> ids(T * k, -1);
        MoeRouteSigmoid(logits.data(), T, E, k, use_bias ? bias.data() : nullptr, norm, static_cast<float>(scale),
                        w.data(), ids.data());
        for (int64_t t = 0; t < T; ++t) {
          const Route r = Reference(&logits[t * E], E, k, use_bias ? bias.data() : nullptr, norm, scale);
          for (int64_t i = 0; i < k; ++i) {
            EXPECT_EQ(ids[t * k + i], r.ids[i]) << "t " << t << " i " << i << " bias " << use_bias;
            EXPECT_NEAR(w[t * k + i], r.weights[i], 2e-6 * std::max(1.0, std::fabs(r.weights[i])))
                << "t " << t << " i " << i << " norm " << norm << " scale " << scale;
          }
        }
      }
}

// The bias moves the choice but not the weights: a large bias on expert 0 picks it although its
// logit is the smallest, and its weight is its own sigmoid.
TEST(MoeRouteSigmoidTest, BiasChoosesProbabilityWeights) {
  const float logits[4] = {-3, 1, 2, 0};
  const float bias[4] = {5, 0, 0, 0};
  float w[2];
  int32_t ids[2];
  MoeRouteSigmoid(logits, 1, 4, 2, bias, /*norm=*/false, 0.0f, w, ids);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 2);
  EXPECT_NEAR(w[0], 1.0 / (1.0 + std::exp(3.0)), 1e-7);
  EXPECT_NEAR(w[1], 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
}

// Equal scores: the lower expert id first (ir/Ops.def); all-zero probabilities cannot divide by 0.
TEST(MoeRouteSigmoidTest, TiesAndTinySums) {
  const float logits[6] = {1, 1, 1, 1, 1, 1};
  float w[3];
  int32_t ids[3];
  MoeRouteSigmoid(logits, 1, 6, 3, nullptr, true, 1.0f, w, ids);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 3), (std::vector<int32_t>{0, 1, 2}));
  for (float x : w) EXPECT_FLOAT_EQ(x, 1.0f / 3.0f);
  const float low[3] = {-200, -200, -200};  // sigmoid underflows to 0
  MoeRouteSigmoid(low, 1, 3, 2, nullptr, true, 1.0f, w, ids);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(std::isfinite(w[i]) && w[i] == 0.0f) << w[i];
}

}  // namespace
}  // namespace memra::kernels::cpu

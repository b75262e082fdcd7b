// Conv1dCausal, DeltaNetGates and GatedDeltaScan against float64 loops written from the formulas.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/DeltaNet.h"
#include "kernels/cpu/ThreadPool.h"
#include "tests/TestUtil.h"

namespace memra::kernels::cpu {
namespace {

using memra::testing::RandomNormal;
std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) { return RandomNormal(n, seed, scale); }

TEST(Conv1dCausalTest, HandValues) {
  // One channel, d_conv 3, state [10, 20], x = [1, 2, 3], w = [0.5, 0.25, 1].
  const float x[3] = {1, 2, 3}, w[3] = {0.5f, 0.25f, 1};
  float state[2] = {10, 20}, out[3];
  Conv1dCausal(x, 3, 1, w, 3, state, out, /*apply_silu=*/false);
  EXPECT_FLOAT_EQ(out[0], 10 * 0.5f + 20 * 0.25f + 1);
  EXPECT_FLOAT_EQ(out[1], 20 * 0.5f + 1 * 0.25f + 2);
  EXPECT_FLOAT_EQ(out[2], 1 * 0.5f + 2 * 0.25f + 3);
  EXPECT_EQ(state[0], 2);
  EXPECT_EQ(state[1], 3);
  // T = 1 < d_conv - 1: the state keeps one old input.
  const float x1[1] = {7};
  Conv1dCausal(x1, 1, 1, w, 3, state, out, false);
  EXPECT_FLOAT_EQ(out[0], 2 * 0.5f + 3 * 0.25f + 7);
  EXPECT_EQ(state[0], 3);
  EXPECT_EQ(state[1], 7);
  // SiLU applied.
  float st2[2] = {0, 0}, o2[1];
  const float one[1] = {1};
  Conv1dCausal(one, 1, 1, w, 3, st2, o2, true);
  EXPECT_NEAR(o2[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
}

TEST(Conv1dCausalTest, MatchesDoubleAndChunking) {
  const int64_t T = 11, C = 40, K = 4;
  auto x = Random(T * C, 1), w = Random(C * K, 2, 0.5f), s0 = Random(C * (K - 1), 3);
  std::vector<float> out(T * C), st = s0;
  ThreadPool pool(3);
  Conv1dCausal(x.data(), T, C, w.data(), K, st.data(), out.data(), true, &pool);
  for (int64_t ch = 0; ch < C; ++ch) {
    auto ext = [&](int64_t tau) -> double {  // tau indexes concat(state, x)
      return tau < K - 1 ? s0[ch * (K - 1) + tau] : x[(tau - (K - 1)) * C + ch];
    };
    for (int64_t t = 0; t < T; ++t) {
      double sum = 0;
      for (int64_t i = 0; i < K; ++i) sum += ext(t + i) * w[ch * K + i];
      ASSERT_NEAR(out[t * C + ch], sum / (1 + std::exp(-sum)), 1e-6) << ch << " " << t;
    }
    for (int64_t i = 0; i < K - 1; ++i) EXPECT_EQ(st[ch * (K - 1) + i], x[(T - (K - 1) + i) * C + ch]);
  }
  // Two calls (4 + 7 tokens) give the same outputs and state, bit for bit.
  std::vector<float> out2(T * C), st2 = s0;
  Conv1dCausal(x.data(), 4, C, w.data(), K, st2.data(), out2.data(), true);
  Conv1dCausal(x.data() + 4 * C, T - 4, C, w.data(), K, st2.data(), out2.data() + 4 * C, true);
  EXPECT_EQ(out, out2);
  EXPECT_EQ(st, st2);
}

TEST(DeltaNetGatesTest, Formula) {
  const int64_t T = 3, H = 2;
  const float b[6] = {0, 1, -2, 3, 0.5f, -0.5f}, a[6] = {-1, 0, 1, 2, 25, -30};
  const float dt[2] = {-2.5f, 0.3f}, A[2] = {-1.0f, -8.0f};
  float beta[6], g[6];
  DeltaNetGates(b, a, T, H, dt, A, beta, g);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t i = t * H + h;
      EXPECT_NEAR(beta[i], 1.0 / (1.0 + std::exp(-double(b[i]))), 1e-7);
      const double sp = std::log1p(std::exp(double(a[i]) + dt[h]));
      EXPECT_NEAR(g[i], A[h] * sp, 1e-6 * (1 + std::fabs(A[h] * sp)));
      EXPECT_LE(g[i], 0.0f);
    }
}

// The gated delta rule with an explicit S[i][j] matrix in double.
void NaiveScan(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
               const std::vector<float>& g, const std::vector<float>& beta, int64_t T, int64_t Hk, int64_t Hv,
               int64_t dk, int64_t dv, double scale, std::vector<double>& S /*[Hv][dk][dv]*/,
               std::vector<double>& out) {
  out.assign(T * Hv * dv, 0.0);
  for (int64_t h = 0; h < Hv; ++h) {
    const int64_t kh = h % Hk;
    double* s = &S[h * dk * dv];
    for (int64_t t = 0; t < T; ++t) {
      const double decay = std::exp(double(g[t * Hv + h])), b = beta[t * Hv + h];
      for (int64_t i = 0; i < dk * dv; ++i) s[i] *= decay;
      std::vector<double> d(dv);
      for (int64_t j = 0; j < dv; ++j) {
        double sk = 0;
        for (int64_t i = 0; i < dk; ++i) sk += s[i * dv + j] * k[(t * Hk + kh) * dk + i];
        d[j] = (v[(t * Hv + h) * dv + j] - sk) * b;
      }
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) s[i * dv + j] += k[(t * Hk + kh) * dk + i] * d[j];
      for (int64_t j = 0; j < dv; ++j) {
        double o = 0;
        for (int64_t i = 0; i < dk; ++i) o += s[i * dv + j] * q[(t * Hk + kh) * dk + i];
        out[(t * Hv + h) * dv + j] = o * scale;
      }
    }
  }
}

TEST(GatedDeltaScanTest, MatchesDoubleLoop) {
  const int64_t T = 20, Hk = 2, Hv = 4, dk = 12, dv = 7;  // dk != dv to pin the layout
  auto q = Random(T * Hk * dk, 1, 0.3f), k = Random(T * Hk * dk, 2, 0.3f), v = Random(T * Hv * dv, 3);
  auto graw = Random(T * Hv, 4), braw = Random(T * Hv, 5);
  std::vector<float> g(T * Hv), beta(T * Hv);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = -std::fabs(graw[i]) * 0.5f;
    beta[i] = 1.0f / (1.0f + std::exp(-braw[i]));
  }
  const float scale = 1.0f / std::sqrt(float(dk));
  auto s0 = Random(Hv * dv * dk, 6, 0.2f);  // nonzero initial state, ggml layout [h][j][i]
  std::vector<double> S(Hv * dk * dv);
  for (int64_t h = 0; h < Hv; ++h)
    for (int64_t j = 0; j < dv; ++j)
      for (int64_t i = 0; i < dk; ++i) S[(h * dk + i) * dv + j] = s0[(h * dv + j) * dk + i];
  std::vector<double> ref;
  NaiveScan(q, k, v, g, beta, T, Hk, Hv, dk, dv, scale, S, ref);

  std::vector<float> state = s0, out(T * Hv * dv);
  ThreadPool pool(3);
  GatedDeltaScan(q.data(), k.data(), v.data(), g.data(), beta.data(), T, Hk, Hv, dk, dv, scale, state.data(),
                 out.data(), &pool);
  double max_err = 0, max_serr = 0;
  for (size_t i = 0; i < out.size(); ++i) max_err = std::max(max_err, std::fabs(out[i] - ref[i]));
  for (int64_t h = 0; h < Hv; ++h)
    for (int64_t j = 0; j < dv; ++j)
      for (int64_t i = 0; i < dk; ++i)
        max_serr = std::max(max_serr, std::fabs(state[(h * dv + j) * dk + i] - S[(h * dk + i) * dv + j]));
  EXPECT_LT(max_err, 1e-5);
  EXPECT_LT(max_serr, 1e-5);

  // Token by token (decode) and in two chunks: bit-identical to one call.
  std::vector<float> st1 = s0, o1(T * Hv * dv);
  for (int64_t t = 0; t < T; ++t)
    GatedDeltaScan(q.data() + t * Hk * dk, k.data() + t * Hk * dk, v.data() + t * Hv * dv, g.data() + t * Hv,
                   beta.data() + t * Hv, 1, Hk, Hv, dk, dv, scale, st1.data(), o1.data() + t * Hv * dv);
  EXPECT_EQ(o1, out);
  EXPECT_EQ(st1, state);
}

TEST(GatedDeltaScanTest, SingleStepHandCase) {
  // dk = dv = 1, zero state: S = k*beta*v, o = scale*S*q.
  const float q = 2, k = 3, v = 5, g = -0.7f, beta = 0.5f;
  float state = 0, out = 0;
  GatedDeltaScan(&q, &k, &v, &g, &beta, 1, 1, 1, 1, 1, 0.25f, &state, &out);
  EXPECT_FLOAT_EQ(state, 3 * 0.5f * 5);
  EXPECT_FLOAT_EQ(out, 0.25f * 7.5f * 2);
  // Second step: decay first, then the delta correction uses the decayed state.
  float out2 = 0;
  GatedDeltaScan(&q, &k, &v, &g, &beta, 1, 1, 1, 1, 1, 0.25f, &state, &out2);
  const double s1 = 7.5 * std::exp(-0.7);
  const double s2 = s1 + 3 * (5 - s1 * 3) * 0.5;
  EXPECT_NEAR(state, s2, 1e-5);
  EXPECT_NEAR(out2, 0.25 * s2 * 2, 1e-5);
}

}  // namespace
}  // namespace memra::kernels::cpu

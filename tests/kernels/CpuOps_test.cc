// Unit tests of the elementwise, normalization, RoPE and sampling kernels against hand-checked
// values and float64 references.
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/Elementwise.h"
#include "kernels/cpu/Norm.h"
#include "kernels/cpu/Rope.h"
#include "kernels/cpu/Sampling.h"
#include "kernels/cpu/ThreadPool.h"
#include "tests/TestUtil.h"

namespace memra::kernels::cpu {
namespace {

using memra::testing::RandomNormal;
std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) { return RandomNormal(n, seed, scale); }

TEST(ElementwiseTest, HandValues) {
  const float a[3] = {1, -2, 0.5f}, b[3] = {3, 4, -2};
  float out[3];
  Add(a, b, 3, out);
  EXPECT_FLOAT_EQ(out[0], 4);
  EXPECT_FLOAT_EQ(out[1], 2);
  EXPECT_FLOAT_EQ(out[2], -1.5f);
  Mul(a, b, 3, out);
  EXPECT_FLOAT_EQ(out[0], 3);
  EXPECT_FLOAT_EQ(out[1], -8);
  EXPECT_FLOAT_EQ(out[2], -1);
  const float x[4] = {0, 2, -3, 30};
  float y[4];
  Sigmoid(x, 4, y);
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  EXPECT_NEAR(y[1], 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
  Silu(x, 4, y);
  EXPECT_FLOAT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[2], -3.0 / (1.0 + std::exp(3.0)), 1e-7);
  EXPECT_FLOAT_EQ(y[3], 30.0f);
  Gelu(x, 4, y);  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in double
  for (int i = 0; i < 4; ++i) {
    const double v = x[i], want = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(y[i], want, 1e-6 * std::max(1.0, std::fabs(want))) << x[i];
  }
  EXPECT_EQ(y[0], 0.0f);
  Tanh(x, 4, y);
  EXPECT_NEAR(y[1], std::tanh(2.0), 1e-7);
  EXPECT_EQ(y[3], 1.0f);
  Softplus(x, 4, y);
  EXPECT_NEAR(y[0], std::log(2.0), 1e-7);
  EXPECT_NEAR(y[2], std::log1p(std::exp(-3.0)), 1e-8);
  EXPECT_FLOAT_EQ(y[3], 30.0f);
  const float g[2] = {1, -1}, u[2] = {2, 3};
  float s[2];
  Swiglu(g, u, 2, s);
  EXPECT_NEAR(s[0], 2.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(s[1], 3.0 * -1.0 / (1.0 + std::exp(1.0)), 1e-6);
  // In place.
  float z[3] = {1, 2, 3};
  Add(z, z, 3, z);
  EXPECT_FLOAT_EQ(z[2], 6);
}

TEST(ElementwiseTest, RowHelpers) {
  const float m[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  float cols[2][2];
  CopyColumns(&m[0][0], 2, 4, 1, 2, &cols[0][0]);
  EXPECT_EQ(cols[0][0], 2);
  EXPECT_EQ(cols[0][1], 3);
  EXPECT_EQ(cols[1][0], 6);
  EXPECT_EQ(cols[1][1], 7);
  float last[4];
  TakeLastRow(&m[0][0], 2, 4, last);
  EXPECT_EQ(last[0], 5);
  EXPECT_EQ(last[3], 8);
  const float w[4] = {1, 0, -1, 2};
  float mr[2][4];
  MulRows(&m[0][0], w, 2, 4, &mr[0][0]);
  EXPECT_EQ(mr[1][2], -7);
  EXPECT_EQ(mr[1][3], 16);
  const float s2[2] = {0.5f, -2};
  float sr[2][4];
  ScaleRows(&m[0][0], s2, 2, 4, &sr[0][0]);
  EXPECT_EQ(sr[0][0], 0.5f);
  EXPECT_EQ(sr[0][3], 2);
  EXPECT_EQ(sr[1][0], -10);
  EXPECT_EQ(sr[1][3], -16);
}

// Step 3.5's clamped SwiGLU, limit 1.5: min(silu(g), 1.5) * clamp(u, -1.5, 1.5); without a limit
// the plain SwiGLU bit for bit.
TEST(ElementwiseTest, ClampedSwiglu) {
  const float g[5] = {4, 4, -1, 0.5f, 1};
  const float u[5] = {1, -3, 2, 0.25f, 1.5f};
  float y[5], plain[5], zero[5];
  Swiglu(g, u, 5, y, 1.5f);
  Swiglu(g, u, 5, plain);
  Swiglu(g, u, 5, zero, 0.0f);
  const double silu4 = 4.0 / (1.0 + std::exp(-4.0));  // 3.93: clamped to 1.5
  ASSERT_GT(silu4, 1.5);
  EXPECT_FLOAT_EQ(y[0], 1.5f * 1.0f);
  EXPECT_FLOAT_EQ(y[1], 1.5f * -1.5f);                          // both clamped
  EXPECT_NEAR(y[2], -1.0 / (1.0 + std::exp(1.0)) * 1.5, 1e-6);  // silu < 0 kept, up clamped
  EXPECT_EQ(y[3], SiluScalar(0.5f) * 0.25f);                    // inside: unchanged
  EXPECT_EQ(y[4], SiluScalar(1.0f) * 1.5f);                     // at the limit
  for (int i = 0; i < 5; ++i) EXPECT_EQ(zero[i], plain[i]) << i;
}

TEST(NormTest, RmsNormHand) {
  // x = [3, 4]: mean square 12.5, rms 3.5355...
  const float x[2] = {3, 4}, w[2] = {2, 0.5f};
  float y[2];
  RmsNorm(x, w, 1, 2, 0.0f, y);
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5) * 2, 1e-6);
  EXPECT_NEAR(y[1], 4 / std::sqrt(12.5) * 0.5, 1e-6);
  RmsNorm(x, nullptr, 1, 2, 0.0f, y);
  EXPECT_NEAR(y[1], 4 / std::sqrt(12.5), 1e-6);
}

TEST(NormTest, RmsNormMatchesDoubleAndThreads) {
  const int64_t rows = 37, cols = 256;
  auto x = Random(rows * cols, 1, 3.0f);
  auto w = Random(cols, 2);
  std::vector<float> y(rows * cols), y4(rows * cols);
  RmsNorm(x.data(), w.data(), rows, cols, 1e-6f, y.data());
  ThreadPool pool(4);
  RmsNorm(x.data(), w.data(), rows, cols, 1e-6f, y4.data(), &pool);
  EXPECT_EQ(y, y4);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
    const double s = 1.0 / std::sqrt(ss / cols + 1e-6);
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_NEAR(y[r * cols + c], x[r * cols + c] * s * w[c], 2e-6 * (1 + std::fabs(y[r * cols + c])));
  }
  // In place.
  RmsNorm(x.data(), w.data(), rows, cols, 1e-6f, x.data());
  EXPECT_EQ(x, y);
}

TEST(NormTest, L2Norm) {
  const float x[4] = {3, 4, 0, 0};
  float y[4];
  L2Norm(x, 2, 2, 1e-6f, y);
  EXPECT_FLOAT_EQ(y[0], 0.6f);
  EXPECT_FLOAT_EQ(y[1], 0.8f);
  // A zero row stays zero (divided by eps, not by 0).
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 0.0f);
  // A tiny row is divided by eps: x / max(||x||, eps).
  const float t[2] = {1e-8f, 0};
  L2Norm(t, 1, 2, 1e-6f, y);
  EXPECT_NEAR(y[0], 1e-2, 1e-9);
}

TEST(NormTest, GatedRmsNorm) {
  const int64_t rows = 5, cols = 32;
  auto x = Random(rows * cols, 3), z = Random(rows * cols, 4), w = Random(cols, 5);
  std::vector<float> y(rows * cols);
  GatedRmsNorm(x.data(), w.data(), z.data(), rows, cols, 1e-6f, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
    const double s = 1.0 / std::sqrt(ss / cols + 1e-6);
    for (int64_t c = 0; c < cols; ++c) {
      const double zz = z[r * cols + c];
      const double ref = x[r * cols + c] * s * w[c] * zz / (1 + std::exp(-zz));
      ASSERT_NEAR(y[r * cols + c], ref, 1e-6 * (1 + std::fabs(ref)));
    }
  }
}

TEST(RopeTest, MatchesFormula) {
  const int64_t T = 5, H = 3, D = 64, n_rot = 16;
  const float base = 1e7f;
  auto x = Random(T * H * D, 7);
  auto y = x;
  const int32_t pos[T] = {0, 1, 17, 47, 300};
  RopeNeox(y.data(), T, H, D, n_rot, base, pos);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const float* a = &x[(t * H + h) * D];
      const float* b = &y[(t * H + h) * D];
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        const double th = pos[t] * std::pow(double(base), -2.0 * i / n_rot);
        const double r0 = a[i] * std::cos(th) - a[i + n_rot / 2] * std::sin(th);
        const double r1 = a[i] * std::sin(th) + a[i + n_rot / 2] * std::cos(th);
        // theta is built by repeated f32 multiplication (as ggml): a few ulp of theta.
        const double tol = 1e-6 + 4e-7 * pos[t] * (std::fabs(a[i]) + std::fabs(a[i + n_rot / 2]));
        EXPECT_NEAR(b[i], r0, tol);
        EXPECT_NEAR(b[i + n_rot / 2], r1, tol);
      }
      for (int64_t i = n_rot; i < D; ++i) EXPECT_EQ(b[i], a[i]);
    }
  // Position 0 is the identity.
  const int32_t zero[1] = {0};
  auto one = std::vector<float>(x.begin(), x.begin() + H * D);
  auto keep = one;
  RopeNeox(one.data(), 1, H, D, n_rot, base, zero);
  EXPECT_EQ(one, keep);
}

// freq_factors (ggml_rope_ext): all 1 is bitwise the plain rope; 1e30 leaves a pair unrotated
// (Gemma 4's proportional rope); any other factor f rotates pair i by theta_i / f.
TEST(RopeTest, FreqFactors) {
  const int64_t T = 4, H = 2, D = 16, n_rot = 16;
  const float base = 1e6f;
  auto x = Random(T * H * D, 9);
  const int32_t pos[T] = {0, 3, 40, 511};
  auto plain = x, ones = x, mixed = x;
  RopeNeox(plain.data(), T, H, D, n_rot, base, pos);
  const std::vector<float> one(n_rot / 2, 1.0f);
  RopeNeox(ones.data(), T, H, D, n_rot, base, pos, one.data());
  EXPECT_EQ(ones, plain);
  std::vector<float> ff(n_rot / 2, 1e30f);
  ff[0] = 1.0f;
  ff[1] = 4.0f;
  RopeNeox(mixed.data(), T, H, D, n_rot, base, pos, ff.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t o = (t * H + h) * D;
      EXPECT_EQ(mixed[o], plain[o]);  // factor 1
      EXPECT_EQ(mixed[o + n_rot / 2], plain[o + n_rot / 2]);
      const double th = pos[t] * std::pow(double(base), -2.0 / n_rot) / 4.0;  // pair 1, factor 4
      EXPECT_NEAR(mixed[o + 1], x[o + 1] * std::cos(th) - x[o + 1 + n_rot / 2] * std::sin(th), 1e-5);
      for (int64_t i = 2; i < n_rot / 2; ++i) {  // factor 1e30: cos 1, sin 0
        EXPECT_EQ(mixed[o + i], x[o + i]);
        EXPECT_EQ(mixed[o + i + n_rot / 2], x[o + i + n_rot / 2]);
      }
    }
}

TEST(RopeTest, QuarterTurn) {
  // n_rot 2, base irrelevant for i = 0: theta = p. p with cos≈0: rotate (1, 0) -> (cos p, sin p).
  float v[4] = {1, 0, 5, 6};
  const int32_t pos[1] = {2};
  RopeNeox(v, 1, 1, 4, 2, 10000.0f, pos);
  EXPECT_NEAR(v[0], std::cos(2.0), 1e-7);
  EXPECT_NEAR(v[1], std::sin(2.0), 1e-7);
  EXPECT_EQ(v[2], 5);
  EXPECT_EQ(v[3], 6);
}

TEST(SamplingTest, SoftmaxArgmax) {
  const float x[4] = {1, 3, 3, -1};
  float p[4];
  Softmax(x, 1, 4, p);
  const double den = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(-1.0);
  EXPECT_NEAR(p[0], std::exp(1.0) / den, 1e-7);
  EXPECT_NEAR(p[1], std::exp(3.0) / den, 1e-7);
  EXPECT_NEAR(p[0] + p[1] + p[2] + p[3], 1.0, 1e-6);
  EXPECT_EQ(Argmax(x, 4), 1);  // ties go to the lowest id
  const float with_nan[3] = {NAN, -5, -7};
  EXPECT_EQ(Argmax(with_nan, 3), 1);
  // Large logits do not overflow.
  const float big[2] = {1000, 1000};
  Softmax(big, 1, 2, p);
  EXPECT_FLOAT_EQ(p[0], 0.5f);
}

TEST(SamplingTest, TopKCandidates) {
  const float logits[5] = {0.0f, 2.0f, 1.0f, 2.0f, -1.0f};
  auto c = TopKCandidates(logits, 5, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].id, 1);  // ties by the lower id
  EXPECT_EQ(c[1].id, 3);
  EXPECT_EQ(c[2].id, 2);
  EXPECT_EQ(TopKCandidates(logits, 5, 0).size(), 5u);
}

TEST(SamplingTest, SampleToken) {
  const float logits[4] = {0.0f, 5.0f, 1.0f, 4.9f};
  std::mt19937_64 rng(42);
  SamplingParams greedy;
  EXPECT_EQ(SampleToken(logits, 4, greedy, rng), 1);
  SamplingParams topk1{1.0f, 1, 1.0f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(SampleToken(logits, 4, topk1, rng), 1);
  // top-k 2 at temperature 1: ids 1 and 3 only, with frequencies ~ e^5 : e^4.9.
  SamplingParams topk2{1.0f, 2, 1.0f};
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 20000; ++i) ++counts[SampleToken(logits, 4, topk2, rng)];
  EXPECT_EQ(counts[0] + counts[2], 0);
  const double p1 = 1.0 / (1.0 + std::exp(-0.1));
  EXPECT_NEAR(counts[1] / 20000.0, p1, 0.02);
  // Same seed, same draws.
  std::mt19937_64 a(7), b(7);
  SamplingParams hot{2.0f, 0, 0.95f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(SampleToken(logits, 4, hot, a), SampleToken(logits, 4, hot, b));
}

TEST(SamplingTest, PenaltiesStage) {
  // repeat 2, frequency 0.5, presence 0.25 over the whole history; ids 7 and -2 are outside the
  // vocabulary and ignored.
  SamplingParams p;
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.repeat_last_n = -1;
  EXPECT_TRUE(PenaltiesEnabled(p));
  const std::vector<int32_t> history = {0, 1, 0, 7, -2};
  std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f};
  ApplyPenalties(l.data(), 5, history, p);
  EXPECT_FLOAT_EQ(l[0], 2.0f / 2 - (2 * 0.5f + 0.25f));   // positive: divided; count 2
  EXPECT_FLOAT_EQ(l[1], -1.0f * 2 - (1 * 0.5f + 0.25f));  // negative: multiplied; count 1
  EXPECT_FLOAT_EQ(l[2], 0.5f);                            // not in the history
  EXPECT_FLOAT_EQ(l[3], 3.0f);
  EXPECT_FLOAT_EQ(l[4], 1.0f);
  // A zero logit counts as negative (multiplied: stays 0), then the subtractions apply.
  std::vector<float> z = {0.0f};
  ApplyPenalties(z.data(), 1, std::vector<int32_t>{0}, p);
  EXPECT_FLOAT_EQ(z[0], -0.75f);

  // The window is the last repeat_last_n tokens: {0, 3} of {0, 1, 0, 3}.
  p.repeat_last_n = 2;
  l = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f};
  ApplyPenalties(l.data(), 5, std::vector<int32_t>{0, 1, 0, 3}, p);
  EXPECT_FLOAT_EQ(l[0], 2.0f / 2 - 0.75f);
  EXPECT_FLOAT_EQ(l[1], -1.0f);
  EXPECT_FLOAT_EQ(l[3], 3.0f / 2 - 0.75f);
  // A window longer than the history takes all of it.
  p.repeat_last_n = 64;
  l = {2.0f, -1.0f};
  ApplyPenalties(l.data(), 2, std::vector<int32_t>{1, 1, 1}, p);
  EXPECT_FLOAT_EQ(l[0], 2.0f);
  EXPECT_FLOAT_EQ(l[1], -2.0f - (3 * 0.5f + 0.25f));

  // Off: repeat_last_n 0, or all three penalties neutral (the defaults).
  p.repeat_last_n = 0;
  EXPECT_FALSE(PenaltiesEnabled(p));
  l = {2.0f, -1.0f};
  ApplyPenalties(l.data(), 2, std::vector<int32_t>{0, 1}, p);
  EXPECT_EQ(l, (std::vector<float>{2.0f, -1.0f}));
  EXPECT_FALSE(PenaltiesEnabled(SamplingParams{}));
  SamplingParams rep;
  rep.repeat_penalty = 1.5f;  // alone: 3 -> 2, -1 -> -1.5
  EXPECT_TRUE(PenaltiesEnabled(rep));
  l = {3.0f, -1.0f};
  ApplyPenalties(l.data(), 2, std::vector<int32_t>{0, 1}, rep);
  EXPECT_FLOAT_EQ(l[0], 2.0f);
  EXPECT_FLOAT_EQ(l[1], -1.5f);
}

TEST(SamplingTest, MinPStage) {
  const float logits[4] = {3.0f, 2.0f, 0.0f, -1.0f};
  // The ids min-p leaves: every id some draw u in [0, 1) can reach (temperature 1).
  auto kept = [&](float min_p) {
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.min_p = min_p;
    std::set<int32_t> ids;
    for (int s = 0; s < 4000; ++s) {
      RowSampling r = MakeRowSampling(sp, {}, s / 4000.0f);
      ids.insert(SampleRow(logits, 4, r.params, nullptr, nullptr, 0));
    }
    return ids.size();
  };
  // p_i / p_max = e^(l_i - 3): 1, 0.368, 0.0498, 0.0183.
  EXPECT_EQ(kept(0.0f), 4u);   // off
  EXPECT_EQ(kept(0.01f), 4u);  // threshold 3 + ln 0.01 = -1.61
  EXPECT_EQ(kept(0.1f), 2u);   // 0.697: keeps 3, 2
  EXPECT_EQ(kept(0.3f), 2u);   // 1.796
  EXPECT_EQ(kept(0.5f), 1u);   // 2.307
  EXPECT_EQ(kept(2.0f), 1u);   // the largest always stays
}

TEST(SamplingTest, GreedyWithPenaltiesIsTheArgmaxOfThePenalizedLogits) {
  // llama.cpp's temperature stage at temp <= 0 keeps only the largest logit after the penalties.
  const float logits[4] = {0.0f, 5.0f, 1.0f, 4.9f};
  std::mt19937_64 rng(1);
  const std::vector<int32_t> h1 = {1};
  SamplingParams g;
  EXPECT_EQ(SampleToken(logits, 4, g, rng, h1), 1);  // no penalties: plain argmax
  g.repeat_penalty = 1.1f;                           // 5 / 1.1 = 4.55 < 4.9
  EXPECT_EQ(SampleToken(logits, 4, g, rng, h1), 3);
  EXPECT_EQ(SampleToken(logits, 4, g, rng), 1);  // no history
  g.repeat_last_n = 0;
  EXPECT_EQ(SampleToken(logits, 4, g, rng, h1), 1);
  SamplingParams pres;
  pres.presence_penalty = 0.2f;  // 4.8 < 4.9
  EXPECT_EQ(SampleToken(logits, 4, pres, rng, h1), 3);
  pres.repeat_last_n = 1;  // only the newest token counts
  EXPECT_EQ(SampleToken(logits, 4, pres, rng, std::vector<int32_t>{2, 1}), 3);
  EXPECT_EQ(SampleToken(logits, 4, pres, rng, std::vector<int32_t>{1, 2}), 1);
}

TEST(SamplingTest, ChainOrder) {
  const int kDraws = 20000;
  // Penalties before top-k: id 1 (5 -> 2.5) falls below id 3, so top-k 1 keeps 3 only (top-k first
  // would have kept id 1).
  {
    const float logits[4] = {0.0f, 5.0f, 1.0f, 4.9f};
    SamplingParams p{1.0f, 1, 1.0f};
    p.repeat_penalty = 2.0f;
    std::mt19937_64 rng(3);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(SampleToken(logits, 4, p, rng, std::vector<int32_t>{1}), 3);
    // With a presence penalty of 100 on ids 1 and 3, top-k 2 keeps ids 2 (logit 1) and 0 (logit 0).
    SamplingParams q{1.0f, 2, 1.0f};
    q.presence_penalty = 100.0f;
    int counts[4] = {0, 0, 0, 0};
    for (int i = 0; i < kDraws; ++i) ++counts[SampleToken(logits, 4, q, rng, std::vector<int32_t>{1, 3})];
    EXPECT_EQ(counts[1] + counts[3], 0);
    EXPECT_NEAR(counts[2] / double(kDraws), std::exp(1.0) / (std::exp(1.0) + 1.0), 0.02);
  }
  // Top-p before min-p. Logits {1, 0.9, 0 x 8}: Z = e + e^0.9 + 8 = 13.178; top-p 0.5 keeps
  // 0.206 + 0.187 + 0.076 + 0.076 -> 4 ids, then min-p 0.5 (threshold 1 + ln 0.5 = 0.307) keeps
  // ids 0 and 1. Min-p first would leave {0, 1}, where top-p 0.5 keeps id 0 alone (0.525).
  {
    std::vector<float> logits(10, 0.0f);
    logits[0] = 1.0f;
    logits[1] = 0.9f;
    SamplingParams p{1.0f, 0, 0.5f};
    p.min_p = 0.5f;
    std::mt19937_64 rng(5);
    int counts[10] = {};
    for (int i = 0; i < kDraws; ++i) ++counts[SampleToken(logits.data(), 10, p, rng)];
    EXPECT_EQ(counts[0] + counts[1], kDraws);
    EXPECT_NEAR(counts[1] / double(kDraws), 1.0 / (1.0 + std::exp(0.1)), 0.02);  // 0.475
  }
  // Min-p before temperature. Logits {0, 2, 1.5}: min-p 0.5 on the untempered logits (threshold
  // 1.307) keeps ids 1 and 2; temperature 0.25 then gives 8 vs 6, p(2) = 1 / (1 + e^2) = 0.119.
  // After the temperature, min-p would have kept id 1 alone.
  {
    const float logits[3] = {0.0f, 2.0f, 1.5f};
    SamplingParams p{0.25f, 0, 1.0f};
    p.min_p = 0.5f;
    std::mt19937_64 rng(9);
    int counts[3] = {0, 0, 0};
    for (int i = 0; i < kDraws; ++i) ++counts[SampleToken(logits, 3, p, rng)];
    EXPECT_EQ(counts[0], 0);
    EXPECT_NEAR(counts[2] / double(kDraws), 1.0 / (1.0 + std::exp(2.0)), 0.01);
  }
}

// SampleRow's stages as docs/design/sampling.md defines them, on a 500-id row swept over u: picks
// stay in the top k / the nucleus / above min-p, the draw is an inverse CDF in id order (the pick
// never decreases as u grows) that reaches every kept id of weight, and a NaN row gives -1.
TEST(SamplingTest, SampleRowStages) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  constexpr int kV = 500;
  std::vector<float> l(kV);
  for (float& x : l) x = nd(rng);
  std::vector<int32_t> order(kV);
  for (int i = 0; i < kV; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  auto sweep = [&](float temp, float top_k, float top_p, float min_p_logit) {
    std::vector<int32_t> picks;
    for (int s = 0; s < 2000; ++s) {
      float params[8] = {temp, top_k, top_p, min_p_logit, s / 2000.0f, 1.0f, 0.0f, 0.0f};
      picks.push_back(SampleRow(l.data(), kV, params, nullptr, nullptr, 0));
    }
    return picks;
  };
  auto rank_of = [&](int32_t id) {
    return static_cast<int>(std::find(order.begin(), order.end(), id) - order.begin());
  };
  // top-k 7: only the 7 best, each of them drawn at some u, in increasing id order along u.
  auto k7 = sweep(1.0f, 7.0f, 1.0f, -INFINITY);
  std::set<int32_t> seen(k7.begin(), k7.end());
  EXPECT_EQ(seen.size(), 7u);
  for (int32_t id : k7) EXPECT_LT(rank_of(id), 7) << id;
  EXPECT_TRUE(std::is_sorted(k7.begin(), k7.end()));
  // top-p 0.5: the nucleus by double-precision softmax (one id of slack at its edge).
  double z = 0;
  for (float x : l) z += std::exp(static_cast<double>(x) - l[order[0]]);
  int nucleus = 0;
  for (double cum = 0; cum < 0.5 * z; ++nucleus) cum += std::exp(static_cast<double>(l[order[nucleus]]) - l[order[0]]);
  auto p5 = sweep(1.0f, 0.0f, 0.5f, -INFINITY);
  int deepest = 0;
  for (int32_t id : p5) deepest = std::max(deepest, rank_of(id));
  EXPECT_GE(deepest + 1, nucleus - 1);
  EXPECT_LE(deepest + 1, nucleus + 1);
  EXPECT_TRUE(std::is_sorted(p5.begin(), p5.end()));
  // min-p 0.1: every pick within log(10) of the top logit.
  for (int32_t id : sweep(1.5f, 0.0f, 1.0f, std::log(0.1f))) EXPECT_GE(l[id], l[order[0]] + std::log(0.1f)) << id;
  // Temperature alone reaches deep into the row; near zero it is the argmax.
  auto hot = sweep(2.0f, 0.0f, 1.0f, -INFINITY);
  EXPECT_GT(std::set<int32_t>(hot.begin(), hot.end()).size(), 50u);
  for (int32_t id : sweep(1e-4f, 0.0f, 1.0f, -INFINITY)) EXPECT_EQ(id, order[0]);
  // Penalties (ids, then counts) take effect before the stages: the top id penalized away.
  const int32_t ids[1] = {order[0]}, counts[1] = {1};
  float greedy[8] = {0.0f, 0.0f, 1.0f, -INFINITY, 0.0f, 1.0f, 0.0f, 100.0f};
  EXPECT_EQ(SampleRow(l.data(), kV, greedy, ids, counts, 1), order[1]);
  l[123] = NAN;
  EXPECT_EQ(SampleRow(l.data(), kV, greedy, ids, counts, 1), -1);
}

TEST(SamplingTest, CheckSamplingParams) {
  EXPECT_TRUE(CheckSamplingParams(SamplingParams{}).ok());
  SamplingParams p;
  p.repeat_last_n = -1;
  p.repeat_penalty = 1.3f;
  p.frequency_penalty = -0.5f;  // negative penalties are allowed (they encourage repeats)
  EXPECT_TRUE(CheckSamplingParams(p).ok());
  auto bad = [](auto mutate, absl::string_view field) {
    SamplingParams q;
    mutate(q);
    absl::Status st = CheckSamplingParams(q);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(st.message().find(field), absl::string_view::npos) << st;
  };
  bad([](SamplingParams& q) { q.repeat_penalty = 0.0f; }, "repeat_penalty");
  bad([](SamplingParams& q) { q.repeat_penalty = -1.0f; }, "repeat_penalty");
  bad([](SamplingParams& q) { q.repeat_penalty = 1e-39f; }, "repeat_penalty");  // 1 / x overflows
  bad([](SamplingParams& q) { q.min_p = NAN; }, "min_p");
  bad([](SamplingParams& q) { q.presence_penalty = INFINITY; }, "presence_penalty");
  bad([](SamplingParams& q) { q.frequency_penalty = NAN; }, "frequency_penalty");
  bad([](SamplingParams& q) { q.temperature = NAN; }, "temperature");
  bad([](SamplingParams& q) { q.repeat_last_n = -2; }, "repeat_last_n");
}

}  // namespace
}  // namespace memra::kernels::cpu

// CausalAttention / KvAppend / QGateSplit against a naive float64 implementation.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/Attention.h"
#include "kernels/cpu/ThreadPool.h"
#include "tests/TestUtil.h"

namespace memra::kernels::cpu {
namespace {

using memra::testing::RandomNormal;
std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) { return RandomNormal(n, seed, scale); }

// Naive double attention: query t (absolute position P+t) over keys 0..P+t.
std::vector<double> NaiveAttention(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, int64_t T, int64_t P, int64_t H, int64_t Hkv, int64_t D,
                                   double scale) {
  std::vector<double> out(T * H * D, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / (H / Hkv);
      std::vector<double> s(P + t + 1);
      double mx = -1e300;
      for (int64_t j = 0; j <= P + t; ++j) {
        double d = 0;
        for (int64_t i = 0; i < D; ++i) d += double(q[(t * H + h) * D + i]) * k[(j * Hkv + kvh) * D + i];
        s[j] = d * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j <= P + t; ++j)
        for (int64_t i = 0; i < D; ++i) out[(t * H + h) * D + i] += s[j] / sum * v[(j * Hkv + kvh) * D + i];
    }
  return out;
}

TEST(AttentionTest, QGateSplit) {
  // T=1, 2 heads, head_dim 2: qg = [q0 q0 | g0 g0 | q1 q1 | g1 g1].
  const float qg[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float q[4], g[4];
  QGateSplit(qg, 1, 2, 2, q, g);
  EXPECT_EQ(q[0], 1);
  EXPECT_EQ(q[1], 2);
  EXPECT_EQ(q[2], 5);
  EXPECT_EQ(q[3], 6);
  EXPECT_EQ(g[0], 3);
  EXPECT_EQ(g[1], 4);
  EXPECT_EQ(g[2], 7);
  EXPECT_EQ(g[3], 8);
}

TEST(AttentionTest, KvAppendBounds) {
  std::vector<float> cache(4 * 3, -1.0f);
  const float rows[6] = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(KvAppend(rows, 2, 3, 1, 4, cache.data()).ok());
  EXPECT_EQ(cache[2], -1.0f);
  EXPECT_EQ(cache[3], 1.0f);
  EXPECT_EQ(cache[8], 6.0f);
  EXPECT_EQ(cache[9], -1.0f);
  auto st = KvAppend(rows, 2, 3, 3, 4, cache.data());
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("overflow"), absl::string_view::npos) << st;
}

TEST(AttentionTest, MatchesNaiveDoubleWithPastAndGqa) {
  const int64_t H = 4, Hkv = 2, D = 64, P = 5, T = 7, cap = 16;
  const float scale = 1.0f / std::sqrt(float(D));
  auto q = Random(T * H * D, 1);
  auto k_all = Random((P + T) * Hkv * D, 2);
  auto v_all = Random((P + T) * Hkv * D, 3);
  std::vector<float> kc(cap * Hkv * D, NAN), vc(cap * Hkv * D, NAN);  // rows past P+T poisoned
  ASSERT_TRUE(KvAppend(k_all.data(), P, Hkv * D, 0, cap, kc.data()).ok());
  ASSERT_TRUE(KvAppend(v_all.data(), P, Hkv * D, 0, cap, vc.data()).ok());
  ASSERT_TRUE(KvAppend(k_all.data() + P * Hkv * D, T, Hkv * D, P, cap, kc.data()).ok());
  ASSERT_TRUE(KvAppend(v_all.data() + P * Hkv * D, T, Hkv * D, P, cap, vc.data()).ok());
  std::vector<float> out(T * H * D), out3(T * H * D);
  CausalAttention(q.data(), T, P, kc.data(), vc.data(), H, Hkv, D, scale, out.data());
  ThreadPool pool(3);
  CausalAttention(q.data(), T, P, kc.data(), vc.data(), H, Hkv, D, scale, out3.data(), &pool);
  EXPECT_EQ(out, out3);  // thread count does not change a bit
  auto ref = NaiveAttention(q, k_all, v_all, T, P, H, Hkv, D, scale);
  double max_err = 0;
  for (size_t i = 0; i < out.size(); ++i) max_err = std::max(max_err, std::fabs(out[i] - ref[i]));
  EXPECT_LT(max_err, 2e-6);
}

TEST(AttentionTest, DecodeStepEqualsLastRowOfPrefill) {
  const int64_t H = 2, Hkv = 1, D = 8, T = 6;
  auto q = Random(T * H * D, 4), k = Random(T * Hkv * D, 5), v = Random(T * Hkv * D, 6);
  std::vector<float> all(T * H * D), last(H * D);
  CausalAttention(q.data(), T, 0, k.data(), v.data(), H, Hkv, D, 0.3f, all.data());
  CausalAttention(q.data() + (T - 1) * H * D, 1, T - 1, k.data(), v.data(), H, Hkv, D, 0.3f, last.data());
  for (int64_t i = 0; i < H * D; ++i) EXPECT_EQ(last[i], all[(T - 1) * H * D + i]);
  // The first token attends to itself only: output = its own v.
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < D; ++i) EXPECT_FLOAT_EQ(all[h * D + i], v[i]);
}

}  // namespace
}  // namespace memra::kernels::cpu

// CausalAttention / KvAppend / QGateSplit against a naive float64 implementation.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/Attention.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/formats/Quant.h"
#include "tests/TestUtil.h"

namespace memra::kernels::cpu {
namespace {

using memra::testing::RandomNormal;
std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) { return RandomNormal(n, seed, scale); }

// Naive double attention: query t (absolute position P+t) over keys 0..P+t, or with a sliding
// window W > 0 over the keys j > P+t-W.
std::vector<double> NaiveAttention(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, int64_t T, int64_t P, int64_t H, int64_t Hkv, int64_t D,
                                   double scale, int64_t window = 0) {
  std::vector<double> out(T * H * D, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / (H / Hkv);
      const int64_t j0 = window > 0 ? std::max<int64_t>(0, P + t - window + 1) : 0;
      std::vector<double> s(P + t + 1, 0.0);
      double mx = -1e300;
      for (int64_t j = j0; j <= P + t; ++j) {
        double d = 0;
        for (int64_t i = 0; i < D; ++i) d += double(q[(t * H + h) * D + i]) * k[(j * Hkv + kvh) * D + i];
        s[j] = d * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int64_t j = j0; j <= P + t; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int64_t j = j0; j <= P + t; ++j)
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

// Sliding windows (Gemma 4, Step 3.5): against the naive double form with GQA and a past; a window
// wider than the context is bit-identical to none; the paged form equals the contiguous one bit for
// bit, and needs no block before the window.
TEST(AttentionTest, SlidingWindow) {
  const int64_t T = 9, P = 14, H = 4, Hkv = 2, D = 8, W = 5;
  auto q = Random(T * H * D, 31), k = Random((P + T) * Hkv * D, 32), v = Random((P + T) * Hkv * D, 33);
  const float scale = 0.4f;
  std::vector<float> out(T * H * D), full(T * H * D), wide(T * H * D);
  ThreadPool pool(2);
  CausalAttention(q.data(), T, P, k.data(), v.data(), H, Hkv, D, scale, out.data(), &pool, W);
  const auto ref = NaiveAttention(q, k, v, T, P, H, Hkv, D, scale, W);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-5) << i;
  CausalAttention(q.data(), T, P, k.data(), v.data(), H, Hkv, D, scale, full.data(), &pool);
  CausalAttention(q.data(), T, P, k.data(), v.data(), H, Hkv, D, scale, wide.data(), &pool, P + T + 1);
  EXPECT_EQ(full, wide);
  EXPECT_NE(full, out);
  // Paged: one slot, blocks of 4 in reverse order; the blocks wholly before every row's window
  // (keys < P - W + 1 = 10, blocks 0 and 1) are missing (-1) and must not be read.
  const int64_t block = 4, max_blocks = 6, n_blocks = 6;
  const int32_t table[max_blocks] = {-1, -1, 3, 2, 1, 0};
  std::vector<float> kp(n_blocks * block * Hkv * D, 0.0f), vp(kp.size(), 0.0f);
  for (int64_t j = 8; j < P + T; ++j)
    for (int64_t e = 0; e < Hkv * D; ++e) {
      const int64_t r = (table[j / block] * block + j % block) * Hkv * D + e;
      kp[r] = k[j * Hkv * D + e];
      vp[r] = v[j * Hkv * D + e];
    }
  std::vector<int32_t> pos(T), slot(T, 0);
  for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(P + t);
  std::vector<float> paged(T * H * D);
  ASSERT_TRUE(PagedAttention(q.data(), T, pos.data(), slot.data(), table, max_blocks, block, n_blocks, kp.data(),
                             vp.data(), H, Hkv, D, scale, paged.data(), &pool, W)
                  .ok());
  EXPECT_EQ(paged, out);
  // Without the window the missing blocks are an error naming the slot.
  EXPECT_FALSE(PagedAttention(q.data(), T, pos.data(), slot.data(), table, max_blocks, block, n_blocks, kp.data(),
                              vp.data(), H, Hkv, D, scale, paged.data(), &pool)
                   .ok());
}

// 16-bit and q8_0 caches (-ctk / -ctv f16 / bf16 / q8_0): KvAppend rounds each element to
// nearest-even (q8_0: quantizes each row's blocks as ggml's quantize_row_q8_0), attention reads
// them widened, so its result is bit for bit the f32 cache's over the rounded rows; a paged pool
// gives the same bits; the rounding's cost against float64 over the unrounded rows is printed (and
// bounded loosely: half-precision or 8-bit K and V).
TEST(AttentionTest, StoredCachesEqualF32OverRoundedRows) {
  const int64_t H = 8, Hkv = 2, D = 128, P = 9, T = 6, cap = 16, W = Hkv * D;
  const float scale = 1.0f / std::sqrt(float(D));
  auto q = Random(T * H * D, 11);
  auto k = Random((P + T) * W, 12);
  auto v = Random((P + T) * W, 13, 3.0f);
  for (formats::GgmlType type : {formats::GgmlType::kF16, formats::GgmlType::kBF16, formats::GgmlType::kQ8_0}) {
    SCOPED_TRACE(formats::GgmlTypeName(type));
    const bool q8 = type == formats::GgmlType::kQ8_0;
    auto bytes = [&](int64_t n) { return static_cast<size_t>(q8 ? n / 32 * 34 : n * 2); };
    // The values a stored row reads back: element-wise rounding, or a q8_0 round trip of whole blocks.
    auto rounded = [&](const std::vector<float>& x) {
      std::vector<float> r(x.size());
      if (q8) {
        std::vector<uint8_t> blocks(bytes(static_cast<int64_t>(x.size())));
        EXPECT_TRUE(formats::Quantize(type, x, absl::MakeSpan(blocks)).ok());
        EXPECT_TRUE(formats::Dequantize(type, blocks, absl::MakeSpan(r)).ok());
        return r;
      }
      for (size_t i = 0; i < x.size(); ++i)
        r[i] = type == formats::GgmlType::kF16 ? formats::HalfToFloat(formats::FloatToHalf(x[i]))
                                               : formats::Bf16ToFloat(formats::FloatToBf16(x[i]));
      return r;
    };
    std::vector<uint8_t> kc(bytes(cap * W), 0xff), vc(bytes(cap * W), 0xff);  // NaN past the rows written
    ASSERT_TRUE(KvAppend(k.data(), P + T, W, 0, cap, KvRows(kc.data(), type)).ok());
    ASSERT_TRUE(KvAppend(v.data(), P + T, W, 0, cap, KvRows(vc.data(), type)).ok());
    const std::vector<float> kr = rounded(k), vr = rounded(v);
    std::vector<float> out16(T * H * D), out32(T * H * D);
    ThreadPool pool(2);
    CausalAttention(q.data(), T, P, ConstKvRows(kc.data(), type), ConstKvRows(vc.data(), type), H, Hkv, D, scale,
                    out16.data(), &pool);
    CausalAttention(q.data(), T, P, kr.data(), vr.data(), H, Hkv, D, scale, out32.data(), &pool);
    EXPECT_EQ(out16, out32);
    // The same rows in a paged pool of two blocks of 8, in reverse order.
    const int64_t block = 8;
    const int32_t table[2] = {1, 0};
    std::vector<uint8_t> kp(bytes(2 * block * W), 0xff), vp(kp.size(), 0xff);
    for (int64_t j = 0; j < P + T; ++j) {
      const int64_t r = (table[j / block] * block + j % block) * W;
      ASSERT_TRUE(StoreKvElements(k.data() + j * W, W, KvRows(kp.data(), type), r).ok());
      ASSERT_TRUE(StoreKvElements(v.data() + j * W, W, KvRows(vp.data(), type), r).ok());
    }
    std::vector<int32_t> pos(T), slot(T, 0);
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(P + t);
    std::vector<float> paged(T * H * D);
    ASSERT_TRUE(PagedAttention(q.data(), T, pos.data(), slot.data(), table, 2, block, 2, ConstKvRows(kp.data(), type),
                               ConstKvRows(vp.data(), type), H, Hkv, D, scale, paged.data(), &pool)
                    .ok());
    EXPECT_EQ(paged, out32);
    const auto ref = NaiveAttention(q, k, v, T, P, H, Hkv, D, scale);
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err += (out16[i] - ref[i]) * (out16[i] - ref[i]);
      norm += ref[i] * ref[i];
    }
    std::printf("  %s KV cache: normalized MSE %.3g against float64 over the unrounded rows\n",
                std::string(formats::GgmlTypeName(type)).c_str(), err / norm);
    EXPECT_LT(err / norm, type == formats::GgmlType::kF16 ? 1e-6 : 1e-4);
  }
  // A cache type the kernels do not store is an error, not a silent f32 write; so is a q8_0 row
  // that is not whole blocks (a head size that is not a multiple of 32).
  std::vector<uint8_t> q4(cap * W);
  EXPECT_FALSE(KvAppend(k.data(), 1, W, 0, cap, KvRows(q4.data(), formats::GgmlType::kQ4_0)).ok());
  const absl::Status partial = KvAppend(k.data(), 2, 48, 0, cap, KvRows(q4.data(), formats::GgmlType::kQ8_0));
  EXPECT_FALSE(partial.ok());
  EXPECT_NE(partial.message().find("multiple of 32"), std::string::npos) << partial;
}

}  // namespace
}  // namespace memra::kernels::cpu

// Embed / Matmul / DenseWeight against float64 references, for f32 and every block format of the
// dequantization goldens (fixtures/quant: 8 rows of 256 elements per type).
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/Matmul.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Weight.h"
#include "kernels/formats/GgmlType.h"
#include "kernels/formats/Quant.h"
#include "tests/TestUtil.h"

namespace memra::kernels::cpu {
namespace {

using formats::GgmlType;
using memra::testing::FileExists;
using memra::testing::ReadF32File;
using memra::testing::ReadFileBytes;
using memra::testing::SharedPath;
using memra::testing::TestDataPath;

using memra::testing::RandomNormal;
std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) { return RandomNormal(n, seed, scale); }

// y_ref[t][n] = Σ_k x[t][k] w[n][k] in double.
std::vector<double> RefMatmul(const std::vector<float>& x, const std::vector<float>& w, int64_t T, int64_t K,
                              int64_t N) {
  std::vector<double> y(T * N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x[t * K + k]) * w[n * K + k];
      y[t * N + n] = s;
    }
  return y;
}

// Max |y - ref| relative to the magnitude bound Σ|x||w| of each element.
double MaxRelErr(const std::vector<float>& y, const std::vector<double>& ref, const std::vector<float>& x,
                 const std::vector<float>& w, int64_t T, int64_t K, int64_t N) {
  double worst = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double mag = 0;
      for (int64_t k = 0; k < K; ++k) mag += std::fabs(double(x[t * K + k]) * w[n * K + k]);
      worst = std::max(worst, std::fabs(y[t * N + n] - ref[t * N + n]) / (mag + 1e-30));
    }
  return worst;
}

TEST(DotTest, Exact) {
  std::vector<float> a(19), b(19);
  double ref = 0;
  for (int i = 0; i < 19; ++i) {
    a[i] = float(i + 1);
    b[i] = float(i % 3 - 1);
    ref += a[i] * b[i];
  }
  EXPECT_EQ(Dot(a.data(), b.data(), 19), float(ref));
  EXPECT_EQ(Dot(a.data(), b.data(), 0), 0.0f);
}

TEST(MatmulTest, F32MatchesDoubleAndThreadCountInvariant) {
  const int64_t T = 13, K = 200, N = 37;
  auto x = Random(T * K, 1), w = Random(N * K, 2, 0.1f);
  auto view = WeightView::F32(w.data(), N, K);
  std::vector<float> y(T * N), y4(T * N);
  ASSERT_TRUE(Matmul(x.data(), T, view, y.data()).ok());
  ThreadPool pool(4);
  ASSERT_TRUE(Matmul(x.data(), T, view, y4.data(), &pool).ok());
  EXPECT_EQ(y, y4);
  EXPECT_LT(MaxRelErr(y, RefMatmul(x, w, T, K, N), x, w, T, K, N), 1e-6);
  // T = 1 (decode) gives the same row as the batched product.
  std::vector<float> y1(N);
  ASSERT_TRUE(Matmul(x.data() + 5 * K, 1, view, y1.data()).ok());
  for (int64_t n = 0; n < N; ++n) EXPECT_EQ(y1[n], y[5 * N + n]);
}

TEST(MatmulTest, EmbedGathersRowsAndChecksIds) {
  const int64_t V = 10, D = 32;
  auto table = Random(V * D, 3);
  auto view = WeightView::F32(table.data(), V, D);
  const int32_t ids[3] = {9, 0, 4};
  std::vector<float> out(3 * D);
  ASSERT_TRUE(Embed(view, ids, out.data()).ok());
  for (int t = 0; t < 3; ++t)
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(out[t * D + d], table[ids[t] * D + d]);
  const int32_t bad[2] = {1, 10};
  EXPECT_EQ(Embed(view, bad, out.data()).code(), absl::StatusCode::kOutOfRange);
  const int32_t neg[1] = {-1};
  EXPECT_EQ(Embed(view, neg, out.data()).code(), absl::StatusCode::kOutOfRange);
}

TEST(MatmulTest, WeightViewChecksSizes) {
  std::vector<uint8_t> bytes(34 * 3);  // three q8_0 rows of 32
  auto ok = WeightView::Make(GgmlType::kQ8_0, 3, 32, bytes);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->row_bytes, 34u);
  EXPECT_FALSE(WeightView::Make(GgmlType::kQ8_0, 4, 32, bytes).ok());
  EXPECT_FALSE(WeightView::Make(GgmlType::kQ8_0, 3, 30, bytes).ok());  // not a block multiple
}

std::string QuantPath(const std::string& file) {
  std::string local = TestDataPath("quant/" + file);
  return FileExists(local) ? local : SharedPath("fixtures/quant/" + file);
}

// Every golden block format: Matmul over the raw rows == double product over ggml's dequantized
// values; DenseWeight (dequantize once) gives bit-identical results; Embed returns the golden rows.
TEST(MatmulTest, QuantizedGoldens) {
  const char* kTypes[] = {"f16",  "bf16", "q8_0", "q4_0", "q4_1",  "q5_0",  "q5_1",   "q2_K",
                          "q3_K", "q4_K", "q5_K", "q6_K", "mxfp4", "nvfp4", "iq4_nl", "iq4_xs"};
  if (!FileExists(QuantPath("q8_0.raw"))) GTEST_SKIP() << "quant goldens not found at " << QuantPath("");
  const int64_t N = 8, K = 256, T = 5;
  auto x = Random(T * K, 11);
  ThreadPool pool(3);
  int tested = 0;
  for (const char* name : kTypes) {
    SCOPED_TRACE(name);
    auto type = formats::ParseGgmlType(name);
    ASSERT_TRUE(type.ok()) << type.status();
    if (!formats::CanDequantize(*type)) {
      std::printf("  [skip] %s: no dequantizer yet\n", name);
      continue;
    }
    auto raw = ReadFileBytes(QuantPath(absl::StrCat(name, ".raw")));
    auto gold = ReadF32File(QuantPath(absl::StrCat(name, ".dequant.f32")));
    ASSERT_TRUE(raw.ok() && gold.ok());
    auto view = WeightView::Make(*type, N, K, *raw);
    ASSERT_TRUE(view.ok()) << view.status();
    std::vector<float> y(T * N), yd(T * N);
    ASSERT_TRUE(Matmul(x.data(), T, *view, y.data(), &pool).ok());
    EXPECT_LT(MaxRelErr(y, RefMatmul(x, *gold, T, K, N), x, *gold, T, K, N), 1e-6);
    auto dense = DenseWeight::FromView(*view);
    ASSERT_TRUE(dense.ok()) << dense.status();
    EXPECT_EQ(dense->values(), *gold);
    ASSERT_TRUE(Matmul(x.data(), T, dense->view(), yd.data()).ok());
    EXPECT_EQ(y, yd);
    const int32_t ids[2] = {7, 2};
    std::vector<float> e(2 * K);
    ASSERT_TRUE(Embed(*view, ids, e.data()).ok());
    for (int64_t k = 0; k < K; ++k) {
      ASSERT_EQ(e[k], (*gold)[7 * K + k]);
      ASSERT_EQ(e[K + k], (*gold)[2 * K + k]);
    }
    ++tested;
  }
  std::printf("  %d block formats checked\n", tested);
  EXPECT_EQ(tested, static_cast<int>(std::size(kTypes)));  // every golden type decodes
}

TEST(MatmulTest, UndecodableTypeIsAnError) {
  std::vector<uint8_t> bytes(4 * 8);
  auto view = WeightView::Make(GgmlType::kI32, 2, 4, bytes);
  ASSERT_TRUE(view.ok()) << view.status();
  std::vector<float> x(4), y(2);
  if (!CanDecode(GgmlType::kI32)) {
    auto st = Matmul(x.data(), 1, *view, y.data());
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  }
}

}  // namespace
}  // namespace memra::kernels::cpu

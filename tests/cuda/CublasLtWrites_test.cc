// cuBLASLt's output covers y: a bf16 GEMM at a prefill shape (16 x 256 x 256) into y poisoned with
// NaN gives every element, equal to the host's product; the same GEMM into a y never written
// before, then downloaded, is what bench/gpu_sanitize.sh runs under initcheck: a report there
// means the tool did not see cuBLASLt's stores, not that memra reads memory nothing wrote (on the
// H200 with CUDA 13.0 it reports the whole y: bench/RESULTS.md, session 16). And the exact decode
// class's pinned algorithm keeps each row's bits at every M. Skips without a GPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaDevice.h"

namespace memra::runtime::cuda {
namespace {

uint16_t Bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
float FromBf16(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(CublasLtWrites, EveryOutputElementIsWritten) {
  auto dev = CudaDevice::Open(0);
  if (!dev.ok()) GTEST_SKIP() << "no GPU: " << dev.status().message();
  auto blas = CublasLt::Create();
  if (!blas.ok()) GTEST_SKIP() << "no cuBLASLt: " << blas.status().message();
  constexpr int64_t M = 16, N = 256, K = 256;
  std::vector<uint16_t> x(M * K), w(N * K);
  for (int64_t i = 0; i < M * K; ++i) x[i] = Bf16(std::sin(0.37f * static_cast<float>(i)));
  for (int64_t i = 0; i < N * K; ++i) w[i] = Bf16(std::cos(0.11f * static_cast<float>(i)) * 0.1f);
  std::vector<float> want(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(FromBf16(x[m * K + k])) * FromBf16(w[n * K + k]);
      want[m * N + n] = static_cast<float>(s);
    }
  auto dx = (*dev)->Alloc(x.size() * 2, "x");
  auto dw = (*dev)->Alloc(w.size() * 2, "w");
  auto poisoned = (*dev)->Alloc(M * N * 4, "y poisoned");
  auto fresh = (*dev)->Alloc(M * N * 4, "y never written");
  ASSERT_TRUE(dx.ok() && dw.ok() && poisoned.ok() && fresh.ok());
  ASSERT_TRUE((*dev)->Upload(dx->ptr(), x.data(), x.size() * 2).ok());
  ASSERT_TRUE((*dev)->Upload(dw->ptr(), w.data(), w.size() * 2).ok());
  ASSERT_EQ((*dev)->driver().cuMemsetD8Async(poisoned->ptr(), 0xff, M * N * 4, (*dev)->stream()), 0);
  for (CUdeviceptr y : {poisoned->ptr(), fresh->ptr()}) {
    ASSERT_TRUE((*blas)->Matmul(dx->ptr(), dw->ptr(), y, M, N, K, ir::DType::kBF16, (*dev)->stream()).ok());
    std::vector<float> got(M * N);
    ASSERT_TRUE((*dev)->Download(got.data(), y, got.size() * 4).ok());
    int wrong = 0;
    for (int64_t i = 0; i < M * N; ++i) wrong += !(std::fabs(got[i] - want[i]) <= 1e-3f * (1.0f + std::fabs(want[i])));
    EXPECT_EQ(wrong, 0) << (y == poisoned->ptr() ? "poisoned" : "fresh") << " y: elements unwritten or wrong";
  }
}

// The exact decode class's cuBLASLt (row_invariant): one algorithm pinned per weight shape, so
// each row's result is the same bits whatever M the call has. Shapes: a square product, and the
// 9B's 32-row ssm_alpha / ssm_beta shape, whose heuristic offers only split-K candidates (the pin
// then forces K unsplit). Rows 0..8 compared at M = 9, 16, 64, 200 and 512.
TEST(CublasLtWrites, RowInvariantPinKeepsEachRowsBitsAtEveryM) {
  auto dev = CudaDevice::Open(0);
  if (!dev.ok()) GTEST_SKIP() << "no GPU: " << dev.status().message();
  auto blas = CublasLt::Create(size_t{32} << 20, /*row_invariant=*/true);
  if (!blas.ok()) GTEST_SKIP() << "no cuBLASLt: " << blas.status().message();
  constexpr int64_t kMaxM = 512, kRows = 9;
  for (const auto [N, K] : {std::pair<int64_t, int64_t>{1024, 1024}, {32, 4096}}) {
    std::vector<uint16_t> x(kMaxM * K), w(N * K);
    for (int64_t i = 0; i < kMaxM * K; ++i) x[i] = Bf16(std::sin(0.37f * static_cast<float>(i)));
    for (int64_t i = 0; i < N * K; ++i) w[i] = Bf16(std::cos(0.11f * static_cast<float>(i)) * 0.1f);
    auto dx = (*dev)->Alloc(x.size() * 2, "x");
    auto dw = (*dev)->Alloc(w.size() * 2, "w");
    auto dy = (*dev)->Alloc(kMaxM * N * 4, "y");
    ASSERT_TRUE(dx.ok() && dw.ok() && dy.ok());
    ASSERT_TRUE((*dev)->Upload(dx->ptr(), x.data(), x.size() * 2).ok());
    ASSERT_TRUE((*dev)->Upload(dw->ptr(), w.data(), w.size() * 2).ok());
    std::vector<uint32_t> first;
    for (int64_t M : {9, 16, 64, 200, 512}) {
      ASSERT_EQ((*dev)->driver().cuMemsetD8Async(dy->ptr(), 0xff, kMaxM * N * 4, (*dev)->stream()), 0);
      const absl::Status st =
          (*blas)->Matmul(dx->ptr(), dw->ptr(), dy->ptr(), M, N, K, ir::DType::kBF16, (*dev)->stream());
      ASSERT_TRUE(st.ok()) << "N=" << N << " K=" << K << " M=" << M << ": " << st;
      std::vector<uint32_t> got(kRows * N);
      ASSERT_TRUE((*dev)->Download(got.data(), dy->ptr(), got.size() * 4).ok());
      if (first.empty()) {
        first = got;
        int unwritten = 0;
        for (uint32_t v : got) unwritten += v == 0xffffffffu;
        EXPECT_EQ(unwritten, 0) << "N=" << N << " K=" << K;
      } else {
        int differ = 0;
        for (size_t i = 0; i < got.size(); ++i) differ += got[i] != first[i];
        EXPECT_EQ(differ, 0) << "N=" << N << " K=" << K << ": rows 0.." << kRows - 1 << " at M=" << M
                             << " differ from M=9 in " << differ << " elements";
      }
    }
  }
}

}  // namespace
}  // namespace memra::runtime::cuda

// fuse-matmul-delta-net-step on the CPU executor: a delta-net layer's input projections and its
// step (2 key heads, 4 value heads of 32, K = 64), matrices in f32, f16 and bf16, give bit for bit
// the same outputs after the pass as before it over a run of tokens (the conv and delta states
// carried from token to token in each executor).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "gtest/gtest.h"
#include "ir/Parser.h"
#include "ir/StatusMacros.h"
#include "kernels/formats/GgmlType.h"
#include "kernels/formats/Quant.h"
#include "runtime/cpu/CpuExecutor.h"
#include "tests/TestUtil.h"

namespace memra::runtime {
namespace {

using formats::GgmlType;

constexpr int64_t kHk = 2, kHv = 4, kD = 32, kK = 64, kC = 2 * kHk * kD + kHv * kD;

struct Program {
  std::unique_ptr<ir::Module> m;
  std::unique_ptr<gguf::GgufFile> file;
};

absl::StatusOr<Program> Build(GgmlType type) {
  const std::string t(formats::GgmlTypeName(type));
  const std::string text = absl::StrCat(
      "weight @w_qkv : ", t, "[", kC, ", ", kK, "]\nweight @w_z : ", t, "[", kHv * kD, ", ", kK, "]\n",
      "weight @w_b : ", t, "[", kHv, ", ", kK, "]\nweight @w_a : ", t, "[", kHv, ", ", kK, "]\n",
      "weight @conv_w : f32[", kC, ", 4]\nweight @dt_bias : f32[", kHv, "]\nweight @ssm_a : f32[", kHv, "]\n",
      "weight @norm_w : f32[", kD, "]\nstate conv @conv : f32[", kC, ", 3]\nstate delta @delta : f32[", kHv, ", ", kD,
      ", ", kD, "]\n", "func @step(%x: f32[1, ", kK, "]) -> (f32[1, ", kHv, ", ", kD, "]) {\n",
      "  %qkv, %z, %b, %a = matmul_group(%x, @w_qkv, @w_z, @w_b, @w_a) : f32[1, ", kC, "], f32[1, ", kHv * kD,
      "], f32[1, ", kHv, "], f32[1, ", kHv, "]\n", "  %zr = reshape(%z) : f32[1, ", kHv, ", ", kD, "]\n",
      "  %y = delta_net_step(%qkv, @conv_w, %b, %a, @dt_bias, @ssm_a, %zr, @norm_w, @conv, @delta) {eps = 1e-6, "
      "qk_l2_eps = 1e-6, scale = 0.17677669529663687} : f32[1, ",
      kHv, ", ", kD, "]\n  return %y\n}\n");
  Program p;
  MEMRA_ASSIGN_OR_RETURN(p.m, ir::ParseModule(text));
  gguf::GgufWriter writer;
  int seed = 7;
  for (auto [name, rows] :
       {std::pair<const char*, int64_t>{"w_qkv", kC}, {"w_z", kHv * kD}, {"w_b", kHv}, {"w_a", kHv}}) {
    const std::vector<float> w = memra::testing::RandomNormal(rows * kK, seed++, 0.2f);
    MEMRA_ASSIGN_OR_RETURN(const uint64_t row_bytes, formats::RowBytes(type, kK));
    std::vector<uint8_t> wb(static_cast<size_t>(rows) * row_bytes);
    MEMRA_RETURN_IF_ERROR(formats::Quantize(type, w, absl::MakeSpan(wb)));
    MEMRA_RETURN_IF_ERROR(writer.AddTensorBytes(name, type, {kK, rows}, wb));
  }
  auto f32 = [&](const char* name, std::vector<float> v, std::vector<int64_t> ne) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return writer.AddTensorBytes(name, GgmlType::kF32, ne, b);
  };
  MEMRA_RETURN_IF_ERROR(f32("conv_w", memra::testing::RandomNormal(kC * 4, 20, 0.5f), {4, kC}));
  MEMRA_RETURN_IF_ERROR(f32("dt_bias", memra::testing::RandomNormal(kHv, 21, 0.3f), {kHv}));
  std::vector<float> a = memra::testing::RandomNormal(kHv, 22, 0.5f);
  for (float& e : a) e = -std::exp(e);
  MEMRA_RETURN_IF_ERROR(f32("ssm_a", a, {kHv}));
  std::vector<float> nw = memra::testing::RandomNormal(kD, 23, 0.1f);
  for (float& e : nw) e += 1.0f;
  MEMRA_RETURN_IF_ERROR(f32("norm_w", nw, {kD}));
  MEMRA_ASSIGN_OR_RETURN(auto bytes, writer.WriteToBytes());
  MEMRA_ASSIGN_OR_RETURN(p.file, gguf::GgufFile::FromBytes(bytes, "matmul-delta-net-step.gguf"));
  return p;
}

class MatMulDeltaNetStepExecution : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatMulDeltaNetStepExecution, FusedStepIsBitIdenticalToTheTwoOps) {
  auto plain = Build(GetParam());
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto fused = Build(GetParam());
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(memra::testing::CompileModule(*fused->m, "fuse-matmul-delta-net-step").ok());
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kMatMulDeltaNetStep), 1);
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kMatMulGroup), 0);
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kDeltaNetStep), 0);
  auto a = CpuExecutor::Create(*plain->m, *plain->file);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = CpuExecutor::Create(*fused->m, *fused->file);
  ASSERT_TRUE(b.ok()) << b.status();
  std::mt19937 rng(31);
  std::normal_distribution<float> n(0.0f, 1.0f);
  bool moved = false;
  std::vector<float> first;
  for (int s = 0; s < 12; ++s) {
    std::vector<float> x(kK);
    for (float& e : x) e = n(rng);
    const std::vector<HostTensor> args = {HostTensor::FromF32(x, {1, kK})};
    auto ya = (*a)->Run("step", args);
    auto yb = (*b)->Run("step", args);
    ASSERT_TRUE(ya.ok() && yb.ok()) << ya.status() << yb.status();
    ASSERT_TRUE(memra::testing::SameBytes((*ya)[0], (*yb)[0])) << "y, token " << s;
    // The states carry: the same x at a later token gives another y.
    if (s == 0) first.assign((*yb)[0].f32(), (*yb)[0].f32() + (*yb)[0].numel());
  }
  std::vector<float> x0(kK);
  std::mt19937 rng0(31);
  for (float& e : x0) e = n(rng0);
  auto again = (*b)->Run("step", {HostTensor::FromF32(x0, {1, kK})});
  ASSERT_TRUE(again.ok()) << again.status();
  for (int64_t i = 0; i < (*again)[0].numel(); ++i) moved |= (*again)[0].f32()[i] != first[i];
  EXPECT_TRUE(moved) << "the step's states did not carry between calls";
}

INSTANTIATE_TEST_SUITE_P(Matrices, MatMulDeltaNetStepExecution,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16),
                         [](const ::testing::TestParamInfo<GgmlType>& i) {
                           return std::string(formats::GgmlTypeName(i.param));
                         });

}  // namespace
}  // namespace memra::runtime

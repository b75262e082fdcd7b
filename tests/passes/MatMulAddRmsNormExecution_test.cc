// fuse-matmul-add-rmsnorm on the CPU executor: a decode step's products before their norms (the
// product as add_rms_norm's a and as its b), matrices in f32, f16, bf16, q8_0 and q4_K, give bit
// for bit the same sum and normalized row after the pass as before it, over many random tokens.
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

struct Case {
  const char* name;
  GgmlType w;
  bool product_first;  // add_rms_norm(p, r) rather than add_rms_norm(r, p)
};
constexpr int64_t kN = 48, kK = 256;

struct Program {
  std::unique_ptr<ir::Module> m;
  std::unique_ptr<gguf::GgufFile> file;
};

absl::StatusOr<Program> Build(const Case& c) {
  const std::string dtype(formats::GgmlTypeName(c.w));
  const std::string row = absl::StrCat("f32[1, ", kN, "]");
  const std::string text = absl::StrCat(
      "weight @w : ", dtype, "[", kN, ", ", kK, "]\nweight @nw : f32[", kN, "]\nfunc @step(%x: f32[1, ", kK,
      "], %r: ", row, ") -> (", row, ", ", row, ") {\n  %p = matmul(%x, @w) : ", row, "\n  %s, %y = add_rms_norm(",
      c.product_first ? "%p, %r" : "%r, %p", ", @nw) {eps = 1e-5} : ", row, ", ", row, "\n  return %s, %y\n}\n");
  Program p;
  MEMRA_ASSIGN_OR_RETURN(p.m, ir::ParseModule(text));
  gguf::GgufWriter writer;
  const std::vector<float> w = memra::testing::RandomNormal(kN * kK, 5, 0.2f);
  MEMRA_ASSIGN_OR_RETURN(const uint64_t row_bytes, formats::RowBytes(c.w, kK));
  std::vector<uint8_t> wb(static_cast<size_t>(kN) * row_bytes);
  MEMRA_RETURN_IF_ERROR(formats::Quantize(c.w, w, absl::MakeSpan(wb)));
  MEMRA_RETURN_IF_ERROR(writer.AddTensorBytes("w", c.w, {kK, kN}, wb));
  const std::vector<float> nw = memra::testing::RandomNormal(kN, 6, 0.5f);
  std::vector<uint8_t> nb(nw.size() * 4);
  std::memcpy(nb.data(), nw.data(), nb.size());
  MEMRA_RETURN_IF_ERROR(writer.AddTensorBytes("nw", GgmlType::kF32, {kN}, nb));
  MEMRA_ASSIGN_OR_RETURN(auto bytes, writer.WriteToBytes());
  MEMRA_ASSIGN_OR_RETURN(p.file, gguf::GgufFile::FromBytes(bytes, "matmul-add-rms-norm.gguf"));
  return p;
}

class MatMulAddRmsNormExecution : public ::testing::TestWithParam<Case> {};

TEST_P(MatMulAddRmsNormExecution, FusedStepIsBitIdenticalToTheTwoOps) {
  const Case& c = GetParam();
  auto plain = Build(c);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto fused = Build(c);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(memra::testing::CompileModule(*fused->m, "fuse-matmul-add-rmsnorm").ok());
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kMatMulAddRmsNorm), 1);
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kMatMul), 0);
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kAddRmsNorm), 0);
  auto a = CpuExecutor::Create(*plain->m, *plain->file);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = CpuExecutor::Create(*fused->m, *fused->file);
  ASSERT_TRUE(b.ok()) << b.status();
  std::mt19937 rng(19);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int s = 0; s < 32; ++s) {
    std::vector<float> x(kK), r(kN);
    for (float& e : x) e = n(rng);
    for (float& e : r) e = 4.0f * n(rng);
    const std::vector<HostTensor> args = {HostTensor::FromF32(x, {1, kK}), HostTensor::FromF32(r, {1, kN})};
    auto ya = (*a)->Run("step", args);
    auto yb = (*b)->Run("step", args);
    ASSERT_TRUE(ya.ok() && yb.ok()) << ya.status() << yb.status();
    ASSERT_TRUE(memra::testing::SameBytes((*ya)[0], (*yb)[0])) << "sum, token " << s;
    ASSERT_TRUE(memra::testing::SameBytes((*ya)[1], (*yb)[1])) << "y, token " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Products, MatMulAddRmsNormExecution,
                         ::testing::Values(Case{"residual_first_f32", GgmlType::kF32, false},
                                           Case{"product_first_f16", GgmlType::kF16, true},
                                           Case{"residual_first_bf16", GgmlType::kBF16, false},
                                           Case{"product_first_q8_0", GgmlType::kQ8_0, true},
                                           Case{"residual_first_q4_K", GgmlType::kQ4_K, false}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace memra::runtime

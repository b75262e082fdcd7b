// fuse-moe-router on the CPU executor: a decode step's router product and routing (softmax with
// and without Gemma 4's per-expert scales; Step 3.5's sigmoid with its selection bias, norm and
// scale, and without them), router weights in f32, f16 and bf16, give bit for bit the same
// weights and ids after the pass as before it, over many random tokens (ties and near-ties of
// the top-k included by the small expert count).
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
#include "kernels/formats/Quant.h"
#include "runtime/cpu/CpuExecutor.h"
#include "tests/TestUtil.h"

namespace memra::runtime {
namespace {

using formats::GgmlType;

struct Case {
  const char* name;
  GgmlType router;
  const char* route;  // the routing op's text over %l, with @pe (per-expert values) as its operand when used
  bool per_expert;
  int64_t k;
};
constexpr int64_t kE = 12, kK = 96;

struct Program {
  std::unique_ptr<ir::Module> m;
  std::unique_ptr<gguf::GgufFile> file;
};

absl::StatusOr<Program> Build(const Case& c) {
  const std::string dtype = c.router == GgmlType::kF32 ? "f32" : c.router == GgmlType::kF16 ? "f16" : "bf16";
  const std::string text =
      absl::StrCat("weight @router : ", dtype, "[", kE, ", ", kK, "]\n",
                   c.per_expert ? absl::StrCat("weight @pe : f32[", kE, "]\n") : "", "func @step(%x: f32[1, ", kK,
                   "]) -> (f32[1, ", c.k, "], i32[1, ", c.k, "]) {\n  %l = matmul(%x, @router) : f32[1, ", kE,
                   "]\n  %w, %ids = ", c.route, " : f32[1, ", c.k, "], i32[1, ", c.k, "]\n  return %w, %ids\n}\n");
  Program p;
  MEMRA_ASSIGN_OR_RETURN(p.m, ir::ParseModule(text));
  gguf::GgufWriter writer;
  const std::vector<float> w = memra::testing::RandomNormal(kE * kK, 5, 0.2f);
  std::vector<uint8_t> wb(w.size() * (c.router == GgmlType::kF32 ? 4 : 2));
  MEMRA_RETURN_IF_ERROR(formats::Quantize(c.router, w, absl::MakeSpan(wb)));
  MEMRA_RETURN_IF_ERROR(writer.AddTensorBytes("router", c.router, {kK, kE}, wb));
  if (c.per_expert) {
    const std::vector<float> pe = memra::testing::RandomNormal(kE, 6, 0.5f);
    std::vector<uint8_t> pb(pe.size() * 4);
    std::memcpy(pb.data(), pe.data(), pb.size());
    MEMRA_RETURN_IF_ERROR(writer.AddTensorBytes("pe", GgmlType::kF32, {kE}, pb));
  }
  MEMRA_ASSIGN_OR_RETURN(auto bytes, writer.WriteToBytes());
  MEMRA_ASSIGN_OR_RETURN(p.file, gguf::GgufFile::FromBytes(bytes, "moe-router.gguf"));
  return p;
}

class MoeRouterExecution : public ::testing::TestWithParam<Case> {};

TEST_P(MoeRouterExecution, FusedStepIsBitIdenticalToTheTwoOps) {
  const Case& c = GetParam();
  auto plain = Build(c);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto fused = Build(c);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(memra::testing::CompileModule(*fused->m, "fuse-moe-router").ok());
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kMoeRouter), 1);
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kMatMul), 0);
  auto a = CpuExecutor::Create(*plain->m, *plain->file);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = CpuExecutor::Create(*fused->m, *fused->file);
  ASSERT_TRUE(b.ok()) << b.status();
  std::mt19937 rng(17);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int s = 0; s < 64; ++s) {
    std::vector<float> x(kK);
    for (float& e : x) e = n(rng);
    if (s % 8 == 7) std::fill(x.begin(), x.end(), 0.0f);  // every logit 0: all experts tie
    const std::vector<HostTensor> args = {HostTensor::FromF32(x, {1, kK})};
    auto ya = (*a)->Run("step", args);
    auto yb = (*b)->Run("step", args);
    ASSERT_TRUE(ya.ok() && yb.ok()) << ya.status() << yb.status();
    ASSERT_TRUE(memra::testing::SameBytes((*ya)[0], (*yb)[0])) << "weights, token " << s;
    ASSERT_TRUE(memra::testing::SameBytes((*ya)[1], (*yb)[1])) << "ids, token " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Routers, MoeRouterExecution,
    ::testing::Values(Case{"softmax_f32", GgmlType::kF32, "moe_route(%l) {k = 4}", false, 4},
                      Case{"softmax_scales_f16", GgmlType::kF16, "moe_route(%l, @pe) {k = 3}", true, 3},
                      Case{"sigmoid_bias_norm_scale_bf16", GgmlType::kBF16,
                           "moe_route_sigmoid(%l, @pe) {k = 5, norm = 1, scale = 2.5}", true, 5},
                      Case{"sigmoid_f32", GgmlType::kF32, "moe_route_sigmoid(%l) {k = 2}", false, 2}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace memra::runtime
